// Command apilist writes the exported API of this repository's modules, one
// declaration per line in the style of Go's own api/ files, so a review sees
// every change to the public surface as a diff of api/*.txt:
//
//	go run ./apilist           rewrite api/freshinformer.txt and api/freshctrl.txt
//	go run ./apilist -check    fail, showing the difference, if they are not current
//
// Run from the hack module (make api, make test).
package main

import (
	"flag"
	"fmt"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/tools/go/packages"
)

// modules are listed by directory (from the repository root) and API file.
var modules = []struct{ dir, file string }{
	{".", "api/freshinformer.txt"},
	{"freshctrl", "api/freshctrl.txt"},
}

func main() {
	check := flag.Bool("check", false, "compare with the checked-in files instead of writing them")
	flag.Parse()
	root, err := filepath.Abs("..")
	if err != nil {
		fail(err)
	}
	stale := false
	for _, m := range modules {
		got, err := list(filepath.Join(root, m.dir))
		if err != nil {
			fail(err)
		}
		path := filepath.Join(root, m.file)
		if !*check {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				fail(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			fail(err)
		}
		if d := diff(string(want), got); d != "" {
			stale = true
			fmt.Fprintf(os.Stderr, "%s is not the exported API (make api rewrites it; review every line):\n%s", m.file, d)
		}
	}
	if stale {
		os.Exit(1)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "apilist:", err)
	os.Exit(2)
}

// list returns the API of the module in dir: its packages outside internal/
// and examples/, without commands.
func list(dir string) (string, error) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes | packages.NeedModule, Dir: dir}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		return "", err
	}
	var lines []string
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			return "", fmt.Errorf("%s: %v", p.PkgPath, p.Errors[0])
		}
		if p.Module == nil || p.Module.Dir != dir || p.Name == "main" {
			continue // another module of the workspace, or a command
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.PkgPath, p.Module.Path), "/")
		if rel == "" {
			rel = "."
		}
		if slices.ContainsFunc(strings.Split(rel, "/"), func(e string) bool { return e == "internal" || e == "examples" }) {
			continue
		}
		lines = append(lines, pkgLines(p.Types, "pkg "+p.PkgPath+", ")...)
	}
	slices.Sort(lines)
	return strings.Join(slices.Compact(lines), "\n") + "\n", nil
}

// pkgLines lists pkg's exported declarations, each prefixed.
func pkgLines(pkg *types.Package, prefix string) []string {
	// Types are written as their package names qualify them, as in Go's
	// api files.
	qual := func(other *types.Package) string {
		if other == pkg {
			return ""
		}
		return other.Name()
	}
	str := func(t types.Type) string { return types.TypeString(t, qual) }
	var out []string
	add := func(s string) { out = append(out, prefix+s) }
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch o := obj.(type) {
		case *types.Const:
			add(fmt.Sprintf("const %s %s = %s", name, str(o.Type()), o.Val().ExactString()))
		case *types.Var:
			add(fmt.Sprintf("var %s %s", name, str(o.Type())))
		case *types.Func:
			add("func " + name + strings.TrimPrefix(str(o.Type()), "func"))
		case *types.TypeName:
			out = append(out, typeLines(o, str, prefix)...)
		}
	}
	return out
}

// typeLines lists a named type: its underlying kind, exported fields or
// interface methods, and the exported methods of T and *T, promoted ones
// included (they are what a user calls).
func typeLines(o *types.TypeName, str func(types.Type) string, prefix string) []string {
	name := o.Name()
	if named, ok := o.Type().(*types.Named); ok && named.TypeParams().Len() > 0 {
		var tp []string
		for i := range named.TypeParams().Len() {
			p := named.TypeParams().At(i)
			tp = append(tp, p.Obj().Name()+" "+str(p.Constraint()))
		}
		name += "[" + strings.Join(tp, ", ") + "]"
	}
	head := prefix + "type " + name
	var out []string
	if o.IsAlias() {
		return []string{head + " = " + str(o.Type())}
	}
	switch u := o.Type().Underlying().(type) {
	case *types.Struct:
		out = append(out, head+" struct")
		for f := range u.Fields() {
			switch {
			case f.Embedded():
				out = append(out, head+", embedded "+str(f.Type()))
			case f.Exported():
				out = append(out, fmt.Sprintf("%s, %s %s", head, f.Name(), str(f.Type())))
			}
		}
	case *types.Interface:
		out = append(out, head+" interface { "+strings.Join(methodNames(u), ", ")+" }")
		for i := range u.NumMethods() {
			if m := u.Method(i); m.Exported() {
				out = append(out, head+", "+m.Name()+strings.TrimPrefix(str(m.Type()), "func"))
			}
		}
		return out
	default:
		out = append(out, head+" "+str(u))
	}
	for _, recv := range []types.Type{o.Type(), types.NewPointer(o.Type())} {
		ms := types.NewMethodSet(recv)
		for i := range ms.Len() {
			m := ms.At(i).Obj().(*types.Func)
			if !m.Exported() || (recv != o.Type() && types.NewMethodSet(o.Type()).Lookup(m.Pkg(), m.Name()) != nil) {
				continue // unexported, or listed for T already
			}
			r := o.Name()
			if _, ok := recv.(*types.Pointer); ok {
				r = "*" + r
			}
			out = append(out, fmt.Sprintf("%smethod (%s) %s%s", prefix, r, m.Name(), strings.TrimPrefix(str(m.Type()), "func")))
		}
	}
	return out
}

// methodNames lists an interface's methods, exported or not: an unexported
// one means nobody outside can implement it.
func methodNames(u *types.Interface) []string {
	var names []string
	for i := range u.NumMethods() {
		names = append(names, u.Method(i).Name())
	}
	for i := range u.NumEmbeddeds() {
		names = append(names, "embedded "+types.TypeString(u.EmbeddedType(i), nil))
	}
	return names
}

// diff returns the lines only in want ("-") or only in got ("+").
func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range w {
		if l != "" && !slices.Contains(g, l) {
			fmt.Fprintf(&b, "-%s\n", l)
		}
	}
	for _, l := range g {
		if l != "" && !slices.Contains(w, l) {
			fmt.Fprintf(&b, "+%s\n", l)
		}
	}
	return b.String()
}
