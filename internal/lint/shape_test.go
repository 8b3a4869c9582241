package lint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function may be, from func to its closing
// brace.
const maxFuncLines = 60

// skippedDirs are not library code: the integration suite, examples,
// commands, build scripts and test data, at any depth.
var skippedDirs = map[string]bool{
	"integration": true, "examples": true, "cmd": true, "hack": true,
	"testdata": true, "vendor": true,
}

// immutableConstructors are the calls, by import path and function name,
// whose results a package-level var may hold: values that cannot change
// once made, so sharing them in a process shares no state.
var immutableConstructors = map[[2]string]string{
	{"regexp", "MustCompile"}: "a *regexp.Regexp is immutable and safe for concurrent use",
	{"reflect", "TypeFor"}:    "a reflect.Type describes a type, which cannot change",
	{"github.com/prometheus/client_golang/prometheus", "NewDesc"}: "a *prometheus.Desc is immutable; package-level descriptors are client_golang's idiom for collectors",
}

// pendingSplit are the functions (file, then name) longer than
// maxFuncLines whose split is under way elsewhere: the test fails on an
// entry whose function is no longer too long (or gone), so none outlives
// its split. Empty: keep it so.
var pendingSplit = map[string]bool{}

// finding is one breach of a rule.
type finding struct {
	file string // slash-separated, relative to the repository root
	line int
	rule string // func-length, unsafe, os-exit or package-var
	msg  string
	fn   string // func-length: the function's name, for pendingSplit
}

func (f finding) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", f.file, f.line, f.rule, f.msg)
}

// checkFile returns the findings in one file's source; name is its path
// relative to the repository root. A generated file has none.
func checkFile(name string, src []byte) ([]finding, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	if ast.IsGenerated(f) {
		return nil, nil
	}
	// A command (package main) owns its process: it may exit and keep
	// state of its own.
	command := f.Name.Name == "main"
	c := checker{fset: fset, file: name, imports: map[string]string{}}
	for _, imp := range f.Imports {
		c.addImport(imp)
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			c.funcLength(d)
		case *ast.GenDecl:
			if d.Tok == token.VAR && !command {
				for _, spec := range d.Specs {
					c.packageVar(spec.(*ast.ValueSpec))
				}
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && !command && c.isFunc(sel, "os", "Exit") {
			c.report(sel.Pos(), "os-exit", "os.Exit ends the process; return an error to the caller", "")
		}
		return true
	})
	return c.findings, nil
}

// checker gathers one file's findings.
type checker struct {
	fset     *token.FileSet
	file     string
	imports  map[string]string // local name to import path
	findings []finding
}

func (c *checker) report(pos token.Pos, rule, msg, fn string) {
	c.findings = append(c.findings, finding{file: c.file, line: c.fset.Position(pos).Line, rule: rule, msg: msg, fn: fn})
}

func (c *checker) addImport(imp *ast.ImportSpec) {
	path, _ := strconv.Unquote(imp.Path.Value)
	if path == "unsafe" {
		c.report(imp.Pos(), "unsafe", `import of "unsafe"`, "")
	}
	name := path[strings.LastIndex(path, "/")+1:]
	if imp.Name != nil {
		name = imp.Name.Name
	}
	c.imports[name] = path
}

// isFunc reports whether sel names function fn of the package imported
// from path.
func (c *checker) isFunc(sel *ast.SelectorExpr, path, fn string) bool {
	x, ok := sel.X.(*ast.Ident)
	return ok && sel.Sel.Name == fn && c.imports[x.Name] == path
}

func (c *checker) funcLength(d *ast.FuncDecl) {
	lines := c.fset.Position(d.End()).Line - c.fset.Position(d.Pos()).Line + 1
	if lines > maxFuncLines {
		c.report(d.Pos(), "func-length", fmt.Sprintf("%s is %d lines, more than %d", d.Name.Name, lines, maxFuncLines), d.Name.Name)
	}
}

func (c *checker) packageVar(spec *ast.ValueSpec) {
	for i, name := range spec.Names {
		var value ast.Expr
		if len(spec.Values) == len(spec.Names) {
			value = spec.Values[i]
		}
		if name.Name == "_" || c.sentinel(name.Name, value) || c.immutable(value) {
			continue
		}
		c.report(name.Pos(), "package-var", fmt.Sprintf("package-level var %s is state shared by the whole process; make it a const, a function, or a field of what uses it", name.Name), "")
	}
}

// sentinel reports whether name = value declares a sentinel error: made by
// errors.New, or another package's sentinel under a name of this one.
func (c *checker) sentinel(name string, value ast.Expr) bool {
	if !strings.HasPrefix(name, "Err") && !strings.HasPrefix(name, "err") {
		return false
	}
	switch v := value.(type) {
	case *ast.CallExpr:
		sel, ok := v.Fun.(*ast.SelectorExpr)
		return ok && c.isFunc(sel, "errors", "New")
	case *ast.SelectorExpr:
		_, pkg := v.X.(*ast.Ident)
		return pkg && strings.HasPrefix(v.Sel.Name, "Err")
	}
	return false
}

// immutable reports whether value is a call of an immutableConstructors
// entry (type arguments allowed).
func (c *checker) immutable(value ast.Expr) bool {
	call, ok := value.(*ast.CallExpr)
	if !ok {
		return false
	}
	fun := call.Fun
	switch f := fun.(type) {
	case *ast.IndexExpr:
		fun = f.X
	case *ast.IndexListExpr:
		fun = f.X
	}
	sel, ok := fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	for k := range immutableConstructors {
		if c.isFunc(sel, k[0], k[1]) {
			return true
		}
	}
	return false
}

// libraryFiles returns the library's non-test Go files under root, relative
// and slash-separated.
func libraryFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (skippedDirs[name] || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	return files, err
}

// TestLibraryShape runs the checker over the library: no finding but the
// functions pendingSplit lists, and every one of those still too long.
func TestLibraryShape(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := libraryFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	// Both modules must be in the walk, or the test checks less than it says.
	for _, want := range []string{"cache/informer.go", "freshctrl/cache.go"} {
		if !slices.Contains(files, want) {
			t.Fatalf("%s is not among the %d library files walked", want, len(files))
		}
	}
	pending := map[string]bool{}
	for _, name := range files {
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		found, err := checkFile(name, src)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range found {
			if key := f.file + " " + f.fn; f.rule == "func-length" && pendingSplit[key] {
				pending[key] = true
				continue
			}
			t.Error(f)
		}
	}
	for key := range pendingSplit {
		if !pending[key] {
			t.Errorf("pendingSplit: %s is no longer longer than %d lines (or is gone): remove its entry", key, maxFuncLines)
		}
	}
}
