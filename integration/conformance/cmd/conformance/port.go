package main

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/tools/go/ast/astutil"
)

// shimPath is the package the ported files call instead of upstream's
// constructors; shimName is the name they import it under.
const (
	shimPath    = "github.com/freshinformer/freshinformer/integration/conformance/shim"
	shimName    = "conformanceshim"
	envtestPath = crModule + "/pkg/envtest"
)

// ginkgoContainers are the ginkgo calls that, as `var _ = X(...)`, declare
// specs at the top level of a file.
var ginkgoContainers = map[string]bool{
	"Describe": true, "FDescribe": true, "PDescribe": true, "XDescribe": true,
	"Context": true, "FContext": true, "PContext": true, "XContext": true,
	"When": true, "FWhen": true, "PWhen": true, "XWhen": true,
	"DescribeTable": true, "FDescribeTable": true, "PDescribeTable": true, "XDescribeTable": true,
	"It": true, "FIt": true, "PIt": true, "XIt": true,
}

// ginkgoNodes are the ginkgo calls whose code location identifies a node
// of a spec (containers, setup and subject nodes), for --focus-file.
var ginkgoNodes = func() map[string]bool {
	m := map[string]bool{
		"BeforeEach": true, "JustBeforeEach": true, "AfterEach": true, "JustAfterEach": true,
		"BeforeAll": true, "AfterAll": true,
	}
	for _, n := range []string{"Describe", "Context", "When", "DescribeTable", "It", "Specify", "Entry"} {
		for _, prefix := range []string{"", "F", "P", "X"} {
			m[prefix+n] = true
		}
	}
	return m
}()

// dropped is a top-level declaration removed because it does not compile
// outside upstream's package.
type dropped struct {
	File   string
	Name   string
	Test   bool     // a test or spec declaration of a selected file
	Errors []string // the compiler's messages
}

// ported is the result of porting one suite.
type ported struct {
	Suite   suite
	Version string // upstream module version
	Dir     string // generated package directory
	Dropped []dropped
	Kept    []string // the tests and spec blocks that remain
	Focus   []string // --ginkgo.focus-file values (CacheBacked)
	// internalImports maps "file\x00name" to the internal package of
	// upstream's that the file imported under name.
	internalImports map[string]string
}

// port copies upstream's test files of s into workDir/s.Dir, rewrites them
// and drops what does not compile until the package builds.
func port(s suite, modDir, version, workDir string, buildFlags []string) (*ported, error) {
	rel := strings.TrimPrefix(strings.TrimPrefix(s.Pkg, s.Module), "/")
	upDir := filepath.Join(modDir, filepath.FromSlash(rel))
	out := filepath.Join(workDir, s.Dir)
	if err := os.RemoveAll(out); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	pattern := "*_test.go"
	if s.WholePackage {
		pattern = "*.go"
	}
	names, err := filepath.Glob(filepath.Join(upDir, pattern))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no %s in upstream's %s (%s)", pattern, s.Pkg, upDir)
	}
	p := &ported{Suite: s, Version: version, Dir: out, internalImports: map[string]string{}}
	upName := path.Base(s.Pkg)
	for _, name := range names {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		base := filepath.Base(name)
		selected := s.Selected == nil || slices.Contains(s.Selected, base)
		pruneOutOfScope(f, selected)
		internal := f.Name.Name == upName && !s.WholePackage
		// Upstream's internal and external test packages stay apart, as
		// they were (their names may clash). A whole package keeps its
		// own.
		if !s.WholePackage {
			f.Name.Name = "conformance"
			if !internal {
				f.Name.Name = "conformance_test"
			}
		}
		rewrite(f, s, internal)
		if err := writeFile(filepath.Join(out, base), fset, f); err != nil {
			return nil, err
		}
	}
	for _, d := range s.CopyDirs {
		if err := exec.Command("cp", "-r", filepath.Join(upDir, d), out).Run(); err != nil {
			return nil, fmt.Errorf("copying %s: %w", d, err)
		}
		// The module cache is read-only; the copy need not be.
		_ = exec.Command("chmod", "-R", "u+w", filepath.Join(out, d)).Run()
	}
	if err := p.compileLoop(buildFlags); err != nil {
		return nil, err
	}
	if err := p.inventory(); err != nil {
		return nil, err
	}
	return p, nil
}

// pruneOutOfScope removes tests that are not part of the suite: every test,
// benchmark, fuzz target, example and spec block of a file not selected,
// and benchmarks and fuzz targets everywhere. TestMain stays.
func pruneOutOfScope(f *ast.File, selected bool) {
	f.Decls = slices.DeleteFunc(f.Decls, func(d ast.Decl) bool {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv != nil || d.Name.Name == "TestMain" {
				return false
			}
			n := d.Name.Name
			if strings.HasPrefix(n, "Benchmark") || strings.HasPrefix(n, "Fuzz") {
				return true
			}
			return !selected && (strings.HasPrefix(n, "Test") || strings.HasPrefix(n, "Example"))
		case *ast.GenDecl:
			return !selected && isSpecDecl(d)
		}
		return false
	})
}

// isSpecDecl reports whether d is `var _ = Describe(...)` or the like.
func isSpecDecl(d *ast.GenDecl) bool {
	return specText(d) != ""
}

// specText is `Describe("text")` for a spec declaration, else "".
func specText(d *ast.GenDecl) string {
	if d.Tok != token.VAR || len(d.Specs) != 1 {
		return ""
	}
	vs, ok := d.Specs[0].(*ast.ValueSpec)
	if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "_" || len(vs.Values) != 1 || vs.Type != nil {
		return ""
	}
	call, ok := vs.Values[0].(*ast.CallExpr)
	if !ok {
		return ""
	}
	fn, ok := call.Fun.(*ast.Ident)
	if !ok || !ginkgoContainers[fn.Name] {
		return ""
	}
	text := ""
	if len(call.Args) > 0 {
		if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			text, _ = strconv.Unquote(lit.Value)
		}
	}
	return fmt.Sprintf("%s(%q)", fn.Name, text)
}

// declName names a top-level declaration for reports.
func declName(d ast.Decl) string {
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv != nil && len(d.Recv.List) == 1 {
			var b bytes.Buffer
			_ = format.Node(&b, token.NewFileSet(), d.Recv.List[0].Type)
			return fmt.Sprintf("(%s).%s", b.String(), d.Name.Name)
		}
		return d.Name.Name
	case *ast.GenDecl:
		if t := specText(d); t != "" {
			return t
		}
		var names []string
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.ValueSpec:
				for _, n := range s.Names {
					names = append(names, n.Name)
				}
			case *ast.TypeSpec:
				names = append(names, s.Name.Name)
			case *ast.ImportSpec:
				names = append(names, "import "+s.Path.Value)
			}
		}
		return strings.Join(names, ", ")
	}
	return "?"
}

// isTestDecl reports whether d is a test of the suite: a Test or Example
// function or a spec block.
func isTestDecl(d ast.Decl) bool {
	switch d := d.(type) {
	case *ast.FuncDecl:
		return d.Recv == nil && d.Name.Name != "TestMain" &&
			(strings.HasPrefix(d.Name.Name, "Test") || strings.HasPrefix(d.Name.Name, "Example"))
	case *ast.GenDecl:
		return isSpecDecl(d)
	}
	return false
}

// rewrite swaps upstream's constructors for the shim's. internal says the
// file was in upstream's package itself: it now reaches that package's
// exported names through a dot import, and its assertions to upstream's
// concrete types become assertions to the exported interfaces.
func rewrite(f *ast.File, s suite, internal bool) {
	// Import names of the packages whose constructors are swapped.
	local := map[string]string{} // local import name -> import path
	envtestName := ""
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		name := path.Base(p)
		if im.Name != nil {
			name = im.Name.Name
		}
		local[name] = p
		if p == envtestPath {
			envtestName = name
		}
	}
	// Package-level *envtest.Environment variables: their Start goes
	// through the shim.
	envs := map[string]bool{}
	if s.Envtest && envtestName != "" {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, sp := range gd.Specs {
				vs := sp.(*ast.ValueSpec)
				if star, ok := vs.Type.(*ast.StarExpr); ok {
					if sel, ok := star.X.(*ast.SelectorExpr); ok && isIdent(sel.X, envtestName) && sel.Sel.Name == "Environment" {
						for _, n := range vs.Names {
							envs[n.Name] = true
						}
					}
				}
			}
		}
	}
	usedShim := false
	shimCall := func(name string) ast.Expr {
		usedShim = true
		return &ast.SelectorExpr{X: ast.NewIdent(shimName), Sel: ast.NewIdent(name)}
	}
	astutil.Apply(f, func(c *astutil.Cursor) bool {
		switch n := c.Node().(type) {
		case *ast.ImportSpec:
			return false
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok {
				if repl, ok := s.Swap[local[x.Name]+"."+n.Sel.Name]; ok {
					c.Replace(shimCall(repl))
					return false
				}
			}
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Start" && len(n.Args) == 0 {
				if x, ok := sel.X.(*ast.Ident); ok && envs[x.Name] {
					c.Replace(&ast.CallExpr{Fun: shimCall("StartEnvtest"), Args: []ast.Expr{x}})
					return false
				}
			}
		case *ast.TypeAssertExpr:
			if internal {
				if star, ok := n.Type.(*ast.StarExpr); ok {
					if id, ok := star.X.(*ast.Ident); ok && s.Assert[id.Name] != "" {
						n.Type = ast.NewIdent(s.Assert[id.Name])
					}
				}
			}
		case *ast.Ident:
			if internal {
				if repl, ok := s.Swap[s.Pkg+"."+n.Name]; ok && !isDeclName(c) {
					c.Replace(shimCall(repl))
				}
			}
		}
		return true
	}, nil)
	if internal {
		astutil.AddNamedImport(token.NewFileSet(), f, ".", s.Pkg)
	}
	if usedShim {
		shim := shimPath
		if s.Shim != "" {
			shim = s.Shim
		}
		astutil.AddNamedImport(token.NewFileSet(), f, shimName, shim)
	}
}

// isDeclName reports whether the cursor's identifier declares something
// (a function, a field, a parameter) rather than referring to it.
func isDeclName(c *astutil.Cursor) bool {
	switch p := c.Parent().(type) {
	case *ast.FuncDecl:
		return c.Name() == "Name"
	case *ast.Field, *ast.TypeSpec, *ast.ValueSpec, *ast.LabeledStmt:
		return true
	case *ast.SelectorExpr:
		return c.Name() == "Sel"
	case *ast.KeyValueExpr:
		// A struct literal's field name.
		return c.Name() == "Key"
	case *ast.AssignStmt:
		return p.Tok == token.DEFINE && c.Name() == "Lhs"
	}
	return false
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func writeFile(name string, fset *token.FileSet, f *ast.File) error {
	var b bytes.Buffer
	b.WriteString("// Code generated by integration/conformance/cmd/conformance from upstream's file; DO NOT EDIT.\n\n")
	if err := format.Node(&b, fset, f); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return os.WriteFile(name, b.Bytes(), 0o644)
}

var compileErr = regexp.MustCompile(`^(?:\./)?(\S+?\.go):(\d+):(\d+): (.*)$`)

// compileLoop compiles the generated package's tests (go list -export:
// type-checked and compiled, not linked) and removes every top-level
// declaration the compiler reports an error in (and imports that become
// unused), until they compile.
func (p *ported) compileLoop(buildFlags []string) error {
	for round := 1; ; round++ {
		args := append([]string{"list", "-e", "-export", "-test", "-gcflags=-e",
			"-f", "{{if .Error}}ERROR {{.ImportPath}}: {{.Error}}{{end}}"}, buildFlags...)
		h := p.Suite.home()
		args = append(args, "./"+h.rel(p.Dir))
		out, err := h.goCmd(args...).CombinedOutput()
		errs := parseErrors(out)
		if err == nil && len(errs) == 0 && !bytes.Contains(out, []byte("ERROR ")) {
			return nil
		}
		if len(errs) == 0 {
			return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if round > 40 {
			return fmt.Errorf("still not compiling after %d rounds:\n%s", round, out)
		}
		progress, err := p.dropAt(errs)
		if err != nil {
			return err
		}
		if !progress {
			return fmt.Errorf("cannot drop what does not compile:\n%s", out)
		}
	}
}

type compileError struct {
	file string
	line int
	msg  string
}

func parseErrors(out []byte) []compileError {
	var errs []compileError
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		m := compileErr.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			if strings.HasPrefix(line, "\t") && len(errs) > 0 {
				errs[len(errs)-1].msg += " " + strings.TrimSpace(line)
			}
			continue
		}
		n, _ := strconv.Atoi(m[2])
		errs = append(errs, compileError{file: filepath.Base(m[1]), line: n, msg: m[4]})
	}
	return errs
}

// dropAt removes the declarations (or imports) that hold errs.
func (p *ported) dropAt(errs []compileError) (bool, error) {
	byFile := map[string][]compileError{}
	for _, e := range errs {
		byFile[e.file] = append(byFile[e.file], e)
	}
	progress := false
	for file, fileErrs := range byFile {
		name := filepath.Join(p.Dir, file)
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return false, err
		}
		drop := map[ast.Decl][]string{}
		var unused []*ast.ImportSpec
		for _, e := range fileErrs {
			d := declAt(fset, f, e.line)
			if d == nil {
				return false, fmt.Errorf("%s:%d: %s: outside any declaration", file, e.line, e.msg)
			}
			if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.IMPORT {
				internalPkg := strings.HasPrefix(e.msg, "use of internal package")
				if !internalPkg && (!strings.Contains(e.msg, "imported") || !strings.HasSuffix(e.msg, "not used")) {
					return false, fmt.Errorf("%s:%d: %s", file, e.line, e.msg)
				}
				for _, sp := range gd.Specs {
					if fset.Position(sp.Pos()).Line == e.line {
						im := sp.(*ast.ImportSpec)
						unused = append(unused, im)
						if internalPkg {
							// Declarations using it fail next round
							// with "undefined: name".
							ipath, _ := strconv.Unquote(im.Path.Value)
							name := path.Base(ipath)
							if im.Name != nil {
								name = im.Name.Name
							}
							p.internalImports[file+"\x00"+name] = ipath
						}
					}
				}
				continue
			}
			drop[d] = append(drop[d], e.msg)
		}
		for _, im := range unused {
			path, _ := strconv.Unquote(im.Path.Value)
			name := ""
			if im.Name != nil {
				name = im.Name.Name
			}
			if astutil.DeleteNamedImport(fset, f, name, path) {
				progress = true
			}
		}
		for d, msgs := range drop {
			p.Dropped = append(p.Dropped, dropped{File: file, Name: declName(d), Test: isTestDecl(d), Errors: msgs})
			progress = true
		}
		f.Decls = slices.DeleteFunc(f.Decls, func(d ast.Decl) bool { return drop[d] != nil })
		if err := writeFile(name, fset, f); err != nil {
			return false, err
		}
	}
	return progress, nil
}

func declAt(fset *token.FileSet, f *ast.File, line int) ast.Decl {
	for _, d := range f.Decls {
		if fset.Position(d.Pos()).Line <= line && line <= fset.Position(d.End()).Line {
			return d
		}
	}
	return nil
}

// inventory lists the tests that remain and, for CacheBacked suites, the
// ginkgo nodes that build a cache or a client with a cache reader.
func (p *ported) inventory() error {
	names, err := filepath.Glob(filepath.Join(p.Dir, "*_test.go"))
	if err != nil {
		return err
	}
	shimCalls := 0
	for _, name := range names {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, d := range f.Decls {
			if isTestDecl(d) {
				p.Kept = append(p.Kept, filepath.Base(name)+": "+declName(d))
			}
		}
		n, err := p.checkSwapped(fset, f)
		if err != nil {
			return err
		}
		shimCalls += n
		if p.Suite.CacheBacked {
			lines := focusLines(fset, f)
			if len(lines) > 0 {
				var ls []string
				for _, l := range lines {
					ls = append(ls, strconv.Itoa(l))
				}
				p.Focus = append(p.Focus, regexp.QuoteMeta("/"+filepath.Base(name))+"$:"+strings.Join(ls, ","))
			}
		}
	}
	sort.Strings(p.Kept)
	if shimCalls == 0 {
		return fmt.Errorf("no test left calls the shim: nothing would test freshinformer")
	}
	return nil
}

// checkSwapped fails if a reference to a swapped upstream constructor is
// left in f, and counts the references to the shim.
func (p *ported) checkSwapped(fset *token.FileSet, f *ast.File) (int, error) {
	local := map[string]string{}
	dot := false
	for _, im := range f.Imports {
		ip, _ := strconv.Unquote(im.Path.Value)
		name := path.Base(ip)
		if im.Name != nil {
			name = im.Name.Name
		}
		local[name] = ip
		dot = dot || (name == "." && ip == p.Suite.Pkg)
	}
	shimCalls := 0
	var err error
	astutil.Apply(f, func(c *astutil.Cursor) bool {
		switch n := c.Node().(type) {
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok {
				if x.Name == shimName {
					shimCalls++
				} else if _, swapped := p.Suite.Swap[local[x.Name]+"."+n.Sel.Name]; swapped {
					err = fmt.Errorf("%s: %s.%s was not swapped", fset.Position(n.Pos()), x.Name, n.Sel.Name)
				}
			}
		case *ast.Ident:
			if _, swapped := p.Suite.Swap[p.Suite.Pkg+"."+n.Name]; swapped && dot && !isDeclName(c) {
				err = fmt.Errorf("%s: %s was not swapped", fset.Position(n.Pos()), n.Name)
			}
		}
		return err == nil
	}, nil)
	return shimCalls, err
}

// focusLines returns the lines of the innermost ginkgo nodes around every
// call of the shim's NewCache, and of its NewClient with a cache reader
// (options that are not a literal without Cache count as cache-backed).
// A spec runs when any of its nodes (container, setup or subject) is on
// one of these lines.
func focusLines(fset *token.FileSet, f *ast.File) []int {
	set := map[int]bool{}
	var stack []*ast.CallExpr // enclosing ginkgo node calls
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if id, ok := call.Fun.(*ast.Ident); ok && ginkgoNodes[id.Name] {
			stack = append(stack, call)
			for _, a := range call.Args {
				ast.Inspect(a, visit)
			}
			stack = stack[:len(stack)-1]
			return false
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && isIdent(sel.X, shimName) && len(stack) > 0 {
			if sel.Sel.Name == "NewCache" || (sel.Sel.Name == "NewClient" && cacheBackedOptions(call)) {
				set[fset.Position(stack[len(stack)-1].Pos()).Line] = true
			}
		}
		return true
	}
	ast.Inspect(f, visit)
	var lines []int
	for l := range set {
		lines = append(lines, l)
	}
	sort.Ints(lines)
	return lines
}

// cacheBackedOptions reports whether a NewClient call may have a cache
// reader: its options are not a client.Options literal without Cache.
func cacheBackedOptions(call *ast.CallExpr) bool {
	if len(call.Args) < 2 {
		return false
	}
	lit, ok := call.Args[1].(*ast.CompositeLit)
	if !ok {
		return true
	}
	for _, e := range lit.Elts {
		if kv, ok := e.(*ast.KeyValueExpr); ok && isIdent(kv.Key, "Cache") {
			return true
		}
	}
	return false
}
