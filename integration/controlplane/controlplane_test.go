package controlplane

// Unit tests that need no binaries; the real processes are exercised by
// the e2e package.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// klog starts its flush daemon on first use and never stops it.
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"))
}

func writeFakeBins(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{apiServerBinary, etcdBinary} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFindBinariesExplicitDir(t *testing.T) {
	dir := t.TempDir()
	if _, err := FindBinaries(dir); err == nil {
		t.Fatal("empty dir accepted")
	} else {
		var nf *BinariesNotFoundError
		if !errors.As(err, &nf) || len(nf.Searched) != 1 || nf.Searched[0] != dir {
			t.Fatalf("got %v, want *BinariesNotFoundError for %s", err, dir)
		}
		if !strings.Contains(err.Error(), "make bins") {
			t.Fatalf("error %q does not say how to fix it", err)
		}
	}
	writeFakeBins(t, dir)
	got, err := FindBinaries(dir)
	if err != nil || got != dir {
		t.Fatalf("FindBinaries(%s) = %q, %v", dir, got, err)
	}
}

func TestFindBinariesEnvThenCache(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", xdg)
	t.Setenv(EnvAssets, "")
	os.Unsetenv(EnvAssets)

	if _, err := FindBinaries(""); err == nil {
		t.Fatal("found binaries in an empty cache")
	}

	root, err := CacheRoot()
	if err != nil {
		t.Fatal(err)
	}
	if root != filepath.Join(xdg, "freshinformer", "bins") {
		t.Fatalf("CacheRoot = %s", root)
	}
	// An incomplete build (no marker) is ignored; of two complete ones the
	// newer wins.
	writeFakeBins(t, filepath.Join(root, "partial"))
	older, newer := filepath.Join(root, "older"), filepath.Join(root, "newer")
	for i, d := range []string{older, newer} {
		writeFakeBins(t, d)
		marker := filepath.Join(d, completeMarker)
		if err := os.WriteFile(marker, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		mt := time.Now().Add(time.Duration(i-2) * time.Hour)
		if err := os.Chtimes(marker, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := FindBinaries(""); err != nil || got != newer {
		t.Fatalf("FindBinaries from cache = %q, %v; want %s", got, err, newer)
	}

	// KUBEBUILDER_ASSETS wins over the cache, and is not second-guessed.
	env := t.TempDir()
	t.Setenv(EnvAssets, env)
	if _, err := FindBinaries(""); err == nil {
		t.Fatal("empty KUBEBUILDER_ASSETS accepted, or fell back to the cache")
	}
	writeFakeBins(t, env)
	if got, err := FindBinaries(""); err != nil || got != env {
		t.Fatalf("FindBinaries with %s = %q, %v", EnvAssets, got, err)
	}
}

func TestStartWithoutBinariesFailsFast(t *testing.T) {
	start := time.Now()
	_, err := Start(context.Background(), Options{BinDir: t.TempDir()})
	var nf *BinariesNotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("got %v, want *BinariesNotFoundError", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("took %v", d)
	}
}

func TestStartFailureIsTypedAndBounded(t *testing.T) {
	// Binaries that exit at once: envtest notices the exit, and Start
	// gives up with a *Error naming etcd, well within its budget.
	dir := t.TempDir()
	writeFakeBins(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := Start(ctx, Options{BinDir: dir})
	var ce *Error
	if !errors.As(err, &ce) || ce.Component != ComponentEtcd || ce.Op != "start" {
		t.Fatalf("got %v, want *Error for etcd start", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Start used its whole budget: %v", err)
	}
}

func TestTailBuffer(t *testing.T) {
	b := newTailBuffer(8)
	for _, s := range []string{"hello ", "world", "!"} {
		if n, err := b.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got := b.String(); got != "o world!" {
		t.Fatalf("tail = %q", got)
	}
}
