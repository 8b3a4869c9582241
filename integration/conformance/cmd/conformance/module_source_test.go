package main

import (
	"archive/zip"
	"os"
	"path/filepath"
	"testing"
)

// A module the integration module requires, whose go.mod was fetched for
// the module graph but whose source was never extracted (a fresh module
// cache), still yields its source directory and version.
func TestModuleDirExtractsAModuleNeverExtracted(t *testing.T) {
	tmp := t.TempDir()
	proxy := filepath.Join(tmp, "proxy")
	const mod, version = "example.com/upstream", "v1.0.0"
	writeProxyModule(t, proxy, mod, version, map[string]string{
		"go.mod":           "module " + mod + "\n\ngo 1.22\n",
		"upstream.go":      "package upstream\n",
		"upstream_test.go": "package upstream\n",
	})
	root := filepath.Join(tmp, "main")
	writeFiles(t, root, map[string]string{
		"go.mod": "module example.com/main\n\ngo 1.22\n\nrequire " + mod + " " + version + "\n",
	})
	t.Setenv("GOMODCACHE", filepath.Join(tmp, "modcache"))
	t.Setenv("GOPROXY", "file://"+filepath.ToSlash(proxy))
	t.Setenv("GOFLAGS", "-mod=mod -modcacherw")
	t.Setenv("GONOSUMDB", mod)
	t.Setenv("GOWORK", "off")
	t.Setenv("GOTOOLCHAIN", "local")
	old := moduleRoot
	moduleRoot = root
	t.Cleanup(func() { moduleRoot = old })

	dir, v, err := moduleDir(suite{}.home(), mod)
	if err != nil {
		t.Fatal(err)
	}
	if v != version {
		t.Errorf("version %q, want %q", v, version)
	}
	if _, err := os.Stat(filepath.Join(dir, "upstream_test.go")); err != nil {
		t.Errorf("the module's source is not in %q: %v", dir, err)
	}
}

// writeProxyModule lays out mod@version in a GOPROXY file:// directory.
func writeProxyModule(t *testing.T, proxy, mod, version string, files map[string]string) {
	t.Helper()
	at := filepath.Join(proxy, filepath.FromSlash(mod), "@v")
	writeFiles(t, at, map[string]string{
		"list":            version + "\n",
		version + ".info": `{"Version":"` + version + `","Time":"2024-01-01T00:00:00Z"}`,
		version + ".mod":  files["go.mod"],
	})
	f, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for name, body := range files {
		w, err := zw.Create(mod + "@" + version + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
