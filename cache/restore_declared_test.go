package cache

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/freshinformer/freshinformer/internal/prove"
	"github.com/freshinformer/freshinformer/reflector"
)

// A restore found off the stream (a snapshot below the floor; a
// consistent read below it takes the same path) is declared once the
// apply lock is released, and the relist it asks for may be listed and
// queued before that. That relist reaches neither the indexer nor
// handlers before the restore is counted and reported to OnRegression: a
// reader who reads the counter after the indexer never finds an
// undeclared step back. The declaration is held here while the relist is
// served; meanwhile the indexer must still hold b and handlers must have
// heard nothing.
func TestARestoresRelistWaitsForItsDeclaration(t *testing.T) {
	lw := newStateLW(t, 10, cm("a", "5"), cm("b", "9"))
	var inf *FreshInformer
	var rec *recorder
	type during struct {
		heard       []string
		bCached     bool
		regressions uint64
		lists       int
	}
	seen := make(chan during, 1)
	var listsBefore int
	hold := func(reflector.Regression) {
		// Give the relist time to be listed and, were it not held, applied.
		listed := func() int {
			lw.mu.Lock()
			defer lw.mu.Unlock()
			return len(lw.lists)
		}
		for deadline := time.Now().Add(5 * time.Second); listed() <= listsBefore && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		for deadline := time.Now().Add(200 * time.Millisecond); cached(inf, "b") != "" && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		lists := listed()
		seen <- during{heard: rec.get(), bCached: cached(inf, "b") != "", regressions: inf.Stats().Regressions, lists: lists}
	}
	inf, _ = startState(t, lw, WithQuietProbeDelay(-1), WithRegressionHandler(hold))
	rec = recordHandlers(t, inf)
	initial := rec.waitFor(t, 2)

	// etcd restored to revision 3, where b did not exist and a was at 2.
	lw.mu.Lock()
	lw.rv = 3
	lw.objects = map[string]*corev1.ConfigMap{"a": cm("a", "2")}
	listsBefore = len(lw.lists)
	lw.mu.Unlock()
	s := prove.Snapshot{RV: mustRV(t, "3"), Floor: mustRV(t, "10"), Items: []runtime.Object{cm("a", "2")}, Complete: true}
	if inf.prover.CompareSnapshot(s, inf.trust.View().Stamp, true) {
		t.Fatal("a snapshot below the floor proved the cache fresh")
	}
	d := <-seen
	if d.lists <= listsBefore {
		t.Fatal("the restore's relist was not listed while its declaration was held: the test proves nothing")
	}
	if !d.bCached {
		t.Fatal("the indexer went back (b gone) before the restore was declared")
	}
	if d.regressions != 1 {
		t.Fatalf("OnRegression ran with Stats.Regressions = %d, want 1 (counted before reported)", d.regressions)
	}
	if !slices.Equal(d.heard, initial) {
		t.Fatalf("handlers heard %q before the restore was declared; want only the initial %q", d.heard[len(initial):], initial)
	}
	want := []string{"delete tombstone:ns/b@", "update a@5->2"}
	if got := rec.waitFor(t, len(initial)+len(want)); !slices.Equal(got[len(initial):], want) {
		t.Fatalf("after the declaration handlers heard %q, want %q", got[len(initial):], want)
	}
	if n := inf.Stats().Regressions; n != 1 {
		t.Fatalf("%d regressions declared, want 1", n)
	}
}
