package readme

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const fakeExamples = `package pkg_test

import (
	"fmt"
	str "strings"
)

func ExampleUpper() {
	s := str.ToUpper("a")   // a comment
	fmt.Println(s)
	for range 2 {
		fmt.Println(len(s))
	}
	// Output:
	// A
	// 1
	// 1
}

func ExampleNoOutput() {
	fmt.Println("never run")
}
`

// TestCheck runs the checker on a small README and Example file: a block
// that matches passes; one that drifted from its Example, or whose marker
// is missing or wrong, fails, naming the README line.
func TestCheck(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "pkg", "x_test.go"), []byte(fakeExamples), 0o644); err != nil {
		t.Fatal(err)
	}
	const ok = "<!-- example: pkg ExampleUpper -->\n```go\nimport (\n\tstr \"strings\"\n)\n\ns   := str.ToUpper(\"a\") // upper case\n\n// a comment line\nfor range 2 {\n\tfmt.Println(len(s))\n}\n```\n[x_test.go](pkg/x_test.go)\n"
	for _, tc := range []struct {
		name, readme string
		want         []string // substrings of the errors, one per error
	}{
		{name: "ok", readme: "# t\n\n" + ok},
		{name: "drift", readme: ok + "\n<!-- example: pkg ExampleUpper -->\n```go\ns := str.ToLower(\"a\")\nfmt.Println(s)\n```\n[x_test.go](pkg/x_test.go)\n",
			want: []string{`README.md:18: "s := str.ToLower(\"a\")" is missing from the body of ExampleUpper in pkg (x_test.go)`}},
		{name: "out of order", readme: "<!-- example: pkg ExampleUpper -->\n```go\nfmt.Println(s)\ns := str.ToUpper(\"a\")\n```\n[x_test.go](pkg/x_test.go)\n",
			want: []string{`README.md:4: "s := str.ToUpper(\"a\")" is in the body of ExampleUpper in pkg (x_test.go), but not after the block's previous line: out of order`}},
		{name: "no marker", readme: "text\n```go\nfmt.Println(s)\n```\n",
			want: []string{"README.md:2: the ```go block has no marker"}},
		{name: "no such example", readme: "<!-- example: pkg ExampleLower -->\n```go\nfmt.Println(s)\n```\n",
			want: []string{"README.md:1: marker names ExampleLower in pkg: no function ExampleLower"}},
		{name: "no such dir", readme: "<!-- example: nope ExampleUpper -->\n```go\nfmt.Println(s)\n```\n",
			want: []string{"README.md:1: marker names ExampleUpper in nope: no _test.go file"}},
		{name: "no output", readme: "<!-- example: pkg ExampleNoOutput -->\n```go\nfmt.Println(\"never run\")\n```\n[x_test.go](pkg/x_test.go)\n",
			want: []string{"README.md:1: ExampleNoOutput in pkg (x_test.go) has no output comment"}},
		{name: "imports", readme: "<!-- example: pkg ExampleUpper -->\n```go\nimport (\n\t\"os\"\n\tstrs \"strings\"\n)\nfmt.Println(s)\n```\n[x_test.go](pkg/x_test.go)\n",
			want: []string{`README.md:4: import "os" is not imported by x_test.go`, `README.md:5: import "strings" is named strs in the README and "str" in x_test.go`}},
		{name: "no link to the example's file", readme: "<!-- example: pkg ExampleUpper -->\n```go\nfmt.Println(s)\n```\n\nSee [it](pkg/other_test.go).\n",
			want: []string{"README.md:4: the line after the block does not link the file of ExampleUpper, where the names the block uses are declared: [x_test.go](pkg/x_test.go)"}},
		{name: "stray marker", readme: "<!-- example: pkg ExampleUpper -->\n\n```go\nfmt.Println(s)\n```\n",
			want: []string{"README.md:1: marker", "README.md:3: the ```go block has no marker"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, errs := check(root, []byte(tc.readme))
			if n == 0 {
				t.Fatal("no block found")
			}
			if len(errs) != len(tc.want) {
				t.Fatalf("errors:\n%s\nwant %d", strings.Join(errs, "\n"), len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(errs[i], w) {
					t.Errorf("error %d:\n%s\nwant it to contain\n%s", i, errs[i], w)
				}
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"\tx :=  f(a,  b) // why":             "x := f(a, b)",
		"// only a comment":                   "",
		`u := "https://example.invalid" // a`: `u := "https://example.invalid"`,
		"  }  ":                               "}",
		"y := 1 /* c */":                      "y := 1",
	} {
		if got := normalize(in); got != want {
			t.Errorf("normalize(%q) = %q, want %q", in, got, want)
		}
	}
}
