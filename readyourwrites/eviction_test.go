package readyourwrites

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
)

// Owners that write and are never checked again (deleted
// from the cluster, the reconcile returned on NotFound) do not hold memory
// for the life of the process.
func TestReadYourWritesOwnersBounded(t *testing.T) {
	inf, _, _ := startScripted(t, listResponse{rv: "10"}, cache.WithResource(configMapsResource))
	ryw := New(cache.InformerList{inf}, 0)
	const owners = 100_000
	for i := range owners {
		if err := ryw.Record(owner(fmt.Sprintf("p%d", i), "u"), configMapsResource, cm(fmt.Sprintf("c%d", i), "10")); err != nil {
			t.Fatal(err)
		}
	}
	ryw.mu.Lock()
	kept := len(ryw.owners)
	ryw.mu.Unlock()
	if kept > DefaultMaxOwners {
		t.Fatalf("%d owners that wrote once are kept, bound %d", kept, DefaultMaxOwners)
	}
	if _, folded, _ := ryw.sizes(); folded != 0 {
		t.Fatalf("writes the cache showed were folded for %d informers", folded)
	}
}

// The heap stays flat while many distinct owners write, whether the cache
// shows their writes or not (fewer of those: the informer keeps each
// unshown write's key, up to its own bound, at a cost per write).
func TestReadYourWritesMemoryFlat(t *testing.T) {
	inf, _, _ := startScripted(t, listResponse{rv: "10"}, cache.WithResource(configMapsResource))
	for _, c := range []struct {
		rv          string
		max, owners int
		heap        uint64 // unbounded: some 700 bytes per owner
	}{{"10", 1000, 100_000, 2 << 20}, {"20", 100, 4000, 1 << 20}} {
		ryw := NewWithOptions(cache.InformerList{inf}, Options{MaxOwners: c.max})
		record := func(from, n int) {
			for i := from; i < from+n; i++ {
				if err := ryw.Record(owner(fmt.Sprintf("p%d", i), "u"), configMapsResource, cm(fmt.Sprintf("c%d", i), c.rv)); err != nil {
					t.Fatal(err)
				}
			}
		}
		record(0, 2*c.max)
		before := heapInUse()
		record(2*c.max, c.owners)
		after := heapInUse()
		if after > before && after-before > c.heap {
			t.Fatalf("writes at %s: %d more owners hold %d KiB", c.rv, c.owners, (after-before)>>10)
		}
		if owners, folded, _ := ryw.sizes(); owners != c.max || folded > 1 {
			t.Fatalf("writes at %s: %d owners kept, folded for %d informers", c.rv, owners, folded)
		}
	}
}

// An idle owner is evicted; one reconciled within the timeout is kept.
func TestReadYourWritesIdleOwnersEvicted(t *testing.T) {
	inf, _, _ := startScripted(t, listResponse{rv: "10"}, cache.WithResource(configMapsResource))
	clk := testingclock.NewFakePassiveClock(time.Now())
	ryw := NewWithOptions(cache.InformerList{inf}, Options{Clock: clk, OwnerIdleTimeout: time.Minute})
	idle, busy := owner("idle", "1"), owner("busy", "1")
	for _, o := range []Owner{idle, busy} {
		if err := ryw.Record(o, configMapsResource, cm("c-"+o.Name, "30")); err != nil {
			t.Fatal(err)
		}
	}
	clk.SetTime(clk.Now().Add(40 * time.Second))
	if err := ryw.CheckFresh(busy); !errors.Is(err, freshness.ErrNotFresh) {
		t.Fatalf("busy before the write is cached: %v", err)
	}
	clk.SetTime(clk.Now().Add(40 * time.Second)) // idle: 80s, busy: 40s
	if err := ryw.CheckFresh(busy); !errors.Is(err, freshness.ErrNotFresh) {
		t.Fatalf("busy, checked within the timeout: %v", err)
	}
	if owners, _, _ := ryw.sizes(); owners != 1 {
		t.Fatalf("%d owners kept, want busy only", owners)
	}
}

// Evicting an owner whose write the cache has not shown never makes a
// check claim freshness: the write is kept for every owner of its kind
// until the cache shows it.
func TestReadYourWritesEvictionKeepsUnshownWrites(t *testing.T) {
	inf, _, w := startScripted(t, listResponse{rv: "10"}, cache.WithResource(configMapsResource))
	ryw := NewWithOptions(cache.InformerList{inf}, Options{MaxOwners: 1})
	a, b := owner("a", "1"), owner("b", "1")
	other := owner("x", "1")
	other.GroupKind = schema.GroupKind{Group: "apps", Kind: "Deployment"}
	if err := ryw.Record(a, configMapsResource, cm("ca", "50")); err != nil {
		t.Fatal(err)
	}
	if err := ryw.Record(b, configMapsResource, cm("cb", "11")); err != nil { // evicts a
		t.Fatal(err)
	}
	if owners, folded, _ := ryw.sizes(); owners != 1 || folded != 1 {
		t.Fatalf("after evicting a: %d owners, folded for %d informers", owners, folded)
	}
	var nf *NotFreshError
	for _, o := range []Owner{a, b} {
		if err := ryw.CheckFresh(o); !errors.As(err, &nf) || nf.Written != "50" {
			t.Fatalf("%s after a's eviction: %v", o.Name, err)
		}
	}
	if err := ryw.CheckFresh(other); err != nil {
		t.Fatalf("an owner of another kind: %v", err)
	}
	w.Add(cm("cb", "11"))
	waitFresh(t, inf, "11")
	if err := ryw.CheckFresh(a); !errors.As(err, &nf) || nf.Written != "50" {
		t.Fatalf("a, its write not cached yet: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- ryw.EnsureFresh(context.Background(), a) }()
	select {
	case err := <-done:
		t.Fatalf("EnsureFresh of the evicted owner returned %v before its write was cached", err)
	case <-time.After(30 * time.Millisecond):
	}
	w.Add(cm("ca", "50"))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if cached(inf, "ca") != "50" {
		t.Fatal("fresh without the evicted owner's write")
	}
	for _, o := range []Owner{a, b} {
		if err := ryw.CheckFresh(o); err != nil {
			t.Fatalf("%s once the cache showed every write: %v", o.Name, err)
		}
	}
	if owners, folded, _ := ryw.sizes(); owners != 0 || folded != 0 {
		t.Fatalf("after the cache showed everything: %d owners, folded for %d informers", owners, folded)
	}
}

// A delete the cache has not shown survives its owner's eviction too, and
// what evicted owners' deletes hold is bounded by the objects the cache
// holds.
func TestReadYourWritesEvictionKeepsUnshownDeletes(t *testing.T) {
	const objects = 200
	var listed []*corev1.ConfigMap
	for i := range objects {
		listed = append(listed, withUID(cm(fmt.Sprintf("o%d", i), "5"), fmt.Sprintf("u%d", i)))
	}
	inf, _, w := startScripted(t, listResponse{rv: "10", objects: listed}, cache.WithResource(configMapsResource))
	ryw := NewWithOptions(cache.InformerList{inf}, Options{MaxOwners: 10})
	for i := range 10_000 {
		o := owner(fmt.Sprintf("p%d", i), "1")
		if err := ryw.RecordDelete(o, configMapsResource, listed[i%objects]); err != nil {
			t.Fatal(err)
		}
		if err := ryw.RecordDelete(o, configMapsResource, withUID(cm(fmt.Sprintf("gone%d", i), "5"), "g")); err != nil {
			t.Fatal(err) // not cached: shown already
		}
	}
	owners, folded, deletes := ryw.sizes()
	if owners != 10 || folded != 1 || deletes > objects {
		t.Fatalf("after 10000 owners deleted: %d owners, folded for %d informers, %d deletes (the cache holds %d objects)", owners, folded, deletes, objects)
	}
	var nf *NotFreshError
	late := owner("late", "1")
	if err := ryw.CheckFresh(late); !errors.As(err, &nf) || !nf.Deleted || nf.Key.Name == "" {
		t.Fatalf("an owner of the kind, with evicted deletes not shown: %v", err)
	}
	for i, obj := range listed {
		gone := obj.DeepCopy()
		gone.ResourceVersion = fmt.Sprint(11 + i)
		w.Delete(gone)
		if i%50 == 49 { // the fake watch's buffer holds 100
			waitFresh(t, inf, gone.ResourceVersion)
		}
	}
	if err := ryw.CheckFresh(late); err != nil {
		t.Fatalf("once every delete is cached: %v", err)
	}
	if _, folded, deletes := ryw.sizes(); folded != 0 || deletes != 0 {
		t.Fatalf("after the cache showed every delete: folded for %d informers, %d deletes", folded, deletes)
	}
}

// One owner's recorded deletes are a set: recording many distinct deletes
// the cache already shows holds a bounded number, and recording one again
// adds nothing.
func TestReadYourWritesDeleteSetBounded(t *testing.T) {
	inf, _, _ := startScripted(t, listResponse{rv: "10", objects: []*corev1.ConfigMap{withUID(cm("kept", "5"), "k")}},
		cache.WithResource(configMapsResource))
	ryw := New(cache.InformerList{inf}, 0)
	o := owner("p", "1")
	for range 3 {
		if err := ryw.RecordDelete(o, configMapsResource, withUID(cm("kept", "5"), "k")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20_000 {
		if err := ryw.RecordDelete(o, configMapsResource, withUID(cm(fmt.Sprintf("gone%d", i), "5"), "g")); err != nil {
			t.Fatal(err)
		}
	}
	p := ryw.pending(o)
	if n := len(p.deleted[inf]); n > 2*minDeletePrune {
		t.Fatalf("%d deletes kept for one owner", n)
	}
	if p.deleted[inf][0].key.Name != "kept" {
		t.Fatalf("the delete not shown was lost: %v", p.deleted[inf][:3])
	}
	var nf *NotFreshError
	if err := ryw.CheckFresh(o); !errors.As(err, &nf) || !nf.Deleted || nf.Key.Name != "kept" {
		t.Fatalf("CheckFresh: %v", err)
	}
}

// What was folded for an informer that has stopped is dropped: it will
// never show anything, and every check of the kind would fail for ever.
func TestReadYourWritesEvictedStoppedInformerDropped(t *testing.T) {
	inf, _, _ := startScripted(t, listResponse{rv: "10"}, cache.WithResource(configMapsResource))
	ryw := NewWithOptions(cache.InformerList{inf}, Options{MaxOwners: 1})
	if err := ryw.Record(owner("a", "1"), configMapsResource, cm("ca", "50")); err != nil {
		t.Fatal(err)
	}
	ryw.Forget(owner("b", "1"))
	if err := ryw.Record(owner("b", "1"), configMapsResource, cm("cb", "5")); err != nil { // evicts a
		t.Fatal(err)
	}
	if _, folded, _ := ryw.sizes(); folded != 1 {
		t.Fatalf("folded for %d informers", folded)
	}
	mustStop(t, inf)()
	if err := ryw.CheckFresh(owner("c", "1")); err != nil {
		t.Fatalf("after the informer stopped: %v", err)
	}
	if _, folded, _ := ryw.sizes(); folded != 0 {
		t.Fatalf("folded for %d informers after the informer stopped", folded)
	}
}

// Eviction under concurrent writers and checkers of many owners keeps
// every owner's read-your-writes: a check never says fresh before the
// owner's write is cached.
func TestReadYourWritesConcurrentEviction(t *testing.T) {
	inf, _, w := startScripted(t, listResponse{rv: "10"}, cache.WithResource(configMapsResource))
	ryw := NewWithOptions(cache.InformerList{inf}, Options{MaxOwners: 2}) // fewer than the writers
	const writers, each = 4, 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 10
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				o := owner(fmt.Sprintf("p%d-%d", g, i), "u")
				name := fmt.Sprintf("c%d-%d", g, i)
				mu.Lock() // the server's order: resource versions as events arrive
				next++
				rv := fmt.Sprint(next)
				if err := ryw.Record(o, configMapsResource, cm(name, rv)); err != nil {
					mu.Unlock()
					t.Error(err)
					return
				}
				w.Add(cm(name, rv))
				mu.Unlock()
				for {
					err := ryw.CheckFresh(o)
					if err == nil {
						break
					}
					if !errors.Is(err, freshness.ErrNotFresh) {
						t.Error(err)
						return
					}
					time.Sleep(100 * time.Microsecond)
				}
				if got := cached(inf, name); got != rv {
					t.Errorf("%s fresh without its write (cached %q, wrote %s)", o.Name, got, rv)
					return
				}
			}
		})
	}
	wg.Wait()
	if owners, _, _ := ryw.sizes(); owners > 2 {
		t.Fatalf("%d owners kept", owners)
	}
}

// NewestKnownResourceVersion is what the writes transport judges a write's
// resource version by: the newest its informers had from the server.
func TestReadYourWritesNewestKnown(t *testing.T) {
	inf, _, w := startScripted(t, listResponse{rv: "10"})
	ryw := New(cache.InformerList{inf}, time.Second)
	gr := schema.GroupResource{Resource: "configmaps"}
	if got := ryw.NewestKnownResourceVersion(gr); got != "10" {
		t.Fatalf("after a list at 10: %q", got)
	}
	w.Add(cm("a", "12"))
	waitFresh(t, inf, "12")
	if got := ryw.NewestKnownResourceVersion(gr); got != "12" {
		t.Fatalf("after an event at 12: %q", got)
	}
	if got := ryw.NewestKnownResourceVersion(schema.GroupResource{Resource: "secrets"}); got != "" {
		t.Fatalf("a resource without informers: %q", got)
	}
}
