package readme

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsExamples checks the Go blocks of every Markdown file under docs/
// that marks one with an Example, as TestREADME checks README.md's.
func TestDocsExamples(t *testing.T) {
	root := filepath.Join("..", "..")
	names, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range names {
		doc, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(doc, []byte("<!-- example: ")) {
			continue
		}
		n, errs := checkDoc(root, "docs/"+filepath.Base(name), doc)
		for _, e := range errs {
			t.Error(e)
		}
		checked += n
	}
	if checked == 0 {
		t.Error("no Go block with an Example marker under docs/: is this the right directory?")
	}
	t.Logf("%d Go blocks checked", checked)
}

// TestNoPlaceholders fails on a placeholder left in README.md or docs/: a
// TODO, TBD, FIXME or XXX anywhere but in a code span (where it is named,
// as here), or, outside code, an upper-case
// identifier with an underscore (BENCH_SUMMARY) that names nothing the
// repository defines (a make variable, an environment variable or a name
// its code or scripts use).
func TestNoPlaceholders(t *testing.T) {
	root := filepath.Join("..", "..")
	docs := []string{filepath.Join(root, "README.md")}
	known := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch {
			case d.Name() == ".git", d.Name() == "_work", d.Name() == "testdata",
				p == filepath.Join(root, "internal", "readme"): // its test documents name placeholders
				return filepath.SkipDir
			}
			return nil
		}
		switch ext := filepath.Ext(p); {
		case ext == ".md" && strings.HasPrefix(filepath.ToSlash(p), filepath.ToSlash(filepath.Join(root, "docs"))+"/"):
			docs = append(docs, p)
		case ext == ".go" || ext == ".sh" || ext == ".yaml" || d.Name() == "Makefile" || d.Name() == "run":
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, w := range upperIdent.FindAll(b, -1) {
				known[string(w)] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range docs {
		doc, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		for _, e := range placeholders(filepath.ToSlash(rel), string(doc), known) {
			t.Error(e)
		}
	}
}

var (
	placeholderWord = regexp.MustCompile(`\b(TODO|TBD|FIXME|XXX)\b`)
	upperIdent      = regexp.MustCompile(`\b[A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9]\b`)
	codeSpan        = regexp.MustCompile("`[^`]*`")
	htmlComment     = regexp.MustCompile(`<!--.*?-->`)
)

// placeholders returns doc's placeholders, each naming its line; known
// holds the upper-case identifiers that name something.
func placeholders(name, doc string, known map[string]bool) []string {
	var errs []string
	inFence := false
	for i, line := range strings.Split(doc, "\n") {
		fence := strings.HasPrefix(strings.TrimSpace(line), "```")
		prose := line
		if !inFence && !fence {
			prose = htmlComment.ReplaceAllString(codeSpan.ReplaceAllString(line, ""), "")
		}
		// In a code span, the words are named, not left in: `TODO`.
		if w := placeholderWord.FindString(prose); w != "" {
			errs = append(errs, fmt.Sprintf("%s:%d: placeholder %s: %q", name, i+1, w, strings.TrimSpace(line)))
			continue
		}
		if fence {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, w := range upperIdent.FindAllString(prose, -1) {
			if !known[w] {
				errs = append(errs, fmt.Sprintf("%s:%d: placeholder %s (nothing in the repository defines it; a real name goes in `code`): %q", name, i+1, w, strings.TrimSpace(line)))
			}
		}
	}
	return errs
}

// TestPlaceholders runs the placeholder finder on a small document.
func TestPlaceholders(t *testing.T) {
	known := map[string]bool{"DEMO_CMD": true}
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{name: "clean", doc: "Run `make demo DEMO_CMD=x` (DEMO_CMD: a make variable), `FRESHINFORMER_DEBUG=stalereads=1`.\n```sh\nFOO_BAR=1 go test\n```\n"},
		{name: "unfilled figure", doc: "Cost:\nmeasured: BENCH_SUMMARY.\n", want: []string{"x.md:2: placeholder BENCH_SUMMARY"}},
		{name: "todo", doc: "a\n\nTODO: measure\n", want: []string{"x.md:3: placeholder TODO"}},
		{name: "tbd in code", doc: "```go\nx := 1 // TBD\n```\n", want: []string{"x.md:2: placeholder TBD"}},
		{name: "named in a code span", doc: "It fails on `TODO` and `TBD`.\n"},
		{name: "words", doc: "TODOS and XXXL are words; a_TODO_b is not a placeholder word either.\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := placeholders("x.md", tc.doc, known)
			if len(errs) != len(tc.want) {
				t.Fatalf("got %q, want %d errors", errs, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(errs[i], w) {
					t.Errorf("error %d: %s, want it to contain %s", i, errs[i], w)
				}
			}
		})
	}
}
