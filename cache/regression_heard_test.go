package cache

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/freshinformer/freshinformer/reflector"
)

// A restore found off the stream (a snapshot below the floor; a
// consistent read below it takes the same path) is declared once the
// apply lock is released, and the relist it asks for may be applied
// before that. Handlers hear of the keys going back only once the restore
// is declared (counted and reported to OnRegression), as they do for a
// list's own regression: the declaration here is held until the relist is
// in the indexer, and handlers must have heard nothing of it meanwhile.
func TestHandlersHearARestoreOnlyOnceItIsDeclared(t *testing.T) {
	lw := newStateLW(t, 10, cm("a", "5"), cm("b", "9"))
	var inf *FreshInformer
	var rec *recorder
	heard := make(chan []string, 1) // what handlers had heard when the declaration ended
	relisted := true
	hold := func(reflector.Regression) {
		// The relist replaces b's state with none: wait for it, then give
		// handlers time to hear of it.
		for deadline := time.Now().Add(10 * time.Second); cached(inf, "b") != ""; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				relisted = false
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
		heard <- rec.get()
	}
	inf, _ = startState(t, lw, WithQuietProbeDelay(-1), WithRegressionHandler(hold))
	rec = recordHandlers(t, inf)
	initial := rec.waitFor(t, 2)

	// etcd restored to revision 3, where b did not exist and a was at 2.
	lw.mu.Lock()
	lw.rv = 3
	lw.objects = map[string]*corev1.ConfigMap{"a": cm("a", "2")}
	lw.mu.Unlock()
	s := snapshot{rv: mustRV(t, "3"), floor: mustRV(t, "10"), items: []runtime.Object{cm("a", "2")}, complete: true}
	if inf.compareSnapshot(s, inf.trust.View().Stamp, true) {
		t.Fatal("a snapshot below the floor proved the cache fresh")
	}
	if !relisted {
		t.Fatal("the restore's relist was not applied within 10s")
	}
	if got := <-heard; !slices.Equal(got, initial) {
		t.Fatalf("handlers heard %q before the restore was declared; want only the initial %q", got[len(initial):], initial)
	}
	want := []string{"delete tombstone:ns/b@", "update a@5->2"}
	if got := rec.waitFor(t, len(initial)+len(want)); !slices.Equal(got[len(initial):], want) {
		t.Fatalf("after the declaration handlers heard %q, want %q", got[len(initial):], want)
	}
	if n := inf.Stats().Regressions; n != 1 {
		t.Fatalf("%d regressions declared, want 1", n)
	}
}
