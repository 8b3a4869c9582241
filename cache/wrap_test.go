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
	for w.pending() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errc; !errors.Is(err, freshness.ErrStopped) {
		t.Fatalf("waiter after stop: %v", err)
	}
}

// startWrapped runs client-go's own informer over a scripted server and
// wraps it.
func startWrapped(t *testing.T, first listResponse) (*WrappedInformer, *scriptedLW, *watch.RaceFreeFakeWatcher) {
	t.Helper()
	lw := newScriptedLW(t, listThenWatch, first)
	plain := toolscache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); plain.RunWithContext(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	w, err := Wrap(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	fw := lw.nextWatcher()
	waitSynced(t, w)
	return w, lw, fw
}

// waitCachedAt waits until the wrapped store holds ns/name at rv.
func waitCachedAt(t *testing.T, w *WrappedInformer, name, rv string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if obj, ok, _ := w.GetIndexer().GetByKey("ns/" + name); ok && obj.(*corev1.ConfigMap).ResourceVersion == rv {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ns/%s never cached at %s", name, rv)
		}
	}
}

// One object with a malformed resource version is skipped
// (counted), as the FreshInformer does: it does not make every later wait
// fail.
func TestWrapSkipsSingleMalformedObject(t *testing.T) {
	w, _, fw := startWrapped(t, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5")}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.WaitForFreshness(ctx, "10"); err != nil {
		t.Fatalf("after the list: %v", err)
	}
	fw.Modify(cm("b", "not-a-number"))
	waitCachedAt(t, w, "b", "not-a-number")
	for w.IncomparableObjects() == 0 { // Wrap's handler hears of it after the store
		if ctx.Err() != nil {
			t.Fatal("the malformed object was never counted")
		}
		time.Sleep(time.Millisecond)
	}
	// The store's resource version is the malformed one now: a single
	// object's, not a list's.
	if err := w.WaitForFreshness(ctx, "10"); err != nil {
		t.Fatalf("a wait already satisfied, after one malformed object: %v", err)
	}
	fw.Modify(cm("a", "12"))
	waitCachedAt(t, w, "a", "12")
	if err := w.WaitForFreshness(ctx, "12"); err != nil {
		t.Fatalf("a wait after one malformed object: %v", err)
	}
	errc := make(chan error, 1)
	go func() { errc <- w.WaitForFreshness(ctx, "13") }()
	for w.pending() == 0 {
		time.Sleep(time.Millisecond)
	}
	fw.Modify(cm("b", "13"))
	if err := <-errc; err != nil {
		t.Fatalf("a pending wait after one malformed object: %v", err)
	}
	if got := w.IncomparableObjects(); got != 1 {
		t.Fatalf("IncomparableObjects = %d, want 1", got)
	}
}

// A list whose resource version cannot be ordered makes
// waits fail at once with ErrIncomparable; a comparable list ends that.
func TestWrapIncomparableListRecovers(t *testing.T) {
	w, lw, fw := startWrapped(t, listResponse{rv: "opaque-1", objects: []*corev1.ConfigMap{cm("a", "5")}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := w.WaitForFreshness(ctx, "6"); !errors.Is(err, freshness.ErrIncomparable) {
		t.Fatalf("wait on a store listed at a malformed resource version = %v (after %v)", err, time.Since(start))
	}
	lw.queueLists(listResponse{rv: "20", objects: []*corev1.ConfigMap{cm("a", "15")}})
	fw.Error(goneError())
	lw.nextWatcher()
	for {
		err := w.WaitForFreshness(ctx, "20")
		if err == nil {
			break
		}
		if !errors.Is(err, freshness.ErrIncomparable) {
			t.Fatalf("waiting for the comparable relist: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	if got := w.LastObservedResourceVersion(); got != "20" {
		t.Fatalf("LastObservedResourceVersion after the comparable relist = %q", got)
	}
}

// Objects and lists without any resource version come from client-go's
// fake clientsets, not from a server: waits fail at once, as they do on a
// FreshInformer in plain mode, instead of hanging.
func TestWrapUnstampedFailsAtOnce(t *testing.T) {
	for _, objects := range [][]*corev1.ConfigMap{nil, {cm("a", "")}} {
		w, _, _ := startWrapped(t, listResponse{rv: "", objects: objects})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		for {
			err := w.WaitForFreshness(ctx, "1")
			if errors.Is(err, freshness.ErrIncomparable) {
				break
			}
			if err != nil || time.Since(start) > 5*time.Second {
				t.Fatalf("%d objects without resource versions: wait = %v after %v", len(objects), err, time.Since(start))
			}
			time.Sleep(time.Millisecond) // the handler may not have heard of a yet
		}
		cancel()
	}
}

// pending returns how many callers are blocked in WaitForFreshness.
func (w *WrappedInformer) pending() int { return w.tracker.Pending() }
