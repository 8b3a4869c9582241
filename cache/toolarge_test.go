package cache

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/freshinformer/freshinformer/freshness"
)

// waitBeyondTheServer waits for a resource version no server reached and
// checks that it fails with freshness.ErrTooLargeResourceVersion well
// inside its 30 s context, after at most maxLists lists.
func waitBeyondTheServer(t *testing.T, inf *FreshInformer, lw *stateLW, maxLists int) {
	t.Helper()
	listsBefore, _ := lw.counts()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err := inf.WaitForFreshness(ctx, "987654321")
	took := time.Since(start)
	var tl *freshness.TooLargeResourceVersionError
	if !errors.Is(err, freshness.ErrTooLargeResourceVersion) || !errors.As(err, &tl) || tl.ResourceVersion != "987654321" {
		t.Fatalf("WaitForFreshness(987654321) = %v after %v, want a TooLargeResourceVersionError", err, took)
	}
	if took > 5*time.Second {
		t.Fatalf("WaitForFreshness(987654321) failed after %v, want under 5s", took)
	}
	if lists, _ := lw.counts(); lists-listsBefore > maxLists {
		t.Fatalf("%d lists for one wait beyond the server, want at most %d", lists-listsBefore, maxLists)
	}
	waitIdle(t, inf)
}

// On the snapshot route, a snapshot that matches the cache (at the
// cache's resource version, or past it) still shows the server behind a
// wait's target: the wait fails at once instead of waiting out its
// context.
func TestWaitBeyondTheServerFailsOnTheSnapshotRoute(t *testing.T) {
	for _, moved := range []bool{false, true} {
		lw := newStateLW(t, 10, cm("a", "5"), cm("b", "9"))
		inf, _ := startState(t, lw)
		if moved { // a write elsewhere: the snapshot moves the cache on
			lw.commit("", false)
		}
		waitBeyondTheServer(t, inf, lw, 1)
	}
}

// On a busy informer, whose stream keeps moving, a wait beyond the server
// fails too: the stream's progress does not put the probe off for ever.
// On both routes: the snapshot route (small) and the bookmark route
// (snapshots off).
func TestWaitBeyondTheServerFailsOnABusyInformer(t *testing.T) {
	for _, route := range []struct {
		name string
		opts []Option
	}{{"snapshot", nil}, {"bookmark", []Option{WithSnapshotProbeLimit(-1)}}} {
		t.Run(route.name, func(t *testing.T) {
			lw := newStateLW(t, 10, cm("a", "5"))
			inf, w := startState(t, lw, route.opts...)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() { // a write every 10 ms, delivered by the stream at once
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-ctx.Done():
						return
					case <-tick.C:
						w.Modify(cm("a", lw.commit("a", false)))
					}
				}
			})
			defer func() { cancel(); wg.Wait() }()
			waitBeyondTheServer(t, inf, lw, 3)
		})
	}
}
