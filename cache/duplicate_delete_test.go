package cache

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/internal/apimodel"
)

// A duplicated DELETED with a malformed resource version ("m" + revision,
// the event copied and all) reaches handlers once. The Guard lets a
// malformed event through (its object is the server's state). The first
// DELETED removes the key; the second finds no key, and its resource
// version cannot be compared with the stream's, so the duplicate check
// (which proves a deletion not newer than the stream) cannot reject it by
// resource version: the missing key does. The client-go
// queue plays no part: the informer's queue is atomic whatever the
// AtomicFIFO gate says.
func TestDuplicateMalformedDeleteReachesHandlersOnce(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode streamMode) {
		inf, _, w := startScripted(t, mode, listResponse{rv: "1", objects: []*corev1.ConfigMap{cm("a", "1")}})
		rec := recordHandlers(t, inf)
		rec.waitFor(t, 1)
		w.Delete(cm("a", "m2"))
		w.Delete(cm("a", "m2")) // the duplicate, as mangled as the original
		w.Add(cm("b", "3"))
		waitFresh(t, inf, "3")
		// A second delete would come before b's add.
		want := []string{"add a@1 initial=true", "delete a@m2", "add b@3 initial=false"}
		if got := rec.waitFor(t, len(want)); !slices.Equal(got, want) {
			t.Fatalf("handler got %q, want %q", got, want)
		}
		if cached(inf, "a") != "" {
			t.Fatal("a survived its deletion")
		}
	})
}

// A duplicated DELETED that arrives after its key was created again with
// a malformed resource version: the duplicate is at the stream's position,
// which the deletion itself delivered (every write has a resource version
// of its own), so it is a copy, not a deletion of the new object.
func TestDuplicateDeleteAfterAMalformedRecreateIsRejected(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode streamMode) {
		inf, _, w := startScripted(t, mode, listResponse{rv: "1", objects: []*corev1.ConfigMap{cm("a", "1")}})
		rec := recordHandlers(t, inf)
		rec.waitFor(t, 1)
		w.Delete(cm("a", "2"))
		w.Add(cm("a", "m3"))   // created again; cached, not comparable
		w.Delete(cm("a", "2")) // the duplicate
		w.Add(cm("b", "4"))
		waitFresh(t, inf, "4")
		want := []string{"add a@1 initial=true", "delete a@2", "add a@m3 initial=false", "add b@4 initial=false"}
		if got := rec.waitFor(t, len(want)); !slices.Equal(got, want) {
			t.Fatalf("handler got %q, want %q", got, want)
		}
		if got := cached(inf, "a"); got != "m3" {
			t.Fatalf("a cached at %q, want m3", got)
		}
	})
}

// A replayed older DELETED over a cached object whose resource version is
// malformed cannot be compared with that object; applied, it would tell
// handlers of the key's real deletion a second time. A stream's resource
// versions only grow: a deletion behind what the cache applied is out of
// order, whatever the cached object says.
func TestReplayedDeleteOverMalformedStateIsRejected(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode streamMode) {
		inf, _, w := startScripted(t, mode, listResponse{rv: "1", objects: []*corev1.ConfigMap{cm("a", "1")}})
		rec := recordHandlers(t, inf)
		rec.waitFor(t, 1)
		w.Modify(cm("a", "m3")) // cached, but its resource version cannot be ordered
		w.Add(cm("b", "4"))
		w.Delete(cm("a", "2")) // replayed: behind the stream
		w.Delete(cm("a", "5")) // the real deletion
		w.Add(cm("c", "6"))
		waitFresh(t, inf, "6")
		want := []string{"add a@1 initial=true", "update a@1->m3", "add b@4 initial=false", "delete a@5", "add c@6 initial=false"}
		if got := rec.waitFor(t, len(want)); !slices.Equal(got, want) {
			t.Fatalf("handler got %q, want %q", got, want)
		}
		if n := inf.Stats().OutOfOrderRejected; n != 1 {
			t.Fatalf("OutOfOrderRejected = %d, want 1 (the replayed delete)", n)
		}
	})
}

// A malformed DELETED removes a key without moving freshness, so a replay
// of the key's last event, at the very resource version the cache stands
// at, finds no key and would bring it back: handlers would hear of an add
// older than the deletion, and waits return with the deleted key cached. An event not newer than the
// stream, for a key the cache does not hold, is a replay, as for
// deletions.
func TestReplayAfterMalformedDeleteDoesNotBringKeyBack(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode streamMode) {
		inf, _, w := startScripted(t, mode, listResponse{rv: "1", objects: []*corev1.ConfigMap{cm("a", "1")}})
		rec := recordHandlers(t, inf)
		rec.waitFor(t, 1)
		w.Modify(cm("a", "3"))
		w.Delete(cm("a", "m4")) // applied; freshness stays at 3
		w.Modify(cm("a", "3"))  // replayed
		w.Add(cm("b", "5"))
		waitFresh(t, inf, "5")
		if got := cached(inf, "a"); got != "" {
			t.Fatalf("a is cached at %s after its deletion", got)
		}
		want := []string{"add a@1 initial=true", "update a@1->3", "delete a@m4", "add b@5 initial=false"}
		if got := rec.waitFor(t, len(want)); !slices.Equal(got, want) {
			t.Fatalf("handler got %q, want %q", got, want)
		}
	})
}

// TestModelDuplicateMalformedDelete takes the same path through the model
// server itself, with WatchListClient on and AtomicFIFO off: with every
// event mangled and duplicated, one deletion reaches a handler once.
func TestModelDuplicateMalformedDelete(t *testing.T) {
	configOf(9190).set(t) // WatchListClient on, AtomicFIFO off
	srv := apimodel.New(apimodel.Options{Seed: 9190, Replicas: 1})
	defer srv.Close()
	if _, err := srv.Create("k00", "0"); err != nil {
		t.Fatal(err)
	}
	inf := NewSharedIndexInformer(srv, &corev1.ConfigMap{}, 0, toolscache.Indexers{}, WithQuietProbeDelay(-1))
	h := &deleteCounter{deletes: map[string]int{}}
	if _, err := inf.AddEventHandler(h); err != nil {
		t.Fatal(err)
	}
	runInformer(t, inf)
	waitSynced(t, inf)

	srv.SetFaults(apimodel.Faults{Duplicate: 1, Malformed: 1})
	if _, err := srv.Delete("k00"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for srv.Stats().Duplicated == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	srv.SetFaults(apimodel.Faults{})
	rev, err := srv.Create("k01", "1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := inf.WaitForFreshness(ctx, strconv.FormatUint(rev, 10)); err != nil {
		t.Fatal(err)
	}
	if st := srv.Stats(); st.Malformed == 0 || st.Duplicated == 0 {
		t.Fatalf("the model served no mangled duplicate: %+v", st)
	}
	// Handlers hear of k01's add after anything about k00: wait for it.
	for !h.added("k01") {
		if time.Now().After(deadline) {
			t.Fatal("the handler never heard of k01")
		}
		time.Sleep(time.Millisecond)
	}
	if n := h.count("k00"); n != 1 {
		t.Fatalf("the handler heard of k00's deletion %d times, want once", n)
	}
}

// deleteCounter counts the deletions a handler hears of, per name.
type deleteCounter struct {
	mu      sync.Mutex
	deletes map[string]int
	adds    map[string]bool
}

func (h *deleteCounter) OnAdd(obj any, _ bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.adds == nil {
		h.adds = map[string]bool{}
	}
	h.adds[name(obj)] = true
}

func (h *deleteCounter) OnUpdate(_, _ any) {}

func (h *deleteCounter) OnDelete(obj any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.deletes[name(obj)]++
}

func (h *deleteCounter) added(n string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.adds[n]
}

func (h *deleteCounter) count(n string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.deletes[n]
}
