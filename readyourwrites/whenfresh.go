package readyourwrites

import (
	"fmt"
	"sync"
)

// WhenFresh arranges for f to be called once every cache owner wrote to
// has caught up with what was recorded for owner so far, with nil (and
// what was recorded is then settled, as CheckFresh does), or once one of
// them cannot catch up, with an error: one matching freshness.ErrStopped
// when its informer stopped, freshness.ErrIncomparable when its stream
// cannot be ordered, cache.ErrNoInformer when an informer written to was
// never started.
//
// Nothing polls and nothing is started per call: f is registered on the
// informers with AfterFreshness and runs on whichever goroutine makes the
// last cache fresh (the one that applies the event or bookmark, or answers
// a probe, once it has dropped the informer's locks), or at once on the
// caller's goroutine when owner has nothing pending or an informer cannot
// catch up. It must be quick and must not block (signal a channel, add to
// a workqueue); no lock of the ReadYourWrites or the informers is held
// when it runs, so it may call them (Record, CheckFresh, WhenFresh). f runs
// at most once.
//
// stop calls f off: it reports true if f will not run, false if f has run
// or is running. It removes every registration, so a caller that gives up
// leaves nothing behind. stop is safe to call more than once and from f.
//
// A delete is fresh once the cache no longer holds the object (by UID) or
// holds it terminating at or past the delete's resource version; while it
// does not, WhenFresh looks again after each step of that informer, as
// EnsureFresh does.
func (r *ReadYourWrites) WhenFresh(owner Owner, f func(error)) (stop func() bool) {
	p := r.pending(owner)
	n := &freshNotice{f: f, remaining: 1, // one for the setup below
		settle: func() { r.settled(owner, p) }}
	for _, inf := range p.informers() {
		if r.removed(inf) {
			continue
		}
		if err := usable(inf); err != nil {
			n.done(err)
			break
		}
		if rv, ok := p.written[inf]; ok {
			slot := n.add()
			gen := n.nextGen(slot)
			n.keep(slot, gen, inf.AfterFreshness(rv.String(), func(err error) {
				if err != nil {
					err = neverStarted(fmt.Errorf("%s: write on behalf of %s: %w", describe(inf), owner, err))
				}
				n.done(err)
			}))
		}
		for _, d := range p.deleted[inf] {
			whenGone(inf, d, n, n.add(), func(err error) error {
				return neverStarted(fmt.Errorf("%s: delete of %s on behalf of %s: %w", describe(inf), d.key, owner, err))
			})
		}
	}
	n.done(nil) // the setup's share
	return n.stop
}

// freshNotice joins the conditions of one WhenFresh call. Its methods run
// on the caller's goroutine and on the freshness callbacks' (any
// goroutine). Its mutex guards the fields below it and orders those
// callers; none of its methods holds it while calling out (stop
// functions, settle, f), so it comes after no other lock and before none.
type freshNotice struct {
	f      func(error)
	settle func() // forgets what was found fresh: takes the ReadYourWrites' lock only

	mu        sync.Mutex
	remaining int
	finished  bool
	stops     []func() bool // per condition, how to call off its current registration
	gens      []uint64      // per condition, the generation of stops' entry
	lastGen   []uint64      // per condition, the newest generation handed out
}

// add counts one more condition and returns its slot.
func (n *freshNotice) add() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.remaining++
	n.stops = append(n.stops, nil)
	n.gens = append(n.gens, 0)
	n.lastGen = append(n.lastGen, 0)
	return len(n.stops) - 1
}

// nextGen returns the generation of a new registration for slot: a
// delete's condition registers again from its own callback, possibly
// before the registration that ran it has returned its stop.
func (n *freshNotice) nextGen(slot int) uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.finished {
		return 0
	}
	n.lastGen[slot]++
	return n.lastGen[slot]
}

// keep stores how to call off slot's registration of generation gen, or
// calls it off at once if the notice has finished meanwhile. A stop older
// than the one stored is of a registration that has fired already: it is
// dropped.
func (n *freshNotice) keep(slot int, gen uint64, stop func() bool) {
	n.mu.Lock()
	if n.finished {
		n.mu.Unlock()
		stop()
		return
	}
	if gen > n.gens[slot] {
		n.stops[slot], n.gens[slot] = stop, gen
	}
	n.mu.Unlock()
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
	n.finished = true // keep and nextGen touch stops no more
	stops := n.stops
	n.mu.Unlock()
	for _, s := range stops {
		if s != nil {
			s()
		}
	}
	if err == nil && n.settle != nil {
		n.settle()
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
	n.finished = true // keep and nextGen touch stops no more
	stops := n.stops
	n.mu.Unlock()
	for _, s := range stops {
		if s != nil {
			s()
		}
	}
	return true
}
