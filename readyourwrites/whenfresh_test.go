package readyourwrites

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
)

// notified returns a callback for WhenFresh and the channel its result
// arrives on.
func notified() (func(error), chan error) {
	ch := make(chan error, 2) // 2: a second call would show up
	return func(err error) { ch <- err }, ch
}

func expectNotified(t *testing.T, ch chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		select {
		case again := <-ch:
			t.Fatalf("called twice: %v, then %v", err, again)
		case <-time.After(10 * time.Millisecond):
		}
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("WhenFresh's callback never ran")
		return nil
	}
}

func expectNotYet(t *testing.T, ch chan error) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("called with %v before the cache caught up", err)
	case <-time.After(30 * time.Millisecond):
	}
}

func TestWhenFreshWrites(t *testing.T) {
	inf, _, w := startScripted(t, listResponse{rv: "10"}, cache.WithResource(configMapsResource))
	ryw := New(cache.InformerList{inf}, 0)
	o := owner("parent", "u1")

	f, ch := notified()
	ryw.WhenFresh(o, f)
	if err := expectNotified(t, ch); err != nil {
		t.Fatalf("nothing pending: %v", err)
	}

	if err := ryw.Record(o, configMapsResource, cm("child", "30")); err != nil {
		t.Fatal(err)
	}
	f, ch = notified()
	ryw.WhenFresh(o, f)
	w.Add(cm("child", "20"))
	expectNotYet(t, ch)
	w.Modify(cm("child", "30"))
	if err := expectNotified(t, ch); err != nil {
		t.Fatal(err)
	}
	if cached(inf, "child") != "30" {
		t.Fatal("notified before the write was in the cache")
	}
	ryw.mu.Lock()
	left := len(ryw.owners)
	ryw.mu.Unlock()
	if left != 0 {
		t.Fatal("what was found fresh was not settled")
	}
}

func TestWhenFreshStopLeavesNothing(t *testing.T) {
	inf, _, w := startScripted(t, listResponse{rv: "10"}, cache.WithResource(configMapsResource))
	ryw := New(cache.InformerList{inf}, 0)
	o := owner("parent", "u1")
	if err := ryw.Record(o, configMapsResource, cm("child", "40")); err != nil {
		t.Fatal(err)
	}
	f, ch := notified()
	stop := ryw.WhenFresh(o, f)
	if !stop() {
		t.Fatal("stop of a pending notice reported false")
	}
	if stop() {
		t.Error("second stop reported true")
	}
	w.Add(cm("child", "40"))
	waitFresh(t, inf, "40")
	select {
	case err := <-ch:
		t.Fatalf("a stopped notice ran: %v", err)
	default:
	}
	if err := ryw.CheckFresh(o); err != nil { // the record itself is kept until found fresh
		t.Fatal(err)
	}
}

func TestWhenFreshInformerStops(t *testing.T) {
	lw := newScriptedLW(t, listResponse{rv: "10"})
	inf := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{}, cache.WithResource(configMapsResource))
	stopInformer := runInformer(t, inf)
	lw.nextWatcher()
	waitSynced(t, inf)
	ryw := New(cache.InformerList{inf}, 0)
	o := owner("parent", "u1")
	if err := ryw.Record(o, configMapsResource, cm("child", "40")); err != nil {
		t.Fatal(err)
	}
	f, ch := notified()
	ryw.WhenFresh(o, f)
	stopInformer()
	if err := expectNotified(t, ch); !errors.Is(err, freshness.ErrStopped) {
		t.Fatalf("informer stopped: %v, want ErrStopped", err)
	}
	// After the stop, at once.
	f, ch = notified()
	ryw.WhenFresh(o, f)
	if err := expectNotified(t, ch); !errors.Is(err, freshness.ErrStopped) {
		t.Fatalf("after the stop: %v", err)
	}
}

func TestWhenFreshDeletes(t *testing.T) {
	inf, _, w := startScripted(t, listResponse{rv: "10", objects: []*corev1.ConfigMap{withUID(cm("gone", "5"), "g1")}},
		cache.WithResource(configMapsResource))
	ryw := New(cache.InformerList{inf}, 0)
	o := owner("p", "1")
	ryw.RecordDelete(o, configMapsResource, withUID(cm("gone", ""), "g1"))
	f, ch := notified()
	ryw.WhenFresh(o, f)
	w.Add(cm("other", "11")) // a step, the object still held
	waitFresh(t, inf, "11")
	expectNotYet(t, ch)
	w.Delete(withUID(cm("gone", "12"), "g1"))
	if err := expectNotified(t, ch); err != nil {
		t.Fatal(err)
	}
	if cached(inf, "gone") != "" {
		t.Fatal("notified with the deleted object cached")
	}
}

func TestWhenFreshInformerNeverStarted(t *testing.T) {
	lw := newScriptedLW(t, listResponse{rv: "10"})
	inf := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{}, cache.WithResource(configMapsResource))
	ryw := New(cache.InformerList{inf}, 0)
	o := owner("p", "1")
	if err := ryw.Record(o, configMapsResource, cm("x", "20")); err != nil {
		t.Fatal(err)
	}
	f, ch := notified()
	ryw.WhenFresh(o, f)
	if err := expectNotified(t, ch); !errors.Is(err, cache.ErrNoInformer) {
		t.Fatalf("got %v, want cache.ErrNoInformer", err)
	}
}
