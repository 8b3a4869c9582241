package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A module served twice lands in the proxy layout the go command reads,
// with a valid zip that leaves out the nested module, and both versions
// listed once, in order.
func TestServeModule(t *testing.T) {
	src, proxy := t.TempDir(), t.TempDir()
	gomod := "module example.com/Upper/m\n\ngo 1.26.0\n"
	write(t, filepath.Join(src, "go.mod"), gomod)
	write(t, filepath.Join(src, "p", "p.go"), "package p\n")
	write(t, filepath.Join(src, "nested", "go.mod"), "module example.com/Upper/m/nested\n")
	write(t, filepath.Join(src, "nested", "n.go"), "package nested\n")

	for _, v := range []string{"v0.2.0", "v0.1.0", "v0.2.0"} {
		if err := run(src, v, proxy); err != nil {
			t.Fatalf("run %s: %v", v, err)
		}
	}
	vdir := filepath.Join(proxy, "example.com", "!upper", "m", "@v") // escaped path
	list, err := os.ReadFile(filepath.Join(vdir, "list"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(list)); strings.Join(got, " ") != "v0.1.0 v0.2.0" {
		t.Fatalf("list = %q", got)
	}
	mod, err := os.ReadFile(filepath.Join(vdir, "v0.1.0.mod"))
	if err != nil || string(mod) != gomod {
		t.Fatalf(".mod = %q, %v", mod, err)
	}
	var info struct{ Version string }
	b, err := os.ReadFile(filepath.Join(vdir, "v0.1.0.info"))
	if err != nil || json.Unmarshal(b, &info) != nil || info.Version != "v0.1.0" {
		t.Fatalf(".info = %s, %v", b, err)
	}
	files, err := zip.CheckZip(module.Version{Path: "example.com/Upper/m", Version: "v0.1.0"}, filepath.Join(vdir, "v0.1.0.zip"))
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "example.com/Upper/m@v0.1.0/"
	if got := strings.Join(files.Valid, " "); got != prefix+"go.mod "+prefix+"p/p.go" {
		t.Fatalf("zip holds %v (omitted %v, invalid %v)", files.Valid, files.Omitted, files.Invalid)
	}
}

func TestRejectsBadInput(t *testing.T) {
	src := t.TempDir()
	write(t, filepath.Join(src, "go.mod"), "module example.com/m\n")
	for _, c := range []struct{ version, proxy string }{
		{"v0.1", t.TempDir()},   // not canonical
		{"latest", t.TempDir()}, // not a version
		{"v2.0.0", t.TempDir()}, // needs a /v2 path
		{"v0.1.0", ""},          // no proxy
	} {
		if err := run(src, c.version, c.proxy); err == nil {
			t.Errorf("run(%q, proxy %q) succeeded", c.version, c.proxy)
		}
	}
}
