// Command gentyped writes informers/typed_generated.go: what the typed
// factory knows of each resource of client-go's typed clientset, as plain
// code and data, so that the library needs no reflection at run time.
//
// For each resource the clientset lists and watches it writes a function
// returning the resource's facts: group, version, resource, kind, whether
// it is namespaced, an empty object and list, and the accessor of its
// group version's REST client (client.CoreV1().RESTClient()). It writes
// three lookups (by object type; resource to object type; object type to
// resource) and the API group accessors of client-go's
// informers.SharedInformerFactory (Core(), Apps(), ...), each handing the
// factory to client-go's group package, as client-go's own factory does.
//
// No function calls a typed client (client.CoreV1().Pods(ns).List): that
// would make every program keep every typed client and its apply
// configurations (see informers/clientset.go).
//
// It reads client-go's types with reflect, in this program only, at the
// client-go of go.mod (the lowest the module supports), less the group
// versions a newer supported client-go removed (removedAfterFloor), so
// that the file compiles on every supported client-go. Run it outside the
// workspace, which may select a newer client-go:
//
//	go generate ./informers/
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
)

func main() {
	out := flag.String("o", "typed_generated.go", "file to write (- for standard output)")
	flag.Parse()
	src, err := Generate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gentyped:", err)
		os.Exit(1)
	}
	if *out == "-" {
		_, err = os.Stdout.Write(src)
	} else if old, rerr := os.ReadFile(*out); rerr != nil || !bytes.Equal(old, src) {
		err = os.WriteFile(*out, src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gentyped:", err)
		os.Exit(1)
	}
}
