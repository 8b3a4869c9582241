package cache

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/rvwait"
)

// Sync is a read barrier: it returns once the cache reflects everything the
// server had committed when Sync was called, the client-side counterpart of
// the apiserver's consistent reads from its watch cache (KEP-2340). After a
// nil return, the indexer's Get and List show every change to the
// informer's objects committed before the call, on a busy resource and on
// a quiet one alike.
//
// It reads the server's state with one consistent list through the
// informer's ListerWatcher (same namespace and selectors; served from the
// apiserver's watch cache on Kubernetes 1.31+), then waits for its
// resource version with WaitForFreshness. On an informer of up to the
// snapshot limit (WithSnapshotProbeLimit) the list holds its objects, and
// when the cache holds exactly those, that is the whole cost: one request,
// fresh on a quiet resource too. Otherwise (a larger informer: a limit=1
// list; or events still on their way) the wait does the rest: if the
// informer's stream does not reach the resource version within the probe
// delay, one freshness probe follows (see the package documentation,
// "Quiet resources"). Concurrent Sync calls share one probe.
//
// Errors: the list's error, wrapped, or WaitForFreshness's.
func (f *FreshInformer) Sync(ctx context.Context) error {
	rv, err := f.prover.Sync(ctx)
	if err != nil {
		return fmt.Errorf("freshinformer: reading the current resource version of %s: %w", f.cfg.resource, err)
	}
	return f.WaitForFreshness(ctx, rv.String())
}

// AfterFreshness arranges for fn to run once the cache has applied rv,
// with nil, or once it cannot get there, with an error as
// WaitForFreshness's (at once, on the caller's goroutine, when rv is
// malformed or already reached; after the start grace, about a second,
// when the informer's Run has not begun by then). It is
// WaitForFreshness without a blocked goroutine, for a workqueue that
// re-adds a key when the cache catches up. fn runs on the goroutine that
// applied the event or bookmark (or answered a probe), after the informer
// has released its locks, so it may call back into the informer and the
// library (RecordWrite, ReadYourWrites, AddEventHandler, AfterFreshness,
// ...); it should be quick, since the informer applies nothing more until
// it returns. A panic in fn is reported through utilruntime.HandleCrash,
// as a handler's is, and the other callbacks still run. It counts as a
// pending wait (a quiet resource is probed for it) and is held back as
// WaitForFreshness is (see RecordWrite). stop calls fn off and reports
// whether it did (false once fn has run or is running).
func (f *FreshInformer) AfterFreshness(rv string, fn func(error)) (stop func() bool) {
	target, err := freshness.ParseRV(rv)
	if err != nil {
		fn(err)
		return func() bool { return false }
	}
	return f.afterFresh(target, fn)
}

// WaitForFreshness blocks until the cache has applied rv (every event up to
// rv that the informer's selector admits is in the indexer), ctx ends, or
// the informer stops. It returns nil at once, without allocating, when the
// cache is already that fresh. Errors: one matching freshness.ErrIncomparable
// at once when rv is malformed; otherwise a *freshness.WaitError that
// unwraps to the cause: freshness.ErrNotStarted for an informer whose Run
// has not begun within the start grace (about a second: `go
// inf.RunWithContext(ctx)` followed at once by a wait is client-go's
// idiom, and the wait gives that goroutine time to begin; if ctx ends
// first, the error matches both ctx.Err() and freshness.ErrNotStarted),
// freshness.ErrIncomparable while the server's resource versions
// cannot be ordered, freshness.ErrTooLargeResourceVersion when a consistent
// read sent after the wait began shows the server has not reached rv
// (another cluster's resource version, a made-up one, or a write a restore
// lost), freshness.ErrStopped, or ctx.Err(). While the informer cannot
// vouch for its cache (its stream broke and it has not listed since, a
// restore check is in flight, a regression is being declared), no wait
// returns nil; the package documentation, "When a wait returns", says
// exactly when one does.
func (f *FreshInformer) WaitForFreshness(ctx context.Context, rv string) error {
	target, err := freshness.ParseRV(rv)
	if f.metrics != nil {
		return f.waitMeasured(ctx, target, err)
	}
	if err != nil || f.trust.Reached(target) { // one atomic load
		return err
	}
	return f.waitBounded(ctx, target)
}

// waitMeasured is WaitForFreshness with metrics. Out of line: a waiter's
// stack stays within its goroutine's first one (see trust.Trust.Wait).
func (f *FreshInformer) waitMeasured(ctx context.Context, target freshness.RV, err error) error {
	switch {
	case err != nil:
		f.metrics.ObserveWait(WaitIncomparable, 0)
		return err
	case f.trust.Reached(target):
		f.metrics.ObserveWait(WaitFresh, 0)
		return nil
	}
	start := time.Now()
	err = f.waitBounded(ctx, target)
	f.metrics.ObserveWait(outcomeOf(err), time.Since(start))
	return err
}

// LastObservedResourceVersion returns the highest resource version the
// cache has applied, "" before the first list. It never decreases while the
// informer runs, except by a declared regression.
func (f *FreshInformer) LastObservedResourceVersion() string {
	return f.trust.View().Shown.String()
}

// waitBounded is WaitForFreshness's wait once rv is parsed: the trust's
// wait, with the informer probing the server while it makes no progress.
func (f *FreshInformer) waitBounded(ctx context.Context, target freshness.RV) error {
	if f.trust.Reached(target) || !f.prover.Join(target) {
		return f.trust.Wait(ctx, target)
	}
	err := f.trust.Wait(ctx, target) // no defer: a smaller frame (waitMeasured)
	f.prover.Leave()
	return err
}

// afterFresh is AfterFreshness once rv is parsed: the trust's callback,
// counted as a pending wait (so that a quiet resource is probed for it)
// until it runs or is stopped. Like WaitForFreshness, it is held back
// while waits are (see the package documentation, "When a wait returns").
func (f *FreshInformer) afterFresh(target freshness.RV, fn func(error)) (stop func() bool) {
	c := &afterFreshCall{f: f, fn: fn}
	c.joined = !f.trust.Reached(target) && f.prover.Join(target)
	var due rvwait.Due
	c.stopWait, due = f.trust.AfterFunc(target, c.fire)
	due.Run() // fn, if it is due at once
	return c.stop
}

// afterFreshCall is one AfterFreshness callback. Firing and stopping
// each end it, and exactly one of them wins (ended).
type afterFreshCall struct {
	f        *FreshInformer
	fn       func(error)
	joined   bool        // counted in the quiet probe's waiters
	stopWait func() bool // set before stop is handed out
	ended    atomic.Bool // fired or stopped
}

func (c *afterFreshCall) fire(err error) {
	if c.end() {
		c.fn(err)
	}
}

func (c *afterFreshCall) stop() bool {
	if !c.end() {
		return false
	}
	c.stopWait()
	return true
}

// end marks the call over and leaves the quiet probe's waiters; it reports
// false if it was over already.
func (c *afterFreshCall) end() bool {
	if !c.ended.CompareAndSwap(false, true) {
		return false
	}
	if c.joined {
		c.f.prover.Leave()
	}
	return true
}
