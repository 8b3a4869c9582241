package cache

import (
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/internal/resources"
	"github.com/freshinformer/freshinformer/reflector"
)

// A list that moves a key back is declared (counted in Stats.Regressions
// and reported to OnRegression) before the indexer holds the older state:
// a reader who reads the counter after reading the indexer never finds an
// undeclared step back. The indexer's IndexFunc runs as the older state
// is written, before any reader can see it: it reads both counts then.
func TestRegressionIsDeclaredBeforeTheIndexerGoesBack(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode streamMode) {
		var reported atomic.Int64
		inf, lw, w := startScripted(t, mode, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5"), cm("c", "6")}},
			WithRegressionHandler(func(reflector.Regression) { reported.Add(1) }))
		w.Modify(cm("a", "305"))
		waitFresh(t, inf, "305")
		var written, undeclared atomic.Int64
		if err := inf.AddIndexers(toolscache.Indexers{"older-state": func(obj any) ([]string, error) {
			if resources.ResourceVersion(obj) == "255" { // a's older state, about to be visible
				written.Add(1)
				if inf.Stats().Regressions == 0 || reported.Load() == 0 {
					undeclared.Add(1)
				}
			}
			return nil, nil
		}}); err != nil {
			t.Fatal(err)
		}
		lw.queueLists(listResponse{rv: "1000000400", objects: []*corev1.ConfigMap{cm("a", "255"), cm("c", "6")}})
		w.Error(goneError())
		waitFresh(t, inf, "1000000400")
		if cached(inf, "a") != "255" || written.Load() == 0 {
			t.Fatalf("the list was not applied: a cached at %q", cached(inf, "a"))
		}
		if undeclared.Load() > 0 {
			t.Fatalf("the indexer held a's older state before the regression was counted and reported (Stats.Regressions %d, reported %d by then)", inf.Stats().Regressions, reported.Load())
		}
		if n := inf.Stats().Regressions; n != 1 || reported.Load() != 1 {
			t.Fatalf("%d regressions counted, %d reported: want one", n, reported.Load())
		}
	})
}
