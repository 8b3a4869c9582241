package readme

import (
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/scanner"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestREADME checks every ```go block of the repository's README.md
// against the Example its marker names (see the package documentation).
func TestREADME(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, errs := check(root, readme)
	for _, e := range errs {
		t.Error(e)
	}
	if blocks == 0 {
		t.Error("README.md has no ```go block: is this the right file?")
	}
	t.Logf("%d Go blocks checked", blocks)
}

// markerRE is the line before a ```go block naming its Example.
var markerRE = regexp.MustCompile(`^<!-- example: (\S+) (Example\w*) -->$`)

// readmeLine is a line of a block, with its 1-based line number in the
// README.
type readmeLine struct {
	n    int
	text string
}

// goBlock is one ```go block of the README.
type goBlock struct {
	fence   int    // the line of ```go
	marker  string // the line before it
	imports []readmeLine
	lines   []readmeLine // the code after any import list
	closing int          // the line of the closing ```
	after   readmeLine   // the first non-blank line after it
}

// check checks README.md's Go blocks against the Examples under root; it
// returns how many blocks it found and what is wrong, each error naming a
// README line.
func check(root string, readme []byte) (int, []string) {
	return checkDoc(root, "README.md", readme)
}

// checkDoc is check for the Markdown file name (a slash-separated path
// relative to root) with the content doc: its links to the Examples' files
// are relative to its own directory.
func checkDoc(root, name string, doc []byte) (int, []string) {
	blocks, errs := parseBlocks(string(doc))
	for _, b := range blocks {
		errs = append(errs, checkBlock(root, path.Dir(name), b)...)
	}
	for i, e := range errs {
		errs[i] = name + strings.TrimPrefix(e, "README.md")
	}
	return len(blocks), errs
}

func parseBlocks(readme string) ([]goBlock, []string) {
	var blocks []goBlock
	var errs []string
	lines := strings.Split(readme, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimRight(lines[i], "\r ")
		if m := markerRE.FindString(line); m != "" && (i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "```go") {
			errs = append(errs, fmt.Sprintf("README.md:%d: marker %q is not on the line right before a ```go block", i+1, line))
		}
		if line != "```go" {
			continue
		}
		b := goBlock{fence: i + 1}
		if i > 0 {
			b.marker = strings.TrimSpace(lines[i-1])
		}
		inImports := false
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			text, n := lines[i], i+1
			norm := normalize(text)
			switch {
			case norm == "":
			case len(b.lines) == 0 && !inImports && norm == "import (" && len(b.imports) == 0:
				inImports = true
			case inImports && norm == ")":
				inImports = false
			case inImports:
				b.imports = append(b.imports, readmeLine{n, norm})
			case len(b.lines) == 0 && strings.HasPrefix(norm, "import "):
				b.imports = append(b.imports, readmeLine{n, strings.TrimPrefix(norm, "import ")})
			default:
				b.lines = append(b.lines, readmeLine{n, text})
			}
		}
		if i == len(lines) {
			errs = append(errs, fmt.Sprintf("README.md:%d: the ```go block is never closed", b.fence))
		}
		b.closing = i + 1
		for j := i + 1; j < len(lines); j++ {
			if strings.TrimSpace(lines[j]) != "" {
				b.after = readmeLine{j + 1, lines[j]}
				break
			}
		}
		blocks = append(blocks, b)
	}
	return blocks, errs
}

// checkBlock checks b against its Example; docDir is the directory of
// the Markdown file, relative to root (slash-separated).
func checkBlock(root, docDir string, b goBlock) []string {
	m := markerRE.FindStringSubmatch(b.marker)
	if m == nil {
		return []string{fmt.Sprintf("README.md:%d: the ```go block has no marker on the line before it (<!-- example: DIR ExampleName -->, naming the Example that holds its code); found %q", b.fence, b.marker)}
	}
	dir, name := m[1], m[2]
	where := fmt.Sprintf("%s in %s", name, dir)
	ex, err := findExample(filepath.Join(root, filepath.FromSlash(dir)), name)
	if err != nil {
		return []string{fmt.Sprintf("README.md:%d: marker names %s: %v", b.fence-1, where, err)}
	}
	var errs []string
	if ex.output == "" && !ex.emptyOutput {
		errs = append(errs, fmt.Sprintf("README.md:%d: %s (%s) has no output comment (// Output:), so go test compiles it but never runs it", b.fence-1, where, ex.file))
	}
	for _, imp := range b.imports {
		alias, path := "", imp.text
		if f := strings.Fields(imp.text); len(f) == 2 {
			alias, path = f[0], f[1]
		}
		p, err := strconv.Unquote(path)
		if err != nil {
			errs = append(errs, fmt.Sprintf("README.md:%d: import line %q does not parse", imp.n, imp.text))
			continue
		}
		got, ok := ex.imports[p]
		switch {
		case !ok:
			errs = append(errs, fmt.Sprintf("README.md:%d: import %q is not imported by %s, the file of %s", imp.n, p, ex.file, where))
		case alias != "" && got != alias:
			errs = append(errs, fmt.Sprintf("README.md:%d: import %q is named %s in the README and %q in %s", imp.n, p, alias, got, ex.file))
		}
	}
	next := 0 // the body line after the last one matched
	for _, l := range b.lines {
		want := normalize(l.text)
		if want == "" {
			continue
		}
		i := slices.Index(ex.body[next:], want)
		if i >= 0 {
			next += i + 1
			continue
		}
		if slices.Contains(ex.body[:next], want) {
			errs = append(errs, fmt.Sprintf("README.md:%d: %q is in the body of %s (%s), but not after the block's previous line: out of order", l.n, want, where, ex.file))
		} else {
			errs = append(errs, fmt.Sprintf("README.md:%d: %q is missing from the body of %s (%s)", l.n, want, where, ex.file))
		}
	}
	// The marker is an HTML comment, invisible once rendered: a reader
	// finds the declarations of the names a block uses through a link to
	// the Example's file, right after the block.
	target, err := filepath.Rel(filepath.FromSlash(docDir), filepath.Join(filepath.FromSlash(dir), ex.file))
	if err == nil {
		link := "](" + filepath.ToSlash(target) + ")"
		if !strings.Contains(b.after.text, link) {
			errs = append(errs, fmt.Sprintf("README.md:%d: the line after the block does not link the file of %s, where the names the block uses are declared: [%s](%s)", b.closing, name, ex.file, filepath.ToSlash(target)))
		}
	}
	return errs
}

// example is what check needs of an Example function.
type example struct {
	file        string            // its file's name
	body        []string          // its body's lines, normalized, blank ones dropped
	imports     map[string]string // its file's imports: path to name ("" when not renamed)
	output      string
	emptyOutput bool
}

// findExample parses dir's _test.go files (only parses: dir may be in
// another module) for the Example function name.
func findExample(dir, name string) (*example, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no _test.go file in %s", dir)
	}
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Name.Name != name || fn.Body == nil {
				continue
			}
			ex := &example{file: filepath.Base(path), imports: map[string]string{}}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				ex.imports[p] = ""
				if imp.Name != nil {
					ex.imports[p] = imp.Name.Name
				}
			}
			start, end := fset.Position(fn.Body.Lbrace).Offset+1, fset.Position(fn.Body.Rbrace).Offset
			for _, l := range strings.Split(string(src[start:end]), "\n") {
				if n := normalize(l); n != "" {
					ex.body = append(ex.body, n)
				}
			}
			for _, e := range doc.Examples(f) {
				if "Example"+e.Name == name {
					ex.output, ex.emptyOutput = e.Output, e.EmptyOutput
				}
			}
			return ex, nil
		}
	}
	return nil, fmt.Errorf("no function %s in %s's _test.go files", name, dir)
}

// normalize drops a line's comment and collapses its white space: two
// lines that differ only in those are the same code.
func normalize(line string) string {
	src := []byte(line)
	var s scanner.Scanner
	fset := token.NewFileSet()
	s.Init(fset.AddFile("", -1, len(src)), src, func(token.Position, string) {}, scanner.ScanComments)
	for {
		pos, tok, _ := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.COMMENT {
			src = src[:fset.Position(pos).Offset]
			break
		}
	}
	return strings.Join(strings.Fields(string(src)), " ")
}
