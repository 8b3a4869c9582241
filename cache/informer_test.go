package cache

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clientgofeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/reflector"
)

// startScripted makes and runs an informer over a scripted stream and
// returns it synced, with the watch it opened.
func startScripted(t *testing.T, mode streamMode, first listResponse, opts ...Option) (*FreshInformer, *scriptedLW, *watch.RaceFreeFakeWatcher) {
	t.Helper()
	lw := newScriptedLW(t, mode, first)
	// No quiet probes unless asked for: a scripted server's consistent
	// reads answer the script, not what its stream delivered, and one
	// below that would show a restore.
	opts = append([]Option{WithQuietProbeDelay(-1)}, opts...)
	inf := NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{}, scriptOptions(opts...)...)
	runInformer(t, inf)
	w := lw.nextWatcher()
	waitSynced(t, inf)
	return inf, lw, w
}

// scriptOptions prepends what an informer over a scripted server needs: a
// script is no server's current state, which the snapshot route and the
// restore check's key comparison list, so its probes go by bookmark and its
// restore checks read the server's resource version only (snapshot_test.go
// and the fault suite cover both over servers that have a state).
func scriptOptions(opts ...Option) []Option {
	return append([]Option{WithSnapshotProbeLimit(-1), func(o *Options) { o.internal.restoreCheckByRV = true }}, opts...)
}

func forEachMode(t *testing.T, f func(t *testing.T, mode streamMode)) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) { f(t, mode) })
	}
}

func TestFreshnessFromListEventsAndBookmarks(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode streamMode) {
		inf, _, w := startScripted(t, mode, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5"), cm("b", "9")}})
		waitFresh(t, inf, "10")
		if got := inf.LastObservedResourceVersion(); got != "10" {
			t.Fatalf("LastObservedResourceVersion after list at 10 = %q", got)
		}
		w.Modify(cm("a", "12", "new"))
		waitFresh(t, inf, "12")
		if rv := cached(inf, "a"); rv != "12" {
			t.Fatalf("fresh at 12 but cached a is at %q", rv)
		}
		// A bookmark with no events advances freshness on its own.
		w.Action(watch.Bookmark, bookmark("15"))
		waitFresh(t, inf, "15")
		if got := inf.GetIndexer().LastStoreSyncResourceVersion(); got != "15" {
			t.Fatalf("indexer's LastStoreSyncResourceVersion = %q, want 15", got)
		}
		if s := inf.Stats(); s.Bookmarks < 1 {
			t.Fatalf("Stats.Bookmarks = %d after a bookmark", s.Bookmarks)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		err := inf.WaitForFreshness(ctx, "16")
		var we *freshness.WaitError
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &we) || we.Current != "15" || we.Target != "16" {
			t.Fatalf("WaitForFreshness(16) at 15 = %v, want a WaitError at 15 with DeadlineExceeded", err)
		}
	})
}

// TestBookmarkWaitsForSlowerEvents makes applying one object slow (its index
// function sleeps) and sends a bookmark right behind it: freshness at the
// bookmark must not come before the object is in the indexer.
func TestBookmarkWaitsForSlowerEvents(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode streamMode) {
		var slowApplied atomic.Bool
		slowIndex := toolscache.Indexers{"slow": func(obj any) ([]string, error) {
			if c := obj.(*corev1.ConfigMap); c.Name == "slow" && c.ResourceVersion == "20" {
				time.Sleep(200 * time.Millisecond)
				slowApplied.Store(true)
			}
			return nil, nil
		}}
		lw := newScriptedLW(t, mode, listResponse{rv: "10"})
		inf := NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, slowIndex, scriptOptions(WithQuietProbeDelay(-1))...)
		runInformer(t, inf)
		w := lw.nextWatcher()
		waitSynced(t, inf)

		w.Add(cm("slow", "20"))
		w.Action(watch.Bookmark, bookmark("21"))
		waitFresh(t, inf, "21")
		if !slowApplied.Load() || cached(inf, "slow") != "20" {
			t.Fatalf("fresh at bookmark 21 before the event at 20 was applied (cached %q)", cached(inf, "slow"))
		}
	})
}

// TestBookmarksInStreamOrderWithAtomicFIFOOff runs the same check with
// client-go's AtomicFIFO gate off: FreshInformer builds its own atomic
// queue, so neither bookmarks nor LastStoreSyncResourceVersion depend on it.
func TestBookmarksInStreamOrderWithAtomicFIFOOff(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientgofeatures.AtomicFIFO, false)
	inf, _, w := startScripted(t, listThenWatch, listResponse{rv: "10"})
	w.Add(cm("a", "11"))
	w.Action(watch.Bookmark, bookmark("30"))
	waitFresh(t, inf, "30")
	if cached(inf, "a") != "11" || inf.GetIndexer().LastStoreSyncResourceVersion() != "30" {
		t.Fatalf("gate off: cached a=%q, store RV %q", cached(inf, "a"), inf.GetIndexer().LastStoreSyncResourceVersion())
	}
}

func TestOutOfOrderAndDuplicateEvents(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode streamMode) {
		inf, _, w := startScripted(t, mode, listResponse{rv: "30", objects: []*corev1.ConfigMap{cm("a", "30", "v30")}})
		rec := recordHandlers(t, inf)
		rec.waitFor(t, 1) // the initial add

		w.Modify(cm("a", "25", "stale")) // older than the cached object
		w.Modify(cm("a", "30", "v30"))   // a duplicate of it
		w.Delete(cm("a", "28"))          // a delete of an older state
		w.Modify(cm("a", "31", "v31"))
		waitFresh(t, inf, "31")

		obj, _, _ := inf.GetIndexer().GetByKey("ns/a")
		if c := obj.(*corev1.ConfigMap); c.ResourceVersion != "31" || c.Data["v"] != "v31" {
			t.Fatalf("cached a = %s %v, want 31 v31", c.ResourceVersion, c.Data)
		}
		// The duplicate changes no resource version: like client-go's
		// informer, the FreshInformer hands it to handlers that are due
		// for a resync, which with no resync period is every handler.
		want := []string{"add a@30 initial=true", "update a@30->30", "update a@30->31"}
		if got := rec.waitFor(t, 3); !slices.Equal(got, want) {
			t.Fatalf("handler got %q, want %q", got, want)
		}
		if s := inf.Stats(); s.OutOfOrderRejected != 2 {
			t.Fatalf("OutOfOrderRejected = %d, want 2 (the stale update and the stale delete)", s.OutOfOrderRejected)
		}
	})
}

func TestDeletes(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode streamMode) {
		inf, _, w := startScripted(t, mode, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5"), cm("b", "6")}})
		rec := recordHandlers(t, inf)
		rec.waitFor(t, 2)
		w.Delete(cm("a", "12"))
		waitFresh(t, inf, "12")
		if cached(inf, "a") != "" {
			t.Fatal("a still cached after its delete at 12 is fresh")
		}
		if got := rec.waitFor(t, 3); got[2] != "delete a@12" {
			t.Fatalf("handler got %q", got)
		}
		// A delete of an object never cached still reaches handlers, as in client-go.
		w.Delete(cm("zz", "13"))
		waitFresh(t, inf, "13")
		if got := rec.waitFor(t, 4); got[3] != "delete zz@13" {
			t.Fatalf("handler got %q", got)
		}
	})
}

func TestIncomparableResourceVersions(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode streamMode) {
		inf, _, w := startScripted(t, mode, listResponse{rv: "abc", objects: []*corev1.ConfigMap{cm("a", "x1")}})
		start := time.Now()
		err := inf.WaitForFreshness(context.Background(), "5")
		if !errors.Is(err, freshness.ErrIncomparable) || time.Since(start) > time.Second {
			t.Fatalf("WaitForFreshness on an incomparable stream = %v after %v", err, time.Since(start))
		}
		// Still a working plain informer.
		w.Modify(cm("a", "x2"))
		w.Add(cm("b", "x3"))
		deadline := time.Now().Add(5 * time.Second)
		for cached(inf, "a") != "x2" || cached(inf, "b") != "x3" {
			if time.Now().After(deadline) {
				t.Fatalf("plain informer did not apply events: a=%q b=%q", cached(inf, "a"), cached(inf, "b"))
			}
			time.Sleep(5 * time.Millisecond)
		}
		if inf.Stats().IncomparableObjects == 0 {
			t.Fatal("incomparable objects were not counted")
		}
		if err := inf.WaitForFreshness(context.Background(), "not-a-number"); !errors.Is(err, freshness.ErrIncomparable) {
			t.Fatalf("malformed target: %v", err)
		}
	})
}

func TestStopReleasesWaiters(t *testing.T) {
	inf, _, _ := startScripted(t, listThenWatch, listResponse{rv: "10"})
	const n = 100
	errs := make(chan error, n)
	for range n {
		go func() { errs <- inf.WaitForFreshness(context.Background(), "1000") }()
	}
	for inf.Stats().PendingWaiters < n {
		time.Sleep(time.Millisecond)
	}
	stopInformer(t, inf)
	for range n {
		if err := <-errs; !errors.Is(err, freshness.ErrStopped) {
			t.Fatalf("waiter after stop = %v, want ErrStopped", err)
		}
	}
	if err := inf.WaitForFreshness(context.Background(), "11"); !errors.Is(err, freshness.ErrStopped) {
		t.Fatalf("WaitForFreshness after stop = %v", err)
	}
	if err := inf.WaitForFreshness(context.Background(), "10"); err != nil {
		t.Fatalf("WaitForFreshness for what was reached, after stop = %v", err)
	}
	if !inf.IsStopped() {
		t.Fatal("IsStopped = false")
	}
	if _, err := inf.AddEventHandler(newRecorder()); err == nil {
		t.Fatal("AddEventHandler on a stopped informer succeeded")
	}
}

// stopInformer stops the informer started by runInformer in this test.
func stopInformer(t *testing.T, inf *FreshInformer) {
	t.Helper()
	stops, _ := stopFuncs.Load(inf)
	stops.(func())()
}

func TestContextCancellation(t *testing.T) {
	inf, _, _ := startScripted(t, listThenWatch, listResponse{rv: "10"})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- inf.WaitForFreshness(ctx, "11") }()
	for inf.Stats().PendingWaiters == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait = %v", err)
	}
	if p := inf.Stats().PendingWaiters; p != 0 {
		t.Fatalf("PendingWaiters = %d after cancellation", p)
	}
}

func TestHandlersBeforeAndAfterStart(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode streamMode) {
		lw := newScriptedLW(t, mode, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5")}})
		inf := NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, nil)
		early := newRecorder()
		earlyReg, err := inf.AddEventHandler(early)
		if err != nil {
			t.Fatal(err)
		}
		runInformer(t, inf)
		w := lw.nextWatcher()
		waitSynced(t, inf)
		waitRegistrationSynced(t, earlyReg)

		late := newRecorder()
		lateReg, err := inf.AddEventHandler(late)
		if err != nil {
			t.Fatal(err)
		}
		waitRegistrationSynced(t, lateReg)
		w.Add(cm("b", "11"))
		wantEarly := []string{"add a@5 initial=true", "add b@11 initial=false"}
		if got := early.waitFor(t, 2); !slices.Equal(got, wantEarly) {
			t.Fatalf("early handler got %q, want %q", got, wantEarly)
		}
		if got := late.waitFor(t, 2); !slices.Equal(got, wantEarly) {
			t.Fatalf("late handler got %q, want %q", got, wantEarly)
		}
		if err := inf.RemoveEventHandler(lateReg); err != nil {
			t.Fatal(err)
		}
		w.Add(cm("c", "12"))
		early.waitFor(t, 3)
		if got := late.get(); len(got) != 2 {
			t.Fatalf("removed handler still got events: %q", got)
		}
	})
}

func waitRegistrationSynced(t *testing.T, reg toolscache.ResourceEventHandlerRegistration) {
	t.Helper()
	select {
	case <-reg.HasSyncedChecker().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("handler registration never synced")
	}
	if !reg.HasSynced() {
		t.Fatal("HasSynced false after its checker is done")
	}
}

func TestResync(t *testing.T) {
	lw := newScriptedLW(t, listThenWatch, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5")}})
	inf := NewSharedIndexInformer(lw, &corev1.ConfigMap{}, time.Second, nil)
	resyncing, quiet := newRecorder(), newRecorder()
	if _, err := inf.AddEventHandler(resyncing); err != nil {
		t.Fatal(err)
	}
	if _, err := inf.AddEventHandlerWithResyncPeriod(quiet, 0); err != nil {
		t.Fatal(err)
	}
	runInformer(t, inf)
	lw.nextWatcher()
	if got := resyncing.waitFor(t, 2); got[1] != "update a@5->5" {
		t.Fatalf("resyncing handler got %q, want a resync update", got)
	}
	if got := quiet.get(); len(got) != 1 {
		t.Fatalf("handler without resync got %q", got)
	}
}

// TestStaleRelistRefusedThenAccepted: after a 410 the server's list is older
// than what the cache observed; it is refused (the cache keeps its newer
// state), the retry asks for NotOlderThan at the floor, and a fresh list is
// accepted.
func TestStaleRelistRefusedThenAccepted(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode streamMode) {
		inf, lw, w := startScripted(t, mode, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5")}})
		w.Modify(cm("a", "20"))
		waitFresh(t, inf, "20")

		lw.queueLists(
			listResponse{rv: "15", objects: []*corev1.ConfigMap{cm("a", "5")}}, // a lagging replica
			listResponse{rv: "25", objects: []*corev1.ConfigMap{cm("a", "20"), cm("b", "24")}},
		)
		w.Error(goneError())
		waitFresh(t, inf, "25")
		if cached(inf, "a") != "20" || cached(inf, "b") != "24" {
			t.Fatalf("after relist: a=%q b=%q", cached(inf, "a"), cached(inf, "b"))
		}
		s := inf.Stats()
		if s.StaleListsRefused != 1 || s.Regressions != 0 {
			t.Fatalf("stats %+v: want 1 stale list refused, no regression", s.Stats)
		}
		if got := inf.LastObservedResourceVersion(); got != "25" {
			t.Fatalf("LastObservedResourceVersion = %s", got)
		}
		if mode == listThenWatch {
			if o := lw.lastListOptions(); o.ResourceVersion != "20" || o.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan {
				t.Fatalf("relist asked for RV %q match %q, want 20 NotOlderThan", o.ResourceVersion, o.ResourceVersionMatch)
			}
		}
	})
}

// TestRegressionDeclaredAfterBound: the server keeps answering older (an
// etcd restore). After the bound the older state is accepted, reported, and
// freshness follows it down, so a later write at a lower RV is not fresh
// before it is applied.
func TestRegressionDeclaredAfterBound(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode streamMode) {
		regressions := make(chan reflector.Regression, 4)
		inf, lw, w := startScripted(t, mode, listResponse{rv: "10"},
			WithAcceptRegressionAfter(-1), WithRegressionHandler(func(r reflector.Regression) { regressions <- r }))
		w.Add(cm("a", "100"))
		waitFresh(t, inf, "100")

		lw.queueLists(listResponse{rv: "50", objects: []*corev1.ConfigMap{cm("old", "40")}})
		w.Error(goneError())
		select {
		case r := <-regressions:
			if r.ListResourceVersion != "50" || r.Floor != "100" || r.Refused != 1 {
				t.Fatalf("regression %+v", r)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no regression declared")
		}
		if mode == watchList {
			lw.nextWatcher() // the refused watch-list's watch, closed by the Reflector
		}
		w2 := lw.nextWatcher()
		deadline := time.Now().Add(5 * time.Second)
		for inf.LastObservedResourceVersion() != "50" {
			if time.Now().After(deadline) {
				t.Fatalf("LastObservedResourceVersion = %s after the regression to 50", inf.LastObservedResourceVersion())
			}
			time.Sleep(time.Millisecond)
		}
		if cached(inf, "a") != "" || cached(inf, "old") != "40" {
			t.Fatal("cache does not hold the accepted older state")
		}
		// A new write after the restore gets RV 60 < 100: not fresh until applied.
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if err := inf.WaitForFreshness(ctx, "60"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WaitForFreshness(60) before the write was applied = %v", err)
		}
		w2.Add(cm("new", "60"))
		waitFresh(t, inf, "60")
		if cached(inf, "new") != "60" {
			t.Fatal("fresh at 60 without the write at 60")
		}
		if s := inf.Stats(); s.Regressions != 1 || s.StaleListsRefused != 1 {
			t.Fatalf("stats %+v", s.Stats)
		}
	})
}

// TestDropIn hands a FreshInformer to code written for client-go's
// interfaces: a lister and WaitForCacheSync.
func TestDropIn(t *testing.T) {
	lw := newScriptedLW(t, listThenWatch, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5")}})
	var inf toolscache.SharedIndexInformer = NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0,
		toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); inf.Run(stop) }()
	defer func() { close(stop); <-done }()
	if !toolscache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("WaitForCacheSync failed")
	}
	lister := corelisters.NewConfigMapLister(inf.GetIndexer())
	got, err := lister.ConfigMaps("ns").Get("a")
	if err != nil || got.ResourceVersion != "5" {
		t.Fatalf("lister Get = %v, %v", got, err)
	}
	if err := inf.AddIndexers(toolscache.Indexers{"byName": func(o any) ([]string, error) { return []string{name(o)}, nil }}); err != nil {
		t.Fatal(err)
	}
	byName, err := inf.GetIndexer().ByIndex("byName", "a")
	if err != nil || len(byName) != 1 {
		t.Fatalf("ByIndex = %v, %v", byName, err)
	}
	if inf.LastSyncResourceVersion() != "10" || !inf.GetController().HasSynced() {
		t.Fatalf("LastSyncResourceVersion %q", inf.LastSyncResourceVersion())
	}
	if err := inf.SetTransform(func(o any) (any, error) { return o, nil }); err == nil {
		t.Fatal("SetTransform after start succeeded")
	}
}

func TestTransform(t *testing.T) {
	lw := newScriptedLW(t, listThenWatch, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5", "x")}})
	inf := NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, nil)
	if err := inf.SetTransform(func(o any) (any, error) {
		c := o.(*corev1.ConfigMap)
		c.Data = nil
		return c, nil
	}); err != nil {
		t.Fatal(err)
	}
	runInformer(t, inf)
	lw.nextWatcher()
	waitSynced(t, inf)
	obj, _, _ := inf.GetStore().GetByKey("ns/a")
	if obj.(*corev1.ConfigMap).Data != nil {
		t.Fatal("transform was not applied")
	}
}
