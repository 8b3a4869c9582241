package cache

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// TestRelistDropsObjectsAsTombstones: a relist without an object deletes it
// from the cache and tells handlers with a DeletedFinalStateUnknown.
func TestRelistDropsObjectsAsTombstones(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode streamMode) {
		inf, lw, w := startScripted(t, mode, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5"), cm("b", "6")}})
		rec := recordHandlers(t, inf)
		rec.waitFor(t, 2)
		lw.queueLists(listResponse{rv: "20", objects: []*corev1.ConfigMap{cm("b", "6")}})
		w.Error(goneError())
		waitFresh(t, inf, "20")
		if cached(inf, "a") != "" {
			t.Fatal("a survived a relist without it")
		}
		// b is unchanged: that update goes to the handlers due for a
		// resync, which with no resync period is every handler (as with
		// client-go's informer).
		got := rec.waitFor(t, 4)
		want := []string{"delete tombstone:ns/a@", "update b@6->6"}
		if !slices.Equal(got[2:], want) {
			t.Fatalf("handler got %q, want %q after the initial adds", got, want)
		}
	})
}

// TestTombstoneDeletes applies Deleted deltas carrying tombstones (as
// non-atomic queues produce them) directly.
func TestTombstoneDeletes(t *testing.T) {
	inf := NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.ConfigMap{}, 0, nil)
	recordHandlers(t, inf) // deletes are delivered too, though nothing here reads them
	apply := func(d toolscache.Delta) {
		t.Helper()
		if err := inf.handleDeltas(toolscache.Deltas{d}, false); err != nil {
			t.Fatal(err)
		}
	}
	apply(toolscache.Delta{Type: toolscache.Added, Object: cm("a", "10")})
	apply(toolscache.Delta{Type: toolscache.Added, Object: cm("b", "11")})

	// A tombstone holding an older state than the cache: rejected.
	apply(toolscache.Delta{Type: toolscache.Deleted, Object: toolscache.DeletedFinalStateUnknown{Key: "ns/a", Obj: cm("a", "9")}})
	if cached(inf, "a") != "10" || inf.Stats().OutOfOrderRejected != 1 {
		t.Fatalf("stale tombstone applied: a=%q", cached(inf, "a"))
	}
	// A tombstone with the cached state, and one with no state: applied.
	apply(toolscache.Delta{Type: toolscache.Deleted, Object: toolscache.DeletedFinalStateUnknown{Key: "ns/a", Obj: cm("a", "10")}})
	apply(toolscache.Delta{Type: toolscache.Deleted, Object: toolscache.DeletedFinalStateUnknown{Key: "ns/b"}})
	if cached(inf, "a") != "" || cached(inf, "b") != "" {
		t.Fatal("tombstones did not delete")
	}
	// A tombstone's state is not a deletion resource version: freshness stays.
	if got := inf.LastObservedResourceVersion(); got != "11" {
		t.Fatalf("LastObservedResourceVersion = %s, want 11", got)
	}
	// Handlers are not running (informer not started); their queue has it all.
	if n := inf.processor.Listeners()[0].Pending(); n != 4 {
		t.Fatalf("%d notifications queued, want 4 (2 adds, 2 deletes)", inf.processor.Listeners()[0].Pending())
	}
}

// TestOlderAddAfterDeleteIsRejected: a delete at 20 then an add of the same
// object at 15 (out of order) must not bring it back.
func TestOlderAddAfterDeleteIsRejected(t *testing.T) {
	inf, _, w := startScripted(t, listThenWatch, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5")}})
	w.Delete(cm("a", "20"))
	w.Add(cm("a", "15"))
	w.Add(cm("b", "21"))
	waitFresh(t, inf, "21")
	if cached(inf, "a") != "" {
		t.Fatal("an add older than the applied delete resurrected the object")
	}
	if n := inf.Stats().OutOfOrderRejected; n != 1 {
		t.Fatalf("OutOfOrderRejected = %d, want 1", n)
	}
}
