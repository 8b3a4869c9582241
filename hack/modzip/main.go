// Command modzip puts a module directory into a file-based module proxy
// (GOPROXY=file://DIR) at a version, as the go command would download it
// after the module's tag is pushed: DIR/<module>/@v/{VERSION.info,
// VERSION.mod,VERSION.zip,list}. The hack scripts serve the working tree's
// modules with it, so that builds get them the way a user's `go get` does
// (nothing is published yet, and a release must build before its tag).
//
//	go run ./modzip -dir SRC -version v0.1.0 -proxy DIR
//
// The module path is read from SRC/go.mod. SRC must hold only the
// module's files (the scripts copy what git tracks or would track);
// nested modules, vendor directories and files a module zip cannot hold
// are left out as the go command leaves them out.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

func main() {
	dir := flag.String("dir", ".", "module root directory (holds go.mod)")
	version := flag.String("version", "", "version to serve it at, e.g. v0.1.0")
	proxy := flag.String("proxy", "", "file proxy directory to write into")
	flag.Parse()
	if err := run(*dir, *version, *proxy); err != nil {
		fmt.Fprintln(os.Stderr, "modzip:", err)
		os.Exit(1)
	}
}

func run(dir, version, proxy string) error {
	if proxy == "" {
		return errors.New("-proxy is required")
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	path := modfile.ModulePath(gomod)
	if path == "" {
		return fmt.Errorf("%s/go.mod names no module", dir)
	}
	mv := module.Version{Path: path, Version: version}
	if err := module.Check(path, version); err != nil {
		return err
	}
	if semver.Canonical(version) != version {
		return fmt.Errorf("version %q is not canonical semver", version)
	}
	escPath, err := module.EscapePath(path)
	if err != nil {
		return err
	}
	escVersion, err := module.EscapeVersion(version)
	if err != nil {
		return err
	}
	vdir := filepath.Join(proxy, filepath.FromSlash(escPath), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	base := filepath.Join(vdir, escVersion)

	zf, err := os.Create(base + ".zip")
	if err != nil {
		return err
	}
	if err := zip.CreateFromDir(zf, mv, dir); err != nil {
		zf.Close()
		return fmt.Errorf("zip %s: %w", mv, err)
	}
	if err := zf.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(base+".mod", gomod, 0o644); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".info", info, 0o644); err != nil {
		return err
	}
	return addToList(filepath.Join(vdir, "list"), version)
}

// addToList adds version to the proxy's list of the module's versions.
func addToList(list, version string) error {
	var versions []string
	if b, err := os.ReadFile(list); err == nil {
		versions = strings.Fields(string(b))
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if !slices.Contains(versions, version) {
		versions = append(versions, version)
	}
	semver.Sort(versions)
	return os.WriteFile(list, []byte(strings.Join(versions, "\n")+"\n"), 0o644)
}
