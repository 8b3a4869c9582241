package freshness

import (
	"cmp"
	"container/heap"
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Tracker is a logical clock of resource versions: it holds the highest RV a
// cache has applied and lets callers wait until it reaches a target.
//
// Advancing is monotonic: an older RV never moves the tracker back (Reset is
// the one, explicit, way down). Waiting costs no CPU: a waiter blocks on a
// channel that is closed when the tracker reaches its target. Waiters for
// the same RV share one channel, and targets sit in a min-heap, so a step
// that releases k of n pending targets costs O(k log n). A Wait whose target
// is already reached returns after one atomic load, without allocating.
//
// The zero Tracker is ready to use and is at the zero RV ("none"). A Tracker
// must not be copied after first use.
type Tracker struct {
	// fast mirrors cur for Wait's lock-free path: cur's value when it fits in
	// 64 bits, math.MaxUint64 when it is larger, 0 when there is none or the
	// tracker is incomparable (so the fast path always misses then).
	fast atomic.Uint64

	// mu guards the fields below. It is a leaf: the tracker calls nothing
	// outside while holding it (callbacks run after it is released).
	mu           sync.Mutex
	cur          RV
	incomparable error // set by SetIncomparable, cleared by Reset
	stopped      bool
	targets      targetHeap             // pending targets, oldest first
	byRV         map[string]*waitTarget // the same targets, by canonical RV
	pending      int                    // goroutines blocked in Wait
	due          []dueFunc              // released AfterFunc callbacks, run after unlocking
	holds        int                    // HoldCallbacks calls not yet ended by RunHeldCallbacks
	suspended    int                    // Suspend calls not yet ended by Resume (suspend.go)
}

type dueFunc struct {
	f   func(error)
	err error
}

// waitTarget is one RV that at least one caller waits for.
type waitTarget struct {
	rv      RV
	reached chan struct{} // closed once the target is released
	err     error         // why it was released: nil when reached
	waiters int
	funcs   []*afterFunc // AfterFunc callbacks, run once released
	index   int          // position in targets, -1 once released
}

// Current returns the highest RV applied so far, or the zero RV.
func (t *Tracker) Current() RV {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cur
}

// Pending returns how many callers are blocked in Wait.
func (t *Tracker) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pending
}

// Advance records that rv has been applied. It moves the tracker forward only
// if rv is newer than the current RV, releasing every waiter whose target is
// now reached, and returns rv's order relative to the RV it had: +1 when it
// advanced, 0 when rv was the current RV, -1 when rv was older (ignored; the
// caller may count or log it).
func (t *Tracker) Advance(rv RV) int {
	t.mu.Lock()
	c := rv.Compare(t.cur)
	if c > 0 && t.incomparable == nil && !t.stopped {
		t.set(rv)
	}
	t.unlockAndRun()
	return c
}

// Reset moves the tracker to rv even if that is older than the current RV,
// and leaves incomparable mode. It is meant for a declared regression (the
// server's state went back in time, for example after an etcd restore) and
// for a cache that starts over; waiters whose targets are now above the
// tracker keep waiting.
func (t *Tracker) Reset(rv RV) {
	t.mu.Lock()
	if !t.stopped {
		t.incomparable = nil
		t.set(rv)
	}
	t.unlockAndRun()
}

// SetIncomparable records that the stream served a resource version that
// cannot be ordered (cause should match ErrIncomparable). From then on, until
// Reset, every Wait fails at once with an error wrapping cause, and so does
// every Wait pending now: the tracker cannot tell what is fresh, and saying
// so beats hanging.
func (t *Tracker) SetIncomparable(cause error) {
	t.mu.Lock()
	if !t.stopped {
		t.incomparable = cause
		t.fast.Store(0)
		t.releaseAll(cause)
	}
	t.unlockAndRun()
}

// Stop releases every pending waiter with ErrStopped and makes later waits
// for a target not yet reached fail at once. The RV reached stays readable.
// Stop is idempotent.
func (t *Tracker) Stop() {
	t.mu.Lock()
	t.stopped = true
	t.releaseAll(ErrStopped)
	t.unlockAndRun()
}

// AfterFunc arranges for f to be called once the tracker reaches rv, with
// nil, or once it can no longer get there, with an error matching
// ErrStopped or ErrIncomparable. If rv is already reached (or the tracker
// already stopped or incomparable) f is called at once, on the caller's
// goroutine. Otherwise f runs on the goroutine that released it, after the
// tracker's lock is released; while callbacks are held (HoldCallbacks), on
// the goroutine that ends the hold, after its lock is dropped. f may call
// the tracker; it should be quick, since it delays the callbacks after it
// (record a metric, signal a channel, queue work). A panicking f does not
// keep the others from running. Registering costs what a pending Wait
// does; the zero RV is always reached.
func (t *Tracker) AfterFunc(rv RV, f func(error)) {
	t.AfterFuncCancelable(rv, f)
}

// HoldCallbacks makes the AfterFunc callbacks released from now on wait
// until the matching RunHeldCallbacks instead of running on the goroutine
// that released them. An owner that advances the tracker while holding a
// lock of its own calls HoldCallbacks after taking that lock and
// RunHeldCallbacks after dropping it, so callbacks never run under the
// lock and may call back into the owner. Holds nest; callbacks released
// by other goroutines meanwhile are held too, and run by the last
// RunHeldCallbacks.
func (t *Tracker) HoldCallbacks() {
	t.mu.Lock()
	t.holds++
	t.mu.Unlock()
}

// RunHeldCallbacks ends a HoldCallbacks and, if no other hold is left,
// runs the callbacks held meanwhile, on the calling goroutine.
func (t *Tracker) RunHeldCallbacks() {
	t.mu.Lock()
	t.holds--
	t.unlockAndRun()
}

// unlockAndRun unlocks t.mu and then calls the AfterFunc callbacks that
// the locked section released, unless they are held (HoldCallbacks).
func (t *Tracker) unlockAndRun() {
	if t.holds > 0 {
		t.mu.Unlock()
		return
	}
	due := t.due
	t.due = nil
	t.mu.Unlock()
	runDue(due)
}

// runDue calls each callback in turn. If one panics, the rest still run
// before the panic goes on up: a callback that panics loses no other
// caller's wake-up.
func runDue(due []dueFunc) {
	i := 0
	defer func() {
		if i < len(due) {
			runDue(due[i+1:])
		}
	}()
	for ; i < len(due); i++ {
		due[i].f(due[i].err)
	}
}

// Wait blocks until the tracker has reached rv, ctx ends, or the tracker is
// stopped. It returns nil once the tracker is at rv or newer; an error
// matching ErrIncomparable at once when rv is malformed or the tracker is
// incomparable; otherwise a *WaitError that unwraps to ctx.Err() or
// ErrStopped and says the target, the RV reached and how long it waited.
func (t *Tracker) Wait(ctx context.Context, rv string) error {
	target, err := ParseRV(rv)
	if err != nil {
		return err
	}
	return t.WaitRV(ctx, target)
}

// Reached reports whether the tracker has reached rv (never while it is
// incomparable). It costs one atomic load when it has.
func (t *Tracker) Reached(rv RV) bool {
	if (rv.n != 0 && t.fast.Load() >= rv.n) || rv.IsZero() {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.incomparable == nil && t.reachedLocked(rv)
}

// WaitRV is Wait for a parsed target. The zero RV is always reached.
func (t *Tracker) WaitRV(ctx context.Context, target RV) error {
	if target.n != 0 && t.fast.Load() >= target.n {
		return nil
	}
	if target.IsZero() {
		return nil
	}
	return t.waitSlow(ctx, target)
}

func (t *Tracker) waitSlow(ctx context.Context, target RV) error {
	start := time.Now()
	t.mu.Lock()
	if t.incomparable != nil {
		return t.failLocked(target, start, t.incomparable)
	}
	if t.reachedLocked(target) {
		t.mu.Unlock()
		return nil
	}
	if t.stopped {
		return t.failLocked(target, start, ErrStopped)
	}
	if err := ctx.Err(); err != nil {
		return t.failLocked(target, start, err)
	}
	w := t.join(target)
	t.mu.Unlock()

	select {
	case <-w.reached:
		// w.err was written before reached was closed.
		if w.err == nil {
			return nil
		}
		t.mu.Lock()
		return t.failLocked(target, start, w.err)
	case <-ctx.Done():
	}

	t.mu.Lock()
	if w.index < 0 { // released while ctx ended: its outcome stands
		if w.err == nil {
			t.mu.Unlock()
			return nil
		}
		return t.failLocked(target, start, w.err)
	}
	t.leave(w)
	return t.failLocked(target, start, ctx.Err())
}

// failLocked builds the error for a wait that ended without reaching target,
// and unlocks t.mu.
func (t *Tracker) failLocked(target RV, start time.Time, cause error) error {
	err := &WaitError{Target: target.String(), Current: t.cur.String(), Waited: time.Since(start), Err: cause}
	t.mu.Unlock()
	return err
}

// set stores rv as current and releases the targets it reaches. t.mu is held.
func (t *Tracker) set(rv RV) {
	t.cur = rv
	if t.suspended > 0 {
		return // Resume releases what rv reaches
	}
	switch {
	case rv.n != 0:
		t.fast.Store(rv.n)
	case rv.IsZero():
		t.fast.Store(0)
	default: // beyond 64 bits: newer than every value the fast path can hold
		t.fast.Store(math.MaxUint64)
	}
	for len(t.targets) > 0 && rv.AtLeast(t.targets[0].rv) {
		t.release(heap.Pop(&t.targets).(*waitTarget), nil)
	}
}

// target returns the pending target for rv, making it if needed. t.mu is
// held.
func (t *Tracker) target(rv RV) *waitTarget {
	w := t.byRV[rv.s]
	if w == nil {
		if t.byRV == nil {
			t.byRV = make(map[string]*waitTarget)
		}
		w = &waitTarget{rv: rv, reached: make(chan struct{})}
		t.byRV[rv.s] = w
		heap.Push(&t.targets, w)
	}
	return w
}

// join registers one more waiter for target. t.mu is held.
func (t *Tracker) join(target RV) *waitTarget {
	w := t.target(target)
	w.waiters++
	t.pending++
	return w
}

// leave unregisters a waiter whose context ended; the last one out removes
// the target so abandoned targets do not pile up. t.mu is held.
func (t *Tracker) leave(w *waitTarget) {
	w.waiters--
	t.pending--
	if w.waiters == 0 && len(w.funcs) == 0 {
		heap.Remove(&t.targets, w.index)
		delete(t.byRV, w.rv.s)
	}
}

// release wakes every waiter of w with err (nil: reached). w is out of the
// heap already. t.mu is held.
func (t *Tracker) release(w *waitTarget, err error) {
	delete(t.byRV, w.rv.s)
	t.pending -= w.waiters
	w.err = err
	close(w.reached)
	for _, a := range w.funcs {
		t.due = append(t.due, dueFunc{a.f, err})
	}
	w.funcs = nil
}

// releaseAll wakes every pending waiter with err. t.mu is held.
func (t *Tracker) releaseAll(err error) {
	for _, w := range t.targets {
		w.index = -1
		t.release(w, err)
	}
	t.targets = nil
}

// targetHeap is a min-heap of wait targets by RV (container/heap).
type targetHeap []*waitTarget

func (h targetHeap) Len() int           { return len(h) }
func (h targetHeap) Less(i, j int) bool { return h[i].rv.Compare(h[j].rv) < 0 }
func (h targetHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *targetHeap) Push(x any) {
	w := x.(*waitTarget)
	w.index = len(*h)
	*h = append(*h, w)
}

func (h *targetHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	w.index = -1
	*h = old[:len(old)-1]
	return w
}

// Compare orders the tracker's RV against rv as RV.Compare does: -1 when
// it is older, 0 when equal, +1 when newer. It answers for the position
// alone, suspended or not (see Suspend); callers check incomparability
// themselves. It costs one atomic load when both fit in 64 bits and the
// tracker is neither suspended nor incomparable.
func (t *Tracker) Compare(rv RV) int {
	if f := t.fast.Load(); f != 0 && f != math.MaxUint64 && rv.n != 0 {
		return cmp.Compare(f, rv.n)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cur.Compare(rv)
}
