package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// The generated list sits between these markers in docs/conformance.md.
const (
	docsBegin = "<!-- conformance:dropped:begin (generated: make conformance checks it; `go run ./conformance/cmd/conformance -port-only -docs ../docs/conformance.md -write-docs` in integration/ rewrites it) -->"
	docsEnd   = "<!-- conformance:dropped:end -->"
)

var (
	undefinedRE = regexp.MustCompile(`undefined: (\S+)`)
	noFieldRE   = regexp.MustCompile(`\(type \*?(\S+) has no field or method (\w+)`)
)

// renderDropped is the Markdown list of the tests that cannot run outside
// upstream's package, with the unexported names each needs.
func renderDropped(all []*ported) string {
	var b bytes.Buffer
	for _, p := range all {
		fmt.Fprintf(&b, "\n### %s (`%s` %s)\n\n", p.Suite.Name, p.Suite.Pkg, p.Version)
		helpers := map[string]dropped{}
		for _, d := range p.Dropped {
			if !d.Test {
				helpers[d.Name] = d
			}
		}
		var tests []dropped
		for _, d := range p.Dropped {
			if d.Test {
				tests = append(tests, d)
			}
		}
		if len(tests) == 0 {
			b.WriteString("Nothing dropped: every test of the selected files compiles.\n")
			continue
		}
		slices.SortFunc(tests, func(a, b dropped) int {
			return strings.Compare(a.File+"\x00"+a.Name, b.File+"\x00"+b.Name)
		})
		b.WriteString("| file | test | needs (upstream's unexported names) |\n| --- | --- | --- |\n")
		for _, d := range tests {
			needs, via := needsOf(d, helpers, p, map[string]bool{})
			cell := "`" + strings.Join(needs, "`, `") + "`"
			if len(via) > 0 {
				cell += " (via the test helpers `" + strings.Join(via, "`, `") + "`)"
			}
			fmt.Fprintf(&b, "| %s | `%s` | %s |\n", d.File, d.Name, cell)
		}
	}
	return b.String()
}

// needsOf lists the names d's compile errors point at, following dropped
// helpers to what they need.
func needsOf(d dropped, helpers map[string]dropped, p *ported, seen map[string]bool) (needs, via []string) {
	s := p.Suite
	back := map[string]string{} // exported interface -> the unexported type the test asserted
	for k, v := range s.Assert {
		back[v] = k
	}
	add := func(list *[]string, v string) {
		if !slices.Contains(*list, v) {
			*list = append(*list, v)
		}
	}
	for _, msg := range d.Errors {
		switch {
		case noFieldRE.MatchString(msg):
			m := noFieldRE.FindStringSubmatch(msg)
			t := m[1]
			if i := strings.LastIndexByte(t, '.'); i >= 0 {
				t = t[i+1:]
			}
			if u, ok := back[t]; ok {
				t = u
			}
			add(&needs, t+"."+m[2])
		case undefinedRE.MatchString(msg):
			name := undefinedRE.FindStringSubmatch(msg)[1]
			if h, ok := helpers[name]; ok {
				add(&via, name)
				if !seen[name] {
					seen[name] = true
					n, v := needsOf(h, helpers, p, seen)
					for _, x := range n {
						add(&needs, x)
					}
					for _, x := range v {
						add(&via, x)
					}
				}
				continue
			}
			if pkg, ok := p.internalImports[d.File+"\x00"+name]; ok {
				name = "package " + pkg
			}
			add(&needs, name)
		default:
			add(&needs, msg)
		}
	}
	slices.Sort(needs)
	slices.Sort(via)
	return needs, via
}

// checkDocs compares (or, with write, replaces) the generated list in the
// Markdown file name. It reports whether the file was up to date.
func checkDocs(name string, all []*ported, write bool) (bool, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return false, err
	}
	text := string(b)
	i, j := strings.Index(text, docsBegin), strings.Index(text, docsEnd)
	if i < 0 || j < i {
		return false, fmt.Errorf("%s: markers %q and %q not found", name, docsBegin, docsEnd)
	}
	want := renderDropped(all) + "\n"
	have := text[i+len(docsBegin) : j]
	if have == want {
		return true, nil
	}
	if write {
		text = text[:i+len(docsBegin)] + want + text[j:]
		return true, os.WriteFile(name, []byte(text), 0o644)
	}
	fmt.Printf("[conformance] %s: the list of dropped tests differs from upstream's files at these versions. It should read:\n%s\n", name, want)
	return false, nil
}
