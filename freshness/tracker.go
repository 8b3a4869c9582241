package freshness

import (
	"context"
	"time"

	"github.com/freshinformer/freshinformer/internal/rvwait"
)

// Tracker is a logical clock of resource versions: it holds the highest RV
// a cache has applied and lets callers wait until it reaches a target, as
// etcd's pkg/wait WaitTime does for revisions.
//
// Advancing is monotonic: an older RV never moves the tracker back. Waiting
// costs no CPU: a waiter blocks on a channel that is closed when the
// tracker reaches its target. Waiters for the same RV share one channel,
// and targets sit in a min-heap, so a step that releases k of n pending
// targets costs O(k log n). A Wait whose target is already reached returns
// after one atomic load, without allocating.
//
// The zero Tracker is ready to use and is at the zero RV ("none"). A
// Tracker must not be copied after first use.
type Tracker struct {
	s rvwait.Set[RV]
}

// Current returns the highest RV applied so far, or the zero RV.
func (t *Tracker) Current() RV {
	t.s.Lock()
	defer t.s.Unlock()
	rv, _ := t.s.PositionLocked()
	return rv
}

// Pending returns how many callers are blocked in Wait.
func (t *Tracker) Pending() int {
	t.s.Lock()
	defer t.s.Unlock()
	return t.s.PendingLocked()
}

// Advance records that rv has been applied. It moves the tracker forward
// only if rv is newer than the current RV, releasing every waiter whose
// target is now reached (their AfterFunc callbacks run on this goroutine
// before Advance returns), and returns rv's order relative to the RV it
// had: +1 when it advanced, 0 when rv was the current RV, -1 when rv was
// older (ignored; the caller may count or log it).
func (t *Tracker) Advance(rv RV) int {
	t.s.Lock()
	cur, _ := t.s.PositionLocked()
	c := rv.Compare(cur)
	var due rvwait.Due
	if c > 0 {
		due = t.s.PublishLocked(rv, true)
	}
	t.s.Unlock()
	due.Run()
	return c
}

// Stop releases every pending waiter with ErrStopped and makes later waits
// for a target not yet reached fail at once. The RV reached stays readable.
// Stop is idempotent.
func (t *Tracker) Stop() {
	t.s.Lock()
	due := t.s.StopLocked(ErrStopped)
	t.s.Unlock()
	due.Run()
}

// Reached reports whether the tracker has reached rv. It costs one atomic
// load when it has.
func (t *Tracker) Reached(rv RV) bool {
	if t.s.ReachedFast(rv) {
		return true
	}
	t.s.Lock()
	defer t.s.Unlock()
	return t.s.ReachedLocked(rv)
}

// Wait blocks until the tracker has reached rv, ctx ends, or the tracker is
// stopped. It returns nil once the tracker is at rv or newer; an error
// matching ErrIncomparable at once when rv is malformed; otherwise a
// *WaitError that unwraps to ctx.Err() or ErrStopped and says the target,
// the RV reached and how long it waited.
func (t *Tracker) Wait(ctx context.Context, rv string) error {
	target, err := ParseRV(rv)
	if err != nil {
		return err
	}
	return t.s.Wait(ctx, target, newWaitError)
}

// AfterFunc arranges for f to be called once the tracker reaches rv, with
// nil, or once it is stopped, with an error matching ErrStopped: at once,
// on the caller's goroutine, if that is so already, else on the goroutine
// that advanced or stopped the tracker, after its lock is released. f may
// call the tracker; it should be quick, since it delays the callbacks after
// it. A panicking f is reported through utilruntime.HandleCrash, and,
// with utilruntime.ReallyCrash off, the other callbacks still run (with it
// on, client-go's default, HandleCrash panics again: the process ends).
// stop calls f off, as context.AfterFunc's
// does: it reports whether it did (false once f has run, is running or was
// stopped), and leaves no target behind. It is safe to call from any
// goroutine, more than once, and from f.
func (t *Tracker) AfterFunc(rv RV, f func(error)) (stop func() bool) {
	t.s.Lock()
	stop, due := t.s.AfterFuncLocked(rv, f)
	t.s.Unlock()
	due.Run()
	return stop
}

// newWaitError builds the error of a wait for target that ended, after
// waited, with the tracker at current, because of cause.
func newWaitError(target, current RV, waited time.Duration, cause error) error {
	return &WaitError{Target: target.String(), Current: current.String(), Waited: waited, Err: cause}
}
