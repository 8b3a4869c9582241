// Package rvwait holds waiters for a position in an ordered sequence of
// versions (resource versions) and releases them when the position their
// owner publishes reaches them: the wait-for-logical-time machinery behind
// freshness.Tracker and the informer's trust state (package cache). It is
// etcd's pkg/wait WaitTime with targets in a min-heap, contexts, callbacks
// and a fast path.
//
// The owner decides what is published, and when what a change released
// wakes (Due); Set only keeps the promise that a wait is released with nil
// once, and only while, the published position is at or past its target
// and open. Stopping keeps the position: a wait for a target reached
// before the stop still returns nil, others fail.
package rvwait

import (
	"container/heap"
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// Version is an ordered version: freshness.RV.
type Version[V any] interface {
	Compare(V) int
	IsZero() bool
	Uint64() (uint64, bool)
	String() string
}

// Set is a published position and the waiters for targets it has not
// reached. Its lock (Lock, Unlock) guards it and may guard the owner's
// state as well: methods named ...Locked are called with it held, the rest
// take it themselves. The zero Set is published at the zero version, open.
type Set[V Version[V]] struct {
	// fast mirrors pos for Wait's lock-free path: its value while open
	// and within 64 bits, math.MaxUint64 while open beyond them, 0
	// otherwise (so the fast path misses while held or failed).
	fast atomic.Uint64

	mu      sync.Mutex
	pos     V
	held    bool          // nothing counts as reached (PublishLocked's open=false)
	failErr error         // every wait fails with it (FailLocked), until published again
	stopErr error         // every wait fails with it, for good
	targets targetHeap[V] // pending targets, lowest first
	byRV    map[string]*target[V]
	pending int    // goroutines blocked in Wait
	seq     uint64 // joins so far (Seq)
}

// target is one version that at least one waiter or callback waits for.
type target[V Version[V]] struct {
	rv       V
	reached  chan struct{} // closed by the Due that released it
	err      error         // why it was released: nil when reached
	waiters  int
	funcs    []*afterFunc[V]
	index    int    // position in the heap, -1 once released
	lastJoin uint64 // Seq of the newest join
}

type afterFunc[V Version[V]] struct {
	f      func(error)
	target *target[V] // nil once stopped
}

// Due is what a change released: the wake of its waiters, then its
// callbacks, in release order, for Run once the caller holds no lock (a
// callback may call back into the owner). No waiter returns before its
// Due is run, so the owner decides when they wake: the informer wakes
// them once the batch is applied and its handlers were told, so the
// scheduler runs a woken wait first instead of queueing it behind the
// handlers' goroutines readied after it. A Due must be run.
type Due []func()

// Run wakes the waiters and calls each callback. A panicking one is
// reported through utilruntime.HandleCrash (which crashes the process
// unless utilruntime.ReallyCrash is off) and the others still run: the caller
// runs Due after its state is consistent, so a panic leaves nothing half
// done.
func (d Due) Run() {
	for _, f := range d {
		func() {
			defer utilruntime.HandleCrash()
			f()
		}()
	}
}

// Lock takes the Set's lock.
func (s *Set[V]) Lock() { s.mu.Lock() }

// Unlock releases the Set's lock.
func (s *Set[V]) Unlock() { s.mu.Unlock() }

// PublishLocked makes pos the position waits are measured against: with
// open, every target at or below it is released; held (open false), no
// target counts as reached, whatever pos is. It leaves FailLocked's mode.
func (s *Set[V]) PublishLocked(pos V, open bool) Due {
	if s.stopErr != nil {
		return nil
	}
	s.pos, s.held, s.failErr = pos, !open, nil
	n, fits := pos.Uint64()
	switch {
	case !open || pos.IsZero():
		s.fast.Store(0)
	case fits:
		s.fast.Store(n)
	default:
		s.fast.Store(math.MaxUint64)
	}
	if !open {
		return nil
	}
	var due Due
	for len(s.targets) > 0 && pos.Compare(s.lowest().rv) >= 0 {
		due = s.release(heap.Pop(&s.targets).(*target[V]), nil, due)
	}
	return due
}

// FailLocked releases every pending target with err, and fails every
// later wait with it at once, until the next PublishLocked.
func (s *Set[V]) FailLocked(err error) Due {
	if s.stopErr != nil {
		return nil
	}
	s.failErr = err
	s.fast.Store(0)
	return s.releaseAll(err)
}

// StopLocked releases every pending target with err, and fails every
// later wait for a target not reached with it, for good: no later publish
// undoes it. What is reached stays reached.
func (s *Set[V]) StopLocked(err error) Due {
	if s.stopErr != nil {
		return nil
	}
	s.stopErr = err
	return s.releaseAll(err)
}

// FailAboveLocked releases, each with errOf(its target), the targets above
// limit whose every waiter and callback joined by the time SeqLocked was
// seq: a read sent then showed the server had not reached them.
func (s *Set[V]) FailAboveLocked(limit V, seq uint64, errOf func(V) error) Due {
	var failed []*target[V]
	for _, w := range s.targets {
		if w.rv.Compare(limit) > 0 && w.lastJoin <= seq {
			failed = append(failed, w)
		}
	}
	var due Due
	for _, w := range failed {
		heap.Remove(&s.targets, w.index)
		due = s.release(w, errOf(w.rv), due)
	}
	return due
}

// SeqLocked returns how many joins (waits and callbacks) there have been: a
// target with no join since has waited since before.
func (s *Set[V]) SeqLocked() uint64 { return s.seq }

// PositionLocked returns the published position and whether it is open.
func (s *Set[V]) PositionLocked() (V, bool) {
	return s.pos, !s.held && s.failErr == nil && s.stopErr == nil
}

// PendingLocked returns how many callers are blocked in Wait.
func (s *Set[V]) PendingLocked() int { return s.pending }

// LowestLocked returns the lowest pending target (of a Wait or a
// callback), and false when there is none.
func (s *Set[V]) LowestLocked() (V, bool) {
	if len(s.targets) == 0 {
		var none V
		return none, false
	}
	return s.targets[0].rv, true
}

// Fast is the fast path's published value (see Set.fast), for an owner
// whose concrete version type lets the compiler inline its comparison.
func (s *Set[V]) Fast() uint64 { return s.fast.Load() }

// ReachedFast reports true when target is reached by the fast path alone
// (one atomic load); false means "ask ReachedLocked".
func (s *Set[V]) ReachedFast(target V) bool {
	n, fits := target.Uint64()
	return target.IsZero() || (fits && s.fast.Load() >= n)
}

// ReachedLocked reports whether target counts as reached now.
func (s *Set[V]) ReachedLocked(target V) bool {
	return target.IsZero() || (!s.held && s.failErr == nil && s.pos.Compare(target) >= 0)
}

// Wait blocks until target is reached, ctx ends, or the Set fails or
// stops. Its errors come from fail(target, the position then, how long it
// waited, the cause): the cause is ctx's error or the failure's.
func (s *Set[V]) Wait(ctx context.Context, target V, fail func(target, pos V, waited time.Duration, cause error) error) error {
	if s.ReachedFast(target) {
		return nil
	}
	start := time.Now()
	s.mu.Lock()
	if s.ReachedLocked(target) {
		s.mu.Unlock()
		return nil
	}
	if cause := s.errLocked(ctx); cause != nil {
		return s.failUnlock(target, start, cause, fail)
	}
	w := s.join(target)
	w.waiters++
	s.pending++
	s.mu.Unlock()

	if done := ctx.Done(); done == nil {
		// A ctx that cannot end: a receive, not a select, which on waking
		// locks its channel again, in turn with every waiter woken with it.
		<-w.reached
	} else {
		select {
		case <-w.reached:
		case <-done:
			return s.leave(ctx, w, target, start, fail)
		}
	}
	if w.err == nil { // written before reached was closed
		return nil
	}
	s.mu.Lock()
	return s.failUnlock(target, start, w.err, fail)
}

// leave ends a wait on w whose ctx ended.
func (s *Set[V]) leave(ctx context.Context, w *target[V], target V, start time.Time, fail func(V, V, time.Duration, error) error) error {
	s.mu.Lock()
	if w.index < 0 { // released as ctx ended: its outcome stands
		if w.err == nil {
			s.mu.Unlock()
			return nil
		}
		return s.failUnlock(target, start, w.err, fail)
	}
	w.waiters--
	s.pending--
	s.dropIfUnused(w)
	return s.failUnlock(target, start, ctx.Err(), fail)
}

// errLocked is why a wait that has not reached its target cannot begin.
func (s *Set[V]) errLocked(ctx context.Context) error {
	switch {
	case s.stopErr != nil:
		return s.stopErr
	case s.failErr != nil:
		return s.failErr
	}
	return ctx.Err()
}

func (s *Set[V]) failUnlock(target V, start time.Time, cause error, fail func(V, V, time.Duration, error) error) error {
	pos := s.pos
	s.mu.Unlock()
	return fail(target, pos, time.Since(start), cause)
}

// AfterFuncLocked arranges for f to be called once target is reached,
// with nil, or once the Set fails or stops, with that error. If that is
// so already, f is returned in the Due for the caller to run. stop calls
// f off unless it was released already and reports whether it did; it
// may be called from any goroutine, from f, and more than once.
func (s *Set[V]) AfterFuncLocked(target V, f func(error)) (stop func() bool, due Due) {
	never := func() bool { return false }
	if s.ReachedLocked(target) {
		return never, Due{func() { f(nil) }}
	}
	if err := s.errLocked(context.Background()); err != nil {
		return never, Due{func() { f(err) }}
	}
	w := s.join(target)
	a := &afterFunc[V]{f: f, target: w}
	w.funcs = append(w.funcs, a)
	return func() bool { return s.stopAfterFunc(a) }, nil
}

func (s *Set[V]) stopAfterFunc(a *afterFunc[V]) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := a.target
	if w == nil || w.index < 0 { // stopped before, or released
		return false
	}
	a.target = nil
	for i, b := range w.funcs {
		if b == a {
			w.funcs = append(w.funcs[:i], w.funcs[i+1:]...)
			break
		}
	}
	s.dropIfUnused(w)
	return true
}

// join returns the pending target for rv, made if needed, stamped with a
// new join.
func (s *Set[V]) join(rv V) *target[V] {
	w := s.byRV[rv.String()]
	if w == nil {
		if s.byRV == nil {
			s.byRV = make(map[string]*target[V])
		}
		w = &target[V]{rv: rv, reached: make(chan struct{})}
		s.byRV[rv.String()] = w
		heap.Push(&s.targets, w)
	}
	s.seq++
	w.lastJoin = s.seq
	return w
}

// dropIfUnused removes a target nobody waits for any more, so that
// abandoned targets do not pile up.
func (s *Set[V]) dropIfUnused(w *target[V]) {
	if w.waiters == 0 && len(w.funcs) == 0 && w.index >= 0 {
		heap.Remove(&s.targets, w.index)
		delete(s.byRV, w.rv.String())
	}
}

// release settles w (out of the heap already) with err and appends the
// wake of its waiters, then its callbacks, to due.
func (s *Set[V]) release(w *target[V], err error, due Due) Due {
	delete(s.byRV, w.rv.String())
	s.pending -= w.waiters
	w.err = err
	if w.waiters > 0 {
		due = append(due, w.wake)
	}
	for _, a := range w.funcs {
		f := a.f
		due = append(due, func() { f(err) })
	}
	w.funcs = nil
	return due
}

// wake lets w's waiters return (w.err is written before).
func (w *target[V]) wake() { close(w.reached) }

func (s *Set[V]) releaseAll(err error) Due {
	var due Due
	for _, w := range s.targets {
		w.index = -1
		due = s.release(w, err, due)
	}
	s.targets = nil
	return due
}

func (s *Set[V]) lowest() *target[V] { return s.targets[0] }

// targetHeap is a min-heap of targets by version (container/heap).
type targetHeap[V Version[V]] []*target[V]

func (h targetHeap[V]) Len() int           { return len(h) }
func (h targetHeap[V]) Less(i, j int) bool { return h[i].rv.Compare(h[j].rv) < 0 }
func (h targetHeap[V]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *targetHeap[V]) Push(x any) {
	w := x.(*target[V])
	w.index = len(*h)
	*h = append(*h, w)
}

func (h *targetHeap[V]) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	w.index = -1
	*h = old[:len(old)-1]
	return w
}
