package cache

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/internal/trust"
	"github.com/freshinformer/freshinformer/reflector"
)

// A quiet probe's proof computed before a restore was
// declared, landing after it, is void: the restore forgot the position
// until its relist, and the proof speaks of the history the server lost.
// Before, the proof checked the regression count, then moved the tracker
// outside the lock the restore reset it under, and WaitForFreshness
// returned nil on the pre-restore cache.
func TestProofAfterADeclaredRestoreIsVoid(t *testing.T) {
	inf, q, _ := queuedInformer(t, nil)
	replace(t, q, "100", cm("a", "100"))
	drain(t, q, inf, 1)
	st := inf.trust.View().Stamp // the probe's read is sent
	declareRestore(t, inf)       // a restore check declares a restore meanwhile
	inf.applyMu.Lock()
	inf.submit(trust.Proof{From: mustRV(t, "100"), To: mustRV(t, "150"), Stamp: st}) // the bookmark proof lands
	ok := inf.submit(trust.Proof{To: mustRV(t, "150"), Stamp: st})                   // and a snapshot's
	inf.unlockApply()
	if ok || inf.trust.Reached(mustRV(t, "150")) || inf.trust.Reached(mustRV(t, "60")) || inf.LastObservedResourceVersion() != "" {
		t.Fatalf("a proof from before the restore moved the position to %q (snapshot accepted %v)", inf.LastObservedResourceVersion(), ok)
	}
}

// The same, run at once: whatever the interleaving of a restore's
// declaration and a proof sent before it, no wait is released on the lost
// history.
func TestProofRacingARestoreNeverReleasesWaits(t *testing.T) {
	for i := range 300 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			inf, q, _ := queuedInformer(t, nil)
			replace(t, q, "100", cm("a", "100"))
			drain(t, q, inf, 1)
			st := inf.trust.View().Stamp
			var wg sync.WaitGroup
			wg.Go(func() { declareRestore(t, inf) })
			wg.Go(func() {
				inf.applyMu.Lock()
				inf.submit(trust.Proof{From: mustRV(t, "100"), To: mustRV(t, "150"), Stamp: st})
				inf.unlockApply()
			})
			wg.Wait()
			if inf.trust.Reached(mustRV(t, "150")) {
				t.Fatalf("fresh at 150 after a restore, at %s", inf.LastObservedResourceVersion())
			}
		})
	}
}

// A proof whose request was sent before a request failed or a stream
// broke is void too, though no regression is known yet: the server its
// later answers came from may have restarted from a restored etcd, whose
// new history the proof would graft onto the cache's old one (a quiet
// probe's auxiliary watch, begun on the old server, proving a gap on the
// restored one, outrun by writes, would let a wait return nil on the lost
// history).
func TestProofSentBeforeABreakIsVoid(t *testing.T) {
	inf, q, _ := queuedInformer(t, nil)
	replace(t, q, "100", cm("a", "100"))
	drain(t, q, inf, 1)
	st := inf.trust.View().Stamp      // the probe's read is sent
	inf.trust.Submit(trust.Failure{}) // the server goes away meanwhile
	askList(t, inf)                   // and is listed again
	replace(t, q, "120", cm("a", "100"))
	drain(t, q, inf, 1)
	inf.applyMu.Lock()
	inf.submit(trust.Proof{From: mustRV(t, "100"), To: mustRV(t, "150"), Stamp: st}) // the proof lands
	ok := inf.submit(trust.Proof{To: mustRV(t, "150"), Stamp: st})
	inf.unlockApply()
	if ok || inf.trust.Reached(mustRV(t, "121")) || inf.LastObservedResourceVersion() != "120" {
		t.Fatalf("a proof sent before the break moved the position to %s", inf.LastObservedResourceVersion())
	}
}

// A freshness callback that panics, in a batch whose
// list found keys gone back, neither keeps the regression from being
// declared nor leaves waits held: with utilruntime.ReallyCrash off (as
// client-go's process loop runs then), the panic is reported, the other
// callbacks run, and waits for the list's resource version return. Before,
// the panic unwound past the declaration: OnRegression was never called
// and every wait blocked until the next event.
func TestPanickingCallbackDuringARegressionDeclaresIt(t *testing.T) {
	panics := withoutReallyCrash(t)
	regs := newRegressionLog()
	inf, q, _ := queuedInformer(t, nil, WithRegressionHandler(regs.handle))
	inf.starting() // as a factory does: a callback for an RV not reached waits
	replace(t, q, "100", cm("a", "100"))
	drain(t, q, inf, 1)
	inf.AfterFreshness("101", func(error) { panic("callback") })
	var ran atomic.Bool
	inf.AfterFreshness("101", func(error) { ran.Store(true) })
	// One batch: a@101 releases both callbacks; a relist at 110 brings a
	// back to 50.
	batch := []toolscache.Delta{
		{Type: toolscache.Updated, Object: cm("a", "101")},
		{Type: toolscache.ReplacedAll, Object: toolscache.ReplacedAllInfo{ResourceVersion: "110", Objects: []any{cm("a", "50")}}},
	}
	func() {
		defer func() { _ = recover() }()
		_ = inf.handleBatch(batch, false)
	}()
	select {
	case r := <-regs.ch:
		if r.Reason != reflector.RegressionKeysWentBack {
			t.Fatalf("regression %+v", r)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the regression was never declared")
	}
	if err := inf.CheckFreshness("110"); err != nil {
		t.Fatalf("waits are held for good after the panicking callback: %v", err)
	}
	if !ran.Load() || len(panics()) == 0 {
		t.Fatalf("the other callback ran %v, panics reported %d", ran.Load(), len(panics()))
	}
}

// That no probe timer's callback runs after RunWithContext has returned
// is internal/probe's TestSchedulerStopWaitsForAFiredTimer.

// A wait on an informer never started: notstarted_test.go.

// A wait right after a factory's Start finds the informer started, however
// late its goroutine runs.
func TestWaitRightAfterFactoryStart(t *testing.T) {
	lw := newQuietLW(t, "10")
	inf := NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, nil, scriptOptions()...)
	inf.starting()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	errc := make(chan error, 1)
	go func() {
		wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer wcancel()
		errc <- inf.WaitForFreshness(wctx, "10")
	}()
	time.Sleep(10 * time.Millisecond)
	go func() { defer close(done); inf.RunWithContext(ctx) }()
	if err := <-errc; err != nil {
		t.Fatal(fmt.Errorf("a wait begun before the run started: %w", err))
	}
}
