// Package tools pins the real control-plane binaries used by the
// integration tests: kube-apiserver (k8s.io/kubernetes) and etcd.
//
// It lives in its own module because k8s.io/kubernetes pins every k8s.io
// staging library to its own version (v0.36.x), which must not leak into
// the test module (client-go v0.37.x). Nothing imports this package. The
// imports are in tools.go behind the "tools" build tag (they are main
// packages, so they can be required but never compiled in);
// integration/hack/build-bins.sh builds the two binaries from this module.
// This untagged file keeps `go vet ./...` meaningful here.
package tools
