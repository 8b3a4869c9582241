package controlplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// EnvAssets is the envtest convention for the directory holding the
// kube-apiserver and etcd binaries. `make integration` sets it to the
// `make bins` cache directory.
const EnvAssets = "KUBEBUILDER_ASSETS"

// Names of the binaries inside a binaries directory.
const (
	etcdBinary      = "etcd"
	apiServerBinary = "kube-apiserver"
	// completeMarker is written by integration/hack/build-bins.sh last, so
	// a half-finished build directory is never picked up; build-bins.sh
	// touches it whenever it hands the directory out.
	completeMarker = ".complete"
)

// CacheRoot returns the directory under which `make bins` caches binaries,
// one subdirectory per build key: $XDG_CACHE_HOME/freshinformer/bins, or
// $HOME/.cache/freshinformer/bins.
func CacheRoot() (string, error) {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("controlplane: locating the bins cache: %w", err)
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "freshinformer", "bins"), nil
}

// FindBinaries returns an absolute directory holding executable
// kube-apiserver and etcd binaries. It tries, in order: dir (if non-empty),
// $KUBEBUILDER_ASSETS (if set), and the complete directory under CacheRoot
// that build-bins.sh last built or reused (the cache holds one directory per
// kube-apiserver version: `make bins KUBE=1.35` makes that one the
// fallback). The error is a *BinariesNotFoundError.
func FindBinaries(dir string) (string, error) {
	nf := &BinariesNotFoundError{}
	try := func(d string) (string, bool) {
		abs, err := filepath.Abs(d)
		if err == nil {
			err = checkBinDir(abs)
		}
		if err != nil {
			nf.Searched = append(nf.Searched, d)
			nf.Missing = append(nf.Missing, err.Error())
			return "", false
		}
		return abs, true
	}

	if dir != "" {
		// An explicit directory is authoritative: no fallback that could
		// silently run other binaries than the caller asked for.
		if d, ok := try(dir); ok {
			return d, nil
		}
		return "", nf
	}
	if env := os.Getenv(EnvAssets); env != "" {
		if d, ok := try(env); ok {
			return d, nil
		}
		return "", nf
	}

	root, err := CacheRoot()
	if err != nil {
		return "", err
	}
	candidates, _ := filepath.Glob(filepath.Join(root, "*", completeMarker))
	type cand struct {
		dir string
		mod int64
	}
	var cs []cand
	for _, marker := range candidates {
		if st, err := os.Stat(marker); err == nil {
			cs = append(cs, cand{filepath.Dir(marker), st.ModTime().UnixNano()})
		}
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].mod > cs[j].mod })
	for _, c := range cs {
		if d, ok := try(c.dir); ok {
			return d, nil
		}
	}
	if len(cs) == 0 {
		nf.Searched = append(nf.Searched, root)
		nf.Missing = append(nf.Missing, "no complete build in the cache")
	}
	return "", nf
}

func checkBinDir(dir string) error {
	var errs []error
	for _, name := range []string{apiServerBinary, etcdBinary} {
		st, err := os.Stat(filepath.Join(dir, name))
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		case st.IsDir() || st.Mode()&0o111 == 0:
			errs = append(errs, fmt.Errorf("%s is not an executable file", name))
		}
	}
	return errors.Join(errs...)
}
