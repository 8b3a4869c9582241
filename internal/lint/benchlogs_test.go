package lint

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// benchLine is a line of go test -bench output: a result or its header.
var benchLine = regexp.MustCompile(`^(Benchmark\S+\s+\d+\s+[\d.]+ ns/op|goos: \S+$|pkg: \S+$)`)

// isBenchLog reports whether src holds go test -bench output.
func isBenchLog(src []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if benchLine.MatchString(sc.Text()) {
			return true
		}
	}
	return false
}

// TestBenchLogsInDocs: benchmark output is committed only under docs/,
// where it is explained (a local bench.txt, which .gitignore keeps out, is
// not looked at: only the files git tracks are).
func TestBenchLogsInDocs(t *testing.T) {
	root := filepath.Join("..", "..")
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("no git work tree to list (%v)", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if strings.HasPrefix(name, "docs/") || strings.HasSuffix(name, ".go") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			continue // listed but absent (a deletion not yet committed)
		}
		if isBenchLog(src) {
			t.Errorf("%s holds benchmark output: move it under docs/, with what it measured, or delete it", name)
		}
	}
	if ignored := exec.Command("git", "-C", root, "check-ignore", "-q", "bench.txt").Run(); ignored != nil {
		t.Errorf("bench.txt (make bench's output) is not ignored by .gitignore: %v", ignored)
	}
}

// TestIsBenchLog checks the detector on a result line, a header line and
// a Markdown table that is not bench output.
func TestIsBenchLog(t *testing.T) {
	for src, want := range map[string]bool{
		"goos: linux\ngoarch: amd64\n":                                      true,
		"BenchmarkWakeLatency/waiters=1-2   \t   30000\t     34711 ns/op\n": true,
		"| BenchmarkWakeLatency | 34.7 µs |\n":                              false,
		"nothing here\n":                                                    false,
	} {
		if got := isBenchLog([]byte(src)); got != want {
			t.Errorf("isBenchLog(%q) = %v, want %v", src, got, want)
		}
	}
}
