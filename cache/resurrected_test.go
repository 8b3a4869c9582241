package cache

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/freshinformer/freshinformer/reflector"
)

// etcd restored with a bumped revision to a point before a deletion brings
// the deleted key back at its old state, in a list newer than the cache.
// The cache no longer holds that key, so comparing cached keys cannot see
// it go back: applied as an add, it would be undeclared (a handler sees an
// add older than the deletion it saw, with no declared regression). A key the cache does not hold, listed at
// a resource version the cache had passed, is such a key: the cache
// applied every event up to there, its creation included, and so its
// deletion too.
func TestDeletedKeyBroughtBackIsDeclared(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode streamMode) {
		regs := newRegressionLog()
		inf, lw, w := startScripted(t, mode, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5"), cm("b", "6")}},
			WithRegressionHandler(regs.handle))
		rec := recordHandlers(t, inf)
		rec.waitFor(t, 2)
		w.Delete(cm("a", "20"))
		w.Add(cm("c", "21"))
		waitFresh(t, inf, "21")
		// Restored at 15 (a alive at 5, no c), bumped.
		lw.queueLists(listResponse{rv: "1000000400", objects: []*corev1.ConfigMap{cm("a", "5"), cm("b", "6")}})
		w.Error(goneError())
		r := regs.next(t)
		if r.Reason != reflector.RegressionKeysWentBack || r.Keys != 1 || !slices.Equal(r.SampleKeys, []string{"ns/a"}) || r.Floor != "21" {
			t.Fatalf("regression %+v", r)
		}
		waitFresh(t, inf, "1000000400")
		if cached(inf, "a") != "5" || cached(inf, "c") != "" {
			t.Fatal("the server's state was not applied")
		}
	})
}
