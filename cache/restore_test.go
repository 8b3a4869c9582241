package cache

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/resources"
	"github.com/freshinformer/freshinformer/internal/trust"
	"github.com/freshinformer/freshinformer/reflector"
)

// etcd restored without --bump-revision while the informer had no
// watch open (its Reflector was backing off after a stream ended with an
// error; no request had failed, as the apiserver restarted in between). The
// next write comes back at a resource version the old stream delivered:
// waits are held from the stream's end, the relist after the error is a
// consistent read, which declares the restore, and WaitForFreshness does
// not call the write fresh before that relist brings it.
func TestWriteBetweenWatchesIsVerified(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode streamMode) {
		regs := newRegressionLog()
		inf, lw, w := startScripted(t, mode, listResponse{rv: "10"}, WithRegressionHandler(regs.handle))
		w.Add(cm("a", "56"))
		w.Add(cm("b", "100"))
		waitFresh(t, inf, "100")
		// etcd restored at 55: a@40, and the next write, new@56. A list
		// raised to the floor (100) is "Too large" for it, as for a real
		// apiserver; client-go's Reflector then asks for a consistent one.
		lw.queueLists(listResponse{err: apierrors.NewTimeoutError("Too large resource version: 100, current: 56", 1)},
			listResponse{rv: "56", objects: []*corev1.ConfigMap{cm("a", "40"), cm("new", "56")}})
		// The stream ends with an error (not 410): the Reflector stops it
		// and backs off (800 ms or more) before it lists again.
		w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable, Message: "apiserver shutting down"})
		eventually(t, "the Reflector to stop the stream", w.IsStopped)
		if err := inf.RecordWrite("56"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := inf.WaitForFreshness(ctx, "56"); err != nil {
			t.Fatalf("WaitForFreshness(56) = %v", err)
		}
		if got := cached(inf, "new"); got != "56" {
			t.Fatalf("WaitForFreshness(56) returned nil, but the write at 56 is not cached (new=%q, a=%q, at %s)", got, cached(inf, "a"), inf.LastObservedResourceVersion())
		}
		r := regs.next(t)
		if r.Reason != reflector.RegressionConsistentList || r.Floor != "100" {
			t.Fatalf("regression %+v", r)
		}
		if s := inf.Stats(); s.Regressions != 1 {
			t.Fatalf("stats %+v: want one regression", s)
		}
		if o := lw.lastListOptions(); o.ResourceVersion != "" {
			t.Fatalf("the relist after the stream's error %+v, want a consistent read", o)
		}
	})
}

// slowDeclareSink is a logr sink that takes its time over the error log of
// a declared regression, which comes just before the OnRegression callback:
// a handler notified before the declaration then runs first, every time.
type slowDeclareSink struct{}

func (slowDeclareSink) Init(logr.RuntimeInfo)            {}
func (slowDeclareSink) Enabled(int) bool                 { return false }
func (slowDeclareSink) Info(int, string, ...any)         {}
func (s slowDeclareSink) WithValues(...any) logr.LogSink { return s }
func (s slowDeclareSink) WithName(string) logr.LogSink   { return s }
func (slowDeclareSink) Error(_ error, msg string, _ ...any) {
	if strings.Contains(msg, "Declared regression") {
		time.Sleep(300 * time.Millisecond)
	}
}

// A relist newer than the floor that moves keys back (KeysWentBack) is
// declared before the list's notifications are handed to the handlers: a
// handler must hear of the regression before it sees a key go back, as it
// does for the regressions the Guard declares.
func TestKeysWentBackDeclaredBeforeHandlersHear(t *testing.T) {
	var declared atomic.Bool
	lw := newScriptedLW(t, listThenWatch, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5")}})
	inf := NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, nil, scriptOptions(WithRegressionHandler(func(reflector.Regression) { declared.Store(true) }))...)
	sawBack := make(chan bool, 1)
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(old, obj any) {
		if resources.ResourceVersion(obj) == "255" {
			sawBack <- declared.Load()
		}
	}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logr.New(slowDeclareSink{})))
	done := make(chan struct{})
	go func() { defer close(done); inf.RunWithContext(ctx) }()
	defer func() { cancel(); <-done }()
	w := lw.nextWatcher()
	waitSynced(t, inf)
	w.Modify(cm("a", "305"))
	waitFresh(t, inf, "305")
	lw.queueLists(listResponse{rv: "1000000400", objects: []*corev1.ConfigMap{cm("a", "255")}})
	w.Error(goneError())
	select {
	case wasDeclared := <-sawBack:
		if !wasDeclared {
			t.Fatal("the handler saw a@305 go back to a@255 before the regression was declared")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the handler never saw the relist")
	}
}

// Found by the fault suite (restore-nobump mixed with other faults, seed
// 9105): after a consistent list below the floor is accepted as a declared
// regression, the Reflector starts its watch at once, before the informer
// has applied that list. The Guard raised the watch's resource version to
// the informer's old applied floor, so the watch waited for a revision the
// restored server had not reached, silently, and the cache never caught up.
// The watch must start from the accepted list.
func TestWatchAfterDeclaredListStartsFromIt(t *testing.T) {
	regs := newRegressionLog()
	inf, lw, w := startScripted(t, listThenWatch, listResponse{rv: "10"}, WithRegressionHandler(regs.handle), WithQuietProbeDelay(-1))
	w.Add(cm("a", "100"))
	waitFresh(t, inf, "100")
	lw.queueLists(
		listResponse{err: apierrors.NewResourceExpired("too old")}, // the Reflector then reads consistently
		listResponse{rv: "60", objects: []*corev1.ConfigMap{cm("new", "55")}},
	)
	// Hold the informer's processing: the list waits in the queue while the
	// Reflector goes on to watch.
	inf.applyMu.Lock()
	w.Error(goneError())
	next := lw.nextWatcher()
	lw.mu.Lock()
	rv := lw.watchOpts[len(lw.watchOpts)-1].ResourceVersion
	lw.mu.Unlock()
	inf.applyMu.Unlock()
	if rv != "60" {
		t.Fatalf("the watch after the declared list at 60 started from %q", rv)
	}
	if r := regs.next(t); r.Reason != reflector.RegressionConsistentList {
		t.Fatalf("regression %+v", r)
	}
	next.Add(cm("b", "61"))
	waitFresh(t, inf, "61")
}

// One restore is declared once, however many reads find it (Sync, a
// quiet probe and the restore check may each compare a snapshot with the
// cache at the same time): a read sent before a regression was declared
// declares nothing.
func TestRestoreFoundTwiceIsDeclaredOnce(t *testing.T) {
	regs := newRegressionLog()
	inf, lw, w := startScripted(t, listThenWatch, listResponse{rv: "10"}, WithRegressionHandler(regs.handle))
	w.Add(cm("a", "100"))
	waitFresh(t, inf, "100")
	lw.queueLists(listResponse{rv: "60", objects: []*corev1.ConfigMap{cm("a", "40")}}) // the relist
	st := inf.trust.View().Stamp
	restoreAt60(inf, st)
	restoreAt60(inf, st) // before the relist
	regs.next(t)
	waitFresh(t, inf, "60")
	restoreAt60(inf, st) // after it
	if got := inf.Stats().Regressions; got != 1 {
		t.Fatalf("%d regressions declared, want 1: %+v", got, regs.all())
	}
}

// restoreAt60 declares, as a read with the stamp st would, that the
// server is back at 60.
func restoreAt60(inf *FreshInformer, st trust.Stamp) {
	rv, _ := freshness.ParseRV("60")
	inf.applyMu.Lock()
	inf.beginRestore(reflector.Regression{Reason: reflector.RegressionServerBehind, ListResourceVersion: rv.String(), Floor: inf.guard.Floor().String()}, st)
	inf.unlockApply()
}

// Once a restore is declared, the events still queued from before it carry
// the history the server lost (or a watch resumed on the restored server's
// new one): the relist replaces them all. Applied meanwhile, they showed
// handlers states the relist then took back, after the declaration that
// was to cover them. They are dropped: the indexer and handlers go from the
// state before the declaration to the relist's.
func TestEventsAfterADeclaredRestoreAreDropped(t *testing.T) {
	regs := newRegressionLog()
	inf, lw, w := startScripted(t, listThenWatch, listResponse{rv: "10"}, WithRegressionHandler(regs.handle))
	rec := recordHandlers(t, inf)
	w.Add(cm("a", "100"))
	waitFresh(t, inf, "100")
	rec.waitFor(t, 1)
	lw.queueLists(listResponse{rv: "60", err: connectionRefused()}) // no relist yet
	st := inf.trust.View().Stamp
	restoreAt60(inf, st)
	regs.next(t)
	// An event the old stream had queued, applied after the declaration.
	if err := inf.handleBatch([]toolscache.Delta{{Type: toolscache.Updated, Object: cm("a", "110")}}, false); err != nil {
		t.Fatal(err)
	}
	if got := cached(inf, "a"); got != "100" {
		t.Fatalf("a cached at %q after the declaration, want 100 until the relist", got)
	}
	lw.queueLists(listResponse{rv: "60", objects: []*corev1.ConfigMap{cm("a", "40")}})
	waitFresh(t, inf, "60")
	want := []string{"add a@100 initial=false", "update a@100->40"}
	if got := rec.waitFor(t, len(want)); !slices.Equal(got, want) {
		t.Fatalf("handlers got %q, want %q", got, want)
	}
}
