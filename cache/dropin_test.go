package cache

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/freshinformer/freshinformer/freshness"
)

// Behaviours that code written for client-go's shared informer relies on
// (client-go's own informer tests check each): the FreshInformer must
// match them to be a drop-in.

// withoutReallyCrash makes utilruntime.HandleCrash report and recover, as
// a process that sets utilruntime.ReallyCrash = false does, and records the
// panics the registered panic handlers hear of.
func withoutReallyCrash(t *testing.T) (panics func() []any) {
	t.Helper()
	var mu sync.Mutex
	var seen []any
	oldCrash, oldHandlers := utilruntime.ReallyCrash, utilruntime.PanicHandlers
	utilruntime.ReallyCrash = false
	utilruntime.PanicHandlers = append(append([]func(context.Context, any){}, oldHandlers...), func(_ context.Context, r any) {
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
	})
	t.Cleanup(func() { utilruntime.ReallyCrash, utilruntime.PanicHandlers = oldCrash, oldHandlers })
	return func() []any {
		mu.Lock()
		defer mu.Unlock()
		return append([]any(nil), seen...)
	}
}

// panicky panics on the update of "a" and records everything else.
type panicky struct{ *recorder }

func (p panicky) OnUpdate(old, obj any) {
	if name(obj) == "a" {
		panic("handler panics on a")
	}
	p.recorder.OnUpdate(old, obj)
}

func TestHandlerPanicIsRecoveredAndSkipped(t *testing.T) {
	panics := withoutReallyCrash(t)
	inf, _, w := startScripted(t, listThenWatch, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5"), cm("b", "6")}})
	rec := newRecorder()
	if _, err := inf.AddEventHandler(panicky{rec}); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, 2) // the initial list
	w.Modify(cm("a", "11"))
	w.Modify(cm("b", "12"))
	got := rec.waitFor(t, 3)
	if got[2] != "update b@6->12" {
		t.Fatalf("after the panic the handler got %q, want b's update", got)
	}
	if p := panics(); len(p) != 1 || p[0] != "handler panics on a" {
		t.Fatalf("panic handlers heard %v, want the handler's panic once", p)
	}
	waitFresh(t, inf, "12")
}

// shutDownEventHandler is client-go 0.37's toolscache.ShutDownEventHandler
// (0.36 has none): remove the handler, then wait on the registration's
// ShutdownChan, which that helper requires.
func shutDownEventHandler(inf toolscache.SharedInformer, reg toolscache.ResourceEventHandlerRegistration) error {
	if err := inf.RemoveEventHandler(reg); err != nil {
		return err
	}
	s, ok := reg.(interface{ ShutdownChan() <-chan struct{} })
	if !ok {
		return fmt.Errorf("registration %T has no ShutdownChan", reg)
	}
	<-s.ShutdownChan()
	return nil
}

func TestShutDownEventHandler(t *testing.T) {
	t.Run("before the informer runs", func(t *testing.T) {
		lw := newScriptedLW(t, listThenWatch, listResponse{rv: "10"})
		inf := NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, nil, scriptOptions()...)
		reg, err := inf.AddEventHandler(newRecorder())
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- shutDownEventHandler(inf, reg) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("ShutDownEventHandler: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("ShutDownEventHandler of a handler that never ran did not return")
		}
	})
	t.Run("while running", func(t *testing.T) {
		inf, _, w := startScripted(t, listThenWatch, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5")}})
		rec := newRecorder()
		reg, err := inf.AddEventHandler(rec)
		if err != nil {
			t.Fatal(err)
		}
		rec.waitFor(t, 1)
		if err := shutDownEventHandler(inf, reg); err != nil {
			t.Fatalf("ShutDownEventHandler: %v", err)
		}
		w.Modify(cm("a", "11"))
		waitFresh(t, inf, "11")
		if got := rec.get(); len(got) != 1 {
			t.Fatalf("a shut-down handler was called again: %v", got)
		}
	})
}

// With no resync, every handler hears of updates that did not change the
// resource version (a relist of unchanged objects, objects of a fake
// clientset), as client-go's informer delivers them.
func TestUnchangedUpdatesReachHandlersWithoutResync(t *testing.T) {
	inf, _, w := startScripted(t, listThenWatch, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5")}})
	rec := recordHandlers(t, inf)
	rec.waitFor(t, 1)
	w.Modify(cm("a", "5", "same version"))
	if got := rec.waitFor(t, 2); got[1] != "update a@5->5" {
		t.Fatalf("handler got %q, want the unchanged update", got)
	}
}

// WithClock drives the resync timer: stepping the fake clock past the
// resync period brings the resync, with no real time passing.
func TestResyncFollowsTheInformersClock(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	lw := newScriptedLW(t, listThenWatch, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5")}})
	inf := NewSharedIndexInformer(lw, &corev1.ConfigMap{}, time.Hour, nil, scriptOptions(WithClock(clk))...)
	rec := recordHandlers(t, inf)
	runInformer(t, inf)
	lw.nextWatcher()
	rec.waitFor(t, 1)
	// The resync timer is set once the informer runs; step until it fires.
	deadline := time.After(10 * time.Second)
	for len(rec.get()) < 2 {
		clk.Step(time.Hour)
		select {
		case <-rec.notify:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("no resync after stepping the clock: %v", rec.get())
		}
	}
	if got := rec.get(); got[1] != "update a@5->5" {
		t.Fatalf("got %q, want a resync update", got)
	}
}

// A source that lists at "0" (client-go's fake controller source, empty)
// reports what client-go's store reports, and freshness starts with the
// first comparable event.
func TestListAtZeroThenEvents(t *testing.T) {
	source := fcache.NewFakeControllerSource()
	t.Cleanup(source.Shutdown)
	inf := NewSharedIndexInformer(source, &corev1.ConfigMap{}, 0, nil)
	runInformer(t, inf)
	waitSynced(t, inf)
	if got := inf.GetStore().LastStoreSyncResourceVersion(); got != "0" {
		t.Fatalf("LastStoreSyncResourceVersion after a list at 0 = %q, want 0", got)
	}
	source.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}})
	waitFresh(t, inf, "1")
	if got := inf.GetStore().LastStoreSyncResourceVersion(); got != "1" {
		t.Fatalf("LastStoreSyncResourceVersion after the event at 1 = %q, want 1", got)
	}
	source.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"}})
	waitFresh(t, inf, "2")
	if _, ok, _ := inf.GetStore().GetByKey("ns/b"); !ok {
		t.Fatal("fresh at 2 but b is not cached")
	}
	if got := inf.LastObservedResourceVersion(); got != "2" {
		t.Fatalf("LastObservedResourceVersion = %q, want 2", got)
	}
}

// Errors that callers (and client-go's tests) match keep client-go's words.
func TestStoppedErrorsUseClientGoWording(t *testing.T) {
	inf, _, _ := startScripted(t, listThenWatch, listResponse{rv: "10"})
	stopInformer(t, inf)
	_, err := inf.AddEventHandler(newRecorder())
	if err == nil || !strings.HasSuffix(err.Error(), "was not added to shared informer because it has stopped already") {
		t.Fatalf("AddEventHandler after stop: %v", err)
	}
	err = inf.AddIndexers(toolscache.Indexers{"x": toolscache.MetaNamespaceIndexFunc})
	if err == nil || err.Error() != "indexer was not added because it has stopped already" {
		t.Fatalf("AddIndexers after stop: %v", err)
	}
}

// On a plain client-go fake (objects without resource versions) a wait
// fails with ErrIncomparable and says which fake to use instead.
func TestPlainFakeWaitNamesFreshtest(t *testing.T) {
	client := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}})
	f := NewSharedInformerFactory(client, 0)
	inf, ok := FreshInformerOf(f.Core().V1().ConfigMaps().Informer())
	if !ok {
		t.Fatal("the factory did not make a FreshInformer")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); f.Shutdown() }()
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	if _, err := client.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, ok, _ := inf.GetStore().GetByKey("ns/b"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the informer never cached b")
		}
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	err := inf.WaitForFreshness(wctx, "1")
	if !errors.Is(err, freshness.ErrIncomparable) || !strings.Contains(err.Error(), "freshtest") {
		t.Fatalf("WaitForFreshness on a plain fake: %v; want ErrIncomparable naming package freshtest", err)
	}
}
