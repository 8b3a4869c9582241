package readyourwrites

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
)

// A delete of an object with finalizers leaves it cached, terminating, at
// or past the DELETE response's resource version: fresh.
func TestDeleteWithFinalizersIsFresh(t *testing.T) {
	inf, _, w := startScripted(t, listResponse{rv: "10", objects: []*corev1.ConfigMap{withUID(cm("fin", "5"), "f1")}},
		cache.WithResource(configMapsResource))
	ryw := New(cache.InformerList{inf}, 2*time.Second)
	o := owner("p", "1")
	if err := ryw.RecordDelete(o, configMapsResource, terminating(withUID(cm("fin", "12"), "f1"))); err != nil { // the DELETE response
		t.Fatal(err)
	}
	w.Modify(terminating(withUID(cm("fin", "12"), "f1")))
	waitFresh(t, inf, "12")
	if err := ryw.CheckFresh(o); err != nil {
		t.Fatalf("CheckFresh with the terminating object cached at the delete's RV: %v", err)
	}
	if err := ryw.RecordDelete(o, configMapsResource, terminating(withUID(cm("fin", "12"), "f1"))); err != nil {
		t.Fatal(err)
	}
	if err := ryw.EnsureFresh(context.Background(), o); err != nil {
		t.Fatalf("EnsureFresh with the terminating object cached: %v", err)
	}
}

// A delete not yet shown fails EnsureFresh's timeout with an error that
// names its owner.
func TestDeleteErrorNamesOwner(t *testing.T) {
	inf, lw, _ := startScripted(t, listResponse{rv: "10", objects: []*corev1.ConfigMap{withUID(cm("held", "5"), "h1")}},
		cache.WithResource(configMapsResource))
	lw.queueLists(listResponse{rv: "10"})
	ryw := New(cache.InformerList{inf}, 50*time.Millisecond)
	o := owner("parent", "1")
	if err := ryw.RecordDelete(o, configMapsResource, withUID(cm("held", "11"), "h1")); err != nil {
		t.Fatal(err)
	}
	err := ryw.EnsureFresh(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "ns/parent") || strings.Contains(err.Error(), "behalf of /") {
		t.Fatalf("EnsureFresh error does not name the owner: %v", err)
	}
}

// A delete whose event trails the response, on a quiet resource while the
// server's global resource version is far ahead: the wait ends with the
// delete event, not at the next bookmark.
func TestDeleteOnQuietResource(t *testing.T) {
	inf, lw, w := startScripted(t, listResponse{rv: "10", objects: []*corev1.ConfigMap{withUID(cm("late", "6"), "l1")}},
		cache.WithResource(configMapsResource))
	lw.queueLists(listResponse{rv: "500"}) // other resources moved the global RV
	ryw := New(cache.InformerList{inf}, 5*time.Second)
	o := owner("p", "1")
	if err := ryw.RecordDelete(o, configMapsResource, withUID(cm("late", "19"), "l1")); err != nil { // the DELETE response
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ryw.EnsureFresh(context.Background(), o) }()
	time.Sleep(20 * time.Millisecond)
	w.Delete(withUID(cm("late", "19"), "l1"))
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the delete wait did not end with the delete event")
	}
}

// Concurrent records and checks of one owner neither race nor panic.
func TestConcurrentSameOwner(t *testing.T) {
	inf, _, w := startScripted(t, listResponse{rv: "10"}, cache.WithResource(configMapsResource))
	ryw := New(cache.InformerList{inf}, 2*time.Second)
	o := owner("p", "1")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				name := fmt.Sprintf("d%d-%d", g, i)
				switch i % 3 {
				case 0:
					_ = ryw.RecordDelete(o, configMapsResource, withUID(cm(name, ""), "x"))
				case 1:
					if err := ryw.Record(o, configMapsResource, cm(name, "10")); err != nil {
						t.Error(err)
					}
				}
				_ = ryw.CheckFresh(o)
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_ = ryw.EnsureFresh(ctx, o)
				cancel()
			}
		})
	}
	wg.Wait()
	w.Add(cm("z", "11"))
	if err := ryw.CheckFresh(o); err != nil {
		t.Fatalf("after the hammering: %v", err)
	}
}

// Two checks of one owner snapshot the same deletes and settle one after
// the other: each forgets what it checked, a delete recorded meanwhile
// stays.
func TestConcurrentSettles(t *testing.T) {
	inf, _, _ := startScripted(t, listResponse{rv: "10"}, cache.WithResource(configMapsResource))
	ryw := New(cache.InformerList{inf}, time.Second)
	o := owner("p", "1")
	for _, name := range []string{"a", "b"} {
		if err := ryw.RecordDelete(o, configMapsResource, withUID(cm(name, ""), name)); err != nil {
			t.Fatal(err)
		}
	}
	first, second := ryw.pending(o), ryw.pending(o)
	if err := ryw.RecordDelete(o, configMapsResource, withUID(cm("c", ""), "c")); err != nil {
		t.Fatal(err)
	}
	ryw.settled(o, first)
	ryw.settled(o, second)
	if p := ryw.pending(o); len(p.deleted[inf]) != 1 || p.deleted[inf][0].key.Name != "c" {
		t.Fatalf("after both settles: %+v", p.deleted)
	}
}

// Waiting on an informer that was never started fails once the
// informer's start grace (a second) has passed.
func TestNeverStartedFailsAfterTheStartGrace(t *testing.T) {
	inf := cache.NewSharedIndexInformer(newScriptedLW(t, listResponse{rv: "1"}), &corev1.ConfigMap{}, 0, nil, cache.WithResource(configMapsResource))
	ryw := New(cache.InformerList{inf}, 5*time.Second)
	o := owner("p", "1")
	if err := ryw.Record(o, configMapsResource, cm("c", "7")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := ryw.EnsureFresh(context.Background(), o); !errors.Is(err, cache.ErrNoInformer) {
		t.Fatalf("EnsureFresh on a never started informer: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("EnsureFresh took %v to fail", d)
	}
	if err := ryw.CheckFresh(o); !errors.Is(err, cache.ErrNoInformer) {
		t.Fatalf("CheckFresh on a never started informer: %v", err)
	}
}

func TestNextRV(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "1"}, {"9", "10"}, {"41", "42"}, {"18446744073709551615", "18446744073709551616"}, {"99999999999999999999", "100000000000000000000"},
	} {
		var rv freshness.RV // zero for ""
		if tc.in != "" {
			var err error
			if rv, err = freshness.ParseRV(tc.in); err != nil {
				t.Fatal(err)
			}
		}
		if got := nextRV(rv).String(); got != tc.want {
			t.Errorf("nextRV(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
