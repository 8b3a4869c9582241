package cache

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/freshness"
)

func TestWrapClientGoInformer(t *testing.T) {
	lw := newScriptedLW(t, listThenWatch, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5")}})
	plain := toolscache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); plain.RunWithContext(ctx) }()
	defer func() { cancel(); <-done }()

	w, err := Wrap(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	var _ toolscache.SharedIndexInformer = w
	fw := lw.nextWatcher()
	waitSynced(t, w)

	// The list RV counts through the store (AtomicFIFO is on by default).
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if err := w.WaitForFreshness(wctx, "10"); err != nil {
		t.Fatalf("after list at 10: %v", err)
	}
	// A pending waiter wakes on the event, and the object is there.
	errc := make(chan error, 1)
	go func() { errc <- w.WaitForFreshness(wctx, "12") }()
	fw.Modify(cm("a", "12"))
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if obj, _, _ := w.GetIndexer().GetByKey("ns/a"); obj.(*corev1.ConfigMap).ResourceVersion != "12" {
		t.Fatal("fresh at 12 without the object at 12")
	}
	// A bookmark counts at the next call.
	fw.Action(watch.Bookmark, bookmark("20"))
	deadline := time.Now().Add(5 * time.Second)
	for w.LastObservedResourceVersion() != "20" {
		if time.Now().After(deadline) {
			t.Fatalf("bookmark never seen: %s", w.LastObservedResourceVersion())
		}
		time.Sleep(time.Millisecond)
	}
	if err := w.WaitForFreshness(wctx, "x"); !errors.Is(err, freshness.ErrIncomparable) {
		t.Fatalf("malformed target: %v", err)
	}

	// Ending Wrap's context releases waiters.
	go func() { errc <- w.WaitForFreshness(context.Background(), "99") }()
	for w.tracker.Pending() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errc; !errors.Is(err, freshness.ErrStopped) {
		t.Fatalf("waiter after stop: %v", err)
	}
}
