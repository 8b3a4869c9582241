package cache

import (
	"fmt"
	"sync"
)

// WhenFresh arranges for f to be called once every cache owner wrote to
// has caught up with what was recorded for owner so far, with nil (and
// what was recorded is then settled, as CheckFresh does), or once one of
// them cannot catch up, with an error: one matching freshness.ErrStopped
// when its informer stopped, freshness.ErrIncomparable when its stream
// cannot be ordered, ErrNoInformer when an informer written to was never
// started.
//
// Nothing polls and nothing is started per call: f is registered on the
// informers' trackers and runs on whichever goroutine makes the last cache
// fresh (the one that applies the event or bookmark, or answers a probe,
// once it has dropped the informer's locks), or at once on the caller's
// goroutine when owner has nothing pending or an informer cannot catch up.
// It must be quick and must not block (signal a channel, add to a
// workqueue); no lock of the ReadYourWrites or the informers is held when
// it runs, so it may call them (Record, CheckFresh, WhenFresh). f runs at
// most once.
//
// stop calls f off: it reports true if f will not run, false if f has run
// or is running. It removes every registration, so a caller that gives up
// leaves nothing behind. stop is safe to call more than once and from f.
//
// A delete is fresh once the cache no longer holds the object (by UID) or
// holds it terminating at or past the delete's resource version; while it
// does not, WhenFresh looks again after each step of that informer.
func (r *ReadYourWrites) WhenFresh(owner Owner, f func(error)) (stop func() bool) {
	p := r.pending(owner)
	n := &freshNotice{f: f, remaining: 1, // one for the setup below
		settle: func() { r.settled(owner, p) }}
	for _, inf := range p.informers() {
		if err := usable(inf); err != nil {
			n.done(err)
			break
		}
		if rv, ok := p.written[inf]; ok {
			slot := n.add()
			n.keep(slot, inf.afterFresh(rv, func(err error) {
				if err != nil {
					err = fmt.Errorf("%s: write on behalf of %s: %w", inf.describe(), owner, err)
				}
				n.done(err)
			}))
		}
		for _, d := range p.deleted[inf] {
			inf.whenGone(d, owner, n, n.add())
		}
	}
	n.done(nil) // the setup's share
	return n.stop
}

// freshNotice joins the conditions of one WhenFresh call. Its methods run
// on the caller's goroutine and on the tracker callbacks' (any goroutine);
// n.mu orders them, and none of them holds it while calling out (stop
// functions, settle, f).
type freshNotice struct {
	mu        sync.Mutex
	f         func(error)
	settle    func() // forgets what was found fresh: takes the ReadYourWrites' lock only
	remaining int
	finished  bool
	stops     []func() bool
}

// add counts one more condition and returns its slot for keep.
func (n *freshNotice) add() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.remaining++
	n.stops = append(n.stops, nil)
	return len(n.stops) - 1
}

// keep stores how to call off the current registration of a condition, or
// calls it off at once if the notice has finished meanwhile.
func (n *freshNotice) keep(slot int, stop func() bool) {
	n.mu.Lock()
	if !n.finished {
		n.stops[slot] = stop
		n.mu.Unlock()
		return
	}
	n.mu.Unlock()
	stop()
}

// done settles one condition: the first error, or the last success, runs f.
func (n *freshNotice) done(err error) {
	n.mu.Lock()
	if n.finished {
		n.mu.Unlock()
		return
	}
	n.remaining--
	if err == nil && n.remaining > 0 {
		n.mu.Unlock()
		return
	}
	n.finished = true
	stops := n.stops
	n.stops = nil
	settle := n.settle
	n.mu.Unlock()
	for _, s := range stops {
		if s != nil {
			s()
		}
	}
	if err == nil && settle != nil {
		settle()
	}
	n.f(err)
}

// stop calls the notice off; true if f will not run.
func (n *freshNotice) stop() bool {
	n.mu.Lock()
	if n.finished {
		n.mu.Unlock()
		return false
	}
	n.finished = true
	stops := n.stops
	n.stops = nil
	n.mu.Unlock()
	for _, s := range stops {
		if s != nil {
			s()
		}
	}
	return true
}

// whenGone settles slot of n once the cache shows the delete d (see
// waitDeleted): at the delete's resource version if the cache is behind
// it, then after each next step of the informer while the object is held.
// Its check runs first on the caller's goroutine, then as a tracker
// callback (any goroutine, no lock held); it reads the informer's indexer
// and tracker, registers the next callback, and settles n.
func (f *FreshInformer) whenGone(d deletedObject, owner Owner, n *freshNotice, slot int) {
	var check func(error)
	check = func(err error) {
		if err != nil {
			n.done(fmt.Errorf("%s: delete of %s on behalf of %s: %w", f.describe(), d.key, owner, err))
			return
		}
		// The position before the look: a delete applied after it wakes us.
		cur := f.tracker.Current()
		if !f.holdsAlive(d) {
			n.done(nil)
			return
		}
		target := d.rv
		if target.Compare(cur) <= 0 {
			target = nextRV(cur)
		}
		n.keep(slot, f.tracker.AfterFuncCancelable(target, check))
	}
	check(nil)
}
