// Package trust is an informer's knowledge of its own freshness, and the
// one place that decides when a wait for a resource version returns
// (package cache's documentation, "When a wait returns", draws it).
// Everything that can move the applied position or put it in doubt
// submits its evidence to a Trust through one method, Submit, as one of
// eight kinds (evidence.go): Stream, List, Proof, Read, Regression,
// Failure, Check and Run. Evidence carries the Stamp of the request it
// came from: a proof from an older epoch, or sent before a failure, is
// void. One function, publishLocked, turns the state into what waits see;
// Taken and Placed are the decisions for what the queue hands on.
package trust

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/rvwait"
)

// Trust is one informer's trust state. Its lock is its waiter set's: it
// guards every field, is taken after the owner's apply lock and the
// Guard's, and before nothing. The callbacks a change releases are
// returned as a Due, for the caller to run once it holds no lock.
//
// The position (applied) and State change only with evidence marked
// "apply lock held", which the owner submits holding its apply lock, so
// that they change only with the indexer: the decisions made for that
// lock's holder (Taken, Placed, Over) read them under it alone.
type Trust struct {
	// StartGrace is how long a wait on an informer not started waits for
	// it before failing with freshness.ErrNotStarted (Run evidence). Set
	// before use.
	StartGrace time.Duration

	waits rvwait.Set[freshness.RV]

	// started: Run began, or is about to (Run evidence); begun is closed then.
	started atomic.Bool
	begun   chan struct{}
	// askedAt is when a wait or check first found the informer not
	// started: a check reports it never started once StartGrace has
	// passed since.
	askedAt time.Time

	state   State
	applied freshness.RV // the indexer holds every event up to it
	// shown is what the informer reports as its position: applied, but
	// not going back before the regression that moves it back is declared.
	shown freshness.RV
	// proven is the newest position a proof reached in this epoch; the
	// Guard's floor is at least it.
	proven freshness.RV
	// epoch counts regressions found and lists admitted below the floor:
	// a proof from an older epoch speaks of a history since rewritten.
	epoch        uint64
	restoreEpoch uint64 // the epoch a declared restore began
	// failures counts failed requests and broken streams; outage is set by
	// each, and cleared by a list requested, or a restore check sent,
	// after the last one. outageAbove, while an outage began with streams
	// that only ended early and no request failed since, is the floor the
	// last one ended at: the resumed stream applying past it ends the
	// outage too (Failure).
	failures    uint64
	outage      bool
	outageAbove freshness.RV
	checks      int   // restore checks in flight
	declaring   int   // regressions found, not yet declared
	gaps        []gap // bookmark proofs waiting for applied to reach their lo
	plainErr    error // why resource versions cannot be ordered (Plain)
	stopped     bool
	advances    uint64 // proofs that moved applied
	// beyond is a consistent read that showed the server behind some
	// waits' targets (TooLarge), for the next publish to fail them.
	beyond *serverRead
}

// serverRead is a consistent read's resource version, and the waits'
// joins (rvwait.Set.SeqLocked) when it was sent.
type serverRead struct {
	rv  freshness.RV
	seq uint64
}

// State is what the informer knows of its position.
type State uint8

const (
	// Syncing: no position yet. Before the first list, or after a list at
	// "0" (a fake source): the first comparable event or bookmark starts
	// one.
	Syncing State = iota
	// Trusted: applied is the position; waits are released up to it
	// unless something puts it in doubt (an outage, a restore check, a
	// regression being declared).
	Trusted
	// Restoring: a restore was declared; the position is forgotten until
	// its relist is applied, and what was queued before is dropped.
	Restoring
	// Plain: the server's resource versions cannot be ordered; every wait
	// fails until a comparable list.
	Plain
)

// gap is a bookmark proof of this epoch: the stream holds no event in
// (lo, hi].
type gap struct{ lo, hi freshness.RV }

// Stamp is when a request was sent, as a Trust counts: the epoch and the
// failures seen by then.
type Stamp struct{ Epoch, Failures uint64 }

// publishLocked is the one place that moves what waits see.
func (t *Trust) publishLocked() rvwait.Due {
	if t.stopped {
		return t.waits.StopLocked(freshness.ErrStopped)
	}
	if t.declaring == 0 || t.applied.Compare(t.shown) > 0 {
		t.shown = t.applied
	}
	beyond := t.beyond
	t.beyond = nil
	if t.state == Plain {
		return t.waits.FailLocked(t.plainErr)
	}
	due := t.waits.PublishLocked(t.applied, t.openLocked())
	if beyond != nil {
		due = append(due, t.waits.FailAboveLocked(beyond.rv, beyond.seq, func(target freshness.RV) error {
			return &freshness.TooLargeResourceVersionError{ResourceVersion: target.String(), ServerResourceVersion: beyond.rv.String()}
		})...)
	}
	return due
}

// openLocked reports whether waits may be released up to applied.
func (t *Trust) openLocked() bool {
	return t.state == Trusted && !t.outage && t.checks == 0 && t.declaring == 0
}

// Submit is the one way evidence enters: it applies e under the lock,
// then publishes what waits see (publishLocked). It returns the callbacks
// the change released, for the caller to run once it holds no lock, and
// whether the evidence counted (each kind says what that means). After
// Stop, nothing counts.
func (t *Trust) Submit(e Evidence) (due rvwait.Due, taken bool) {
	t.waits.Lock()
	defer t.waits.Unlock()
	if t.stopped {
		return nil, false
	}
	taken = e.apply(t)
	return t.publishLocked(), taken
}

func (t *Trust) read(f func()) {
	t.waits.Lock()
	defer t.waits.Unlock()
	f()
}

func (t *Trust) closeGapsLocked() {
	kept := t.gaps[:0]
	for _, g := range t.gaps {
		if t.applied.Compare(g.lo) >= 0 {
			t.raiseLocked(g.hi)
		} else {
			kept = append(kept, g)
		}
	}
	t.gaps = kept
}

func (t *Trust) raiseLocked(rv freshness.RV) {
	if rv.Compare(t.applied) > 0 {
		t.applied = rv
		t.advances++
	}
	if rv.Compare(t.proven) > 0 {
		t.proven = rv
	}
}

// provesNowLocked reports whether a proof whose request was sent at st
// still speaks for the cache: no regression was found since (the history
// it compared was not rewritten), and no request failed nor stream broke
// since (the server it reached may have restarted from a restored etcd,
// whose history the rest of the proof would come from).
func (t *Trust) provesNowLocked(st Stamp) bool {
	return st.Epoch == t.epoch && st.Failures == t.failures && t.state == Trusted
}

func (t *Trust) newEpochLocked() {
	t.epoch++
	t.proven, t.gaps = freshness.RV{}, nil
}

// --- the decisions for what the queue hands on (apply lock held) -----------

// Take is a Trust's decision for a change taken from the queue (Taken).
type Take uint8

const (
	// Apply the change.
	Apply Take = iota
	// Drop it: a declared restore waits for its relist, and the change
	// is of the history the server lost (an event queued before the
	// relist, or a list requested before the restore was declared).
	// Applied, it would show handlers states the relist takes back.
	Drop
	// Relist: apply the list; it is the declared restore's relist. If it
	// is not applied after all, the owner asks for another.
	Relist
)

// Taken decides, for the owner holding its apply lock, what becomes of a
// change taken from the queue: a list (requested with st) or an event.
func (t *Trust) Taken(list bool, st Stamp) Take {
	switch {
	case t.state != Restoring:
		return Apply
	case list && st.Epoch >= t.restoreEpoch:
		return Relist
	default:
		return Drop
	}
}

// Place is where an event stands against the stream (Placed).
type Place int8

const (
	// Unplaced: there is no position to order it against (not trusted),
	// or its resource version is malformed.
	Unplaced Place = iota
	// Ahead of the stream: newer than anything it delivered.
	Ahead
	// At the stream's position: a duplicate, or (for a key not cached) a
	// replay, every event having a resource version of its own.
	At
	// Behind the stream: out of order, a stream's resource versions only
	// growing.
	Behind
)

// Placed orders an event at rv against the stream's position, for the
// owner holding its apply lock: applied, or stream when a snapshot proof
// moved applied past what the stream delivered (nonzero then). It also
// returns the position it compared with (for the log).
func (t *Trust) Placed(rv freshness.RV, rvErr error, stream freshness.RV) (Place, freshness.RV) {
	if rvErr != nil || t.state != Trusted {
		return Unplaced, t.applied
	}
	against := t.applied
	if !stream.IsZero() {
		against = stream
	}
	switch c := against.Compare(rv); {
	case c > 0:
		return Behind, against
	case c == 0:
		return At, against
	default:
		return Ahead, against
	}
}

// Over is the position a list is compared with, for the owner holding its
// apply lock: applied while trusted; none (zero) when starting over
// (syncing, plain, restoring).
func (t *Trust) Over() freshness.RV {
	if t.state == Trusted {
		return t.applied
	}
	return freshness.RV{}
}

// --- reads ------------------------------------------------------------------

// Stamp returns the stamp of a request sent now, for its evidence.
func (t *Trust) Stamp() (st Stamp) {
	t.read(func() { st = Stamp{Epoch: t.epoch, Failures: t.failures} })
	return st
}

// Floor decides where a Guard's requests must start and its lists must
// reach, given delivered, the newest resource version its queue handed
// on: the newer of that and the position proofs reached in this epoch;
// none while a declared restore waits for its relist (restoring: the next
// list is a consistent read, accepted whatever its resource version).
func (t *Trust) Floor(delivered freshness.RV) (floor freshness.RV, restoring bool) {
	t.read(func() {
		if restoring = t.state == Restoring; !restoring {
			floor = t.floorLocked(delivered)
		}
	})
	return floor, restoring
}

// floorLocked is the floor: what the stream delivered, or a proof above it.
func (t *Trust) floorLocked(delivered freshness.RV) freshness.RV {
	if t.proven.Compare(delivered) > 0 {
		return t.proven
	}
	return delivered
}

// View is a Trust at one moment.
type View struct {
	State          State
	Applied, Shown freshness.RV // Shown: what the informer reports
	Stamp          Stamp        // of a request sent now
	Seq            uint64       // the waits' joins so far (TooLarge)
	// Held: waits are held, as no position is trusted or something puts
	// it in doubt; Outage is one such thing.
	Held, Outage bool
	Proven       freshness.RV // the newest position a proof reached in this epoch
	Lowest       freshness.RV // the lowest pending target (of a wait or a callback)
	AnyTarget    bool         // some target is pending
	Pending      int          // callers blocked in a wait
	Advances     uint64       // proofs that moved applied
}

// View returns the Trust as it is now.
func (t *Trust) View() (v View) {
	t.read(func() {
		v = View{State: t.state, Applied: t.applied, Shown: t.shown, Stamp: Stamp{Epoch: t.epoch, Failures: t.failures},
			Seq: t.waits.SeqLocked(), Held: !t.openLocked(), Outage: t.outage, Proven: t.proven,
			Pending: t.waits.PendingLocked(), Advances: t.advances}
		v.Lowest, v.AnyTarget = t.waits.LowestLocked()
	})
	return v
}

// Reached reports whether a wait for target would return nil now; one
// atomic load when it would (rvwait's generic ReachedFast is not inlined:
// here the compiler sees freshness.RV's methods).
func (t *Trust) Reached(target freshness.RV) bool {
	if n, fits := target.Uint64(); target.IsZero() || fits && t.waits.Fast() >= n {
		return true
	}
	var r bool
	t.read(func() { r = t.waits.ReachedLocked(target) })
	return r
}

// Wait blocks until target is reached as published, ctx ends, or waits
// fail; its errors are *freshness.WaitError. Before the informer starts,
// it waits for the start first (awaitStart).
//
// Its frame is kept small (the start's wait is out of line): a waiter's
// goroutine that outgrows its first stack copies it, which 10 000 waiters
// woken at once pay for together.
func (t *Trust) Wait(ctx context.Context, target freshness.RV) error {
	if !t.started.Load() {
		return t.waitStartThen(ctx, target)
	}
	return t.waits.Wait(ctx, target, waitError)
}

func waitError(target, current freshness.RV, waited time.Duration, cause error) error {
	return &freshness.WaitError{Target: target.String(), Current: current.String(), Waited: waited, Err: cause}
}

// waitStartThen is Wait on an informer whose Run has not begun: its
// errors count the time waited for the start.
func (t *Trust) waitStartThen(ctx context.Context, target freshness.RV) error {
	start := time.Now()
	err := t.awaitStart(ctx)
	before := time.Since(start)
	if err != nil {
		return &freshness.WaitError{Target: target.String(), Waited: before, Err: err}
	}
	return t.waits.Wait(ctx, target, func(target, current freshness.RV, waited time.Duration, cause error) error {
		return waitError(target, current, before+waited, cause)
	})
}

// --- the start ----------------------------------------------------------------

// Started reports whether the informer's Run began, or a factory's Start
// is about to run it (Run evidence).
func (t *Trust) Started() bool { return t.started.Load() }

// awaitStart is the one decision for a wait on an informer not started:
// nobody can see a `go inf.Run(ctx)` that has not run yet, so the wait
// gives it StartGrace. It returns nil once Run evidence is submitted,
// freshness.ErrNotStarted once the grace has passed without it, and, if
// ctx ends first, an error matching both ctx's error and
// freshness.ErrNotStarted.
func (t *Trust) awaitStart(ctx context.Context) error {
	var begun chan struct{}
	t.read(func() {
		if t.started.Load() {
			return
		}
		if t.begun == nil {
			t.begun = make(chan struct{})
		}
		if t.askedAt.IsZero() {
			t.askedAt = time.Now()
		}
		begun = t.begun
	})
	if begun == nil {
		return nil
	}
	if ctx.Err() != nil { // before the timer: a done ctx says so at once
		return notStartedBy(ctx.Err())
	}
	timer := time.NewTimer(t.StartGrace) // real time: it waits for a goroutine, not for the informer's clock
	defer timer.Stop()
	select {
	case <-begun:
		return nil
	case <-ctx.Done():
		return notStartedBy(ctx.Err())
	case <-timer.C:
		if t.started.Load() {
			return nil
		}
		return freshness.ErrNotStarted
	}
}

// notStartedBy is the error of a wait whose context ended before the
// informer started.
func notStartedBy(ctxErr error) error {
	return fmt.Errorf("%w (%w)", ctxErr, freshness.ErrNotStarted)
}

// NotStarted is the check's side of awaitStart: a *freshness.WaitError
// for target matching freshness.ErrNotStarted once StartGrace has passed
// since a wait or check first found the informer not started; nil before
// (a check then says ErrNotFresh) and once it started.
func (t *Trust) NotStarted(target string) error {
	if t.started.Load() {
		return nil
	}
	var never bool
	t.read(func() {
		if t.started.Load() {
			return
		}
		now := time.Now()
		if t.askedAt.IsZero() {
			t.askedAt = now
		}
		never = now.Sub(t.askedAt) >= t.StartGrace
	})
	if !never {
		return nil
	}
	return &freshness.WaitError{Target: target, Err: freshness.ErrNotStarted}
}

// Check is Wait without waiting: nil if target is reached as published,
// else a *freshness.WaitError whose cause is why a wait could not begin
// (stopped, incomparable) or freshness.ErrNotFresh.
func (t *Trust) Check(target freshness.RV) error {
	if t.waits.ReachedFast(target) {
		return nil
	}
	// A context that ended before the wait begins: Wait answers at once.
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	return t.waits.Wait(ended, target, func(target, current freshness.RV, _ time.Duration, cause error) error {
		if cause == context.Canceled { // ended's: nothing else stood in the way
			cause = freshness.ErrNotFresh
		}
		return &freshness.WaitError{Target: target.String(), Current: current.String(), Err: cause}
	})
}

// AfterFunc registers fn for target as Wait would end; the Due holds fn
// when it is to run at once. Before the informer starts, fn is called
// with Wait's error if the informer does not start within StartGrace.
func (t *Trust) AfterFunc(target freshness.RV, fn func(error)) (stop func() bool, due rvwait.Due) {
	var starting bool
	t.read(func() {
		stop, due = t.waits.AfterFuncLocked(target, fn)
		if starting = !t.started.Load() && due == nil; starting && t.askedAt.IsZero() {
			t.askedAt = time.Now()
		}
	})
	if starting {
		time.AfterFunc(t.StartGrace, func() { // real time, as awaitStart's
			if !t.started.Load() && stop() {
				fn(&freshness.WaitError{Target: target.String(), Waited: t.StartGrace, Err: freshness.ErrNotStarted})
			}
		})
	}
	return stop, due
}

// Owned returns the state and applied without the lock, for the owner
// holding its apply lock (they change only under it).
func (t *Trust) Owned() (State, freshness.RV) { return t.state, t.applied }
