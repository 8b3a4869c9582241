package cache

import (
	"context"
	"time"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/guard"
	"github.com/freshinformer/freshinformer/internal/rvwait"
)

// trust is the informer's knowledge of its own freshness, and publish is
// the one place that decides what waits see (doc.go, "When a wait
// returns", draws it). Everything that can move the applied position or
// put it in doubt submits its evidence here: applied events, bookmarks and
// lists; snapshot and bookmark proofs; failed requests and streams; restore
// checks; regressions found and declared. Evidence carries the stamp of
// the request it came from: a proof from an older epoch is void.
//
// Its lock is the waiter set's: it guards every field below and is taken
// after applyMu (which the apply path, proofs and restores hold, so that
// applied and state change only with the indexer) and Guard.mu, and
// before nothing: callbacks the publish releases are returned as Due, for
// the caller to run once it holds no lock.
type trust struct {
	waits rvwait.Set[freshness.RV]

	state trustState
	// applied is the position the indexer holds every event up to
	// (LastObservedResourceVersion). Written with applyMu held too, so the
	// apply path reads it under applyMu alone.
	applied freshness.RV
	// shown is what LastObservedResourceVersion reports: applied, except
	// that it does not go back while the regression that moves applied
	// back is being declared (publishLocked).
	shown freshness.RV
	// proven is the newest position a snapshot or bookmark proof reached
	// in this epoch; the Guard's floor is at least it.
	proven freshness.RV
	// epoch counts the regressions found: a proof or check whose request
	// was sent in an older epoch speaks of a history since rewritten.
	epoch uint64
	// restoreEpoch is the epoch a declared restore began: its relist is
	// a list requested since.
	restoreEpoch uint64
	// failures counts failed requests and streams the server ended early
	// (an apiserver restarting ends its streams, and may come back from a
	// restored etcd); outage is set by each and cleared by a list
	// requested, or a restore check sent, after the last one.
	failures  uint64
	outage    bool
	checks    int   // restore checks in flight
	declaring int   // regressions found, not yet declared
	gaps      []gap // bookmark proofs waiting for applied to reach their lo
	plainErr  error // why resource versions cannot be ordered (state plain)
	stopped   bool
	advances  uint64 // proofs that moved applied (ProbeStats.Advances)
}

// trustState is what the informer knows of its position.
type trustState uint8

const (
	// syncing: no position yet. Before the first list, or after a list
	// at "0" (a fake source): the first comparable event or bookmark
	// starts one.
	syncing trustState = iota
	// trusted: applied is the position; waits are released up to it
	// unless something puts it in doubt (outage, checks, declaring).
	trusted
	// restoring: a restore was declared; the position is forgotten until
	// its relist is applied, and what the queue holds from before is
	// dropped.
	restoring
	// plain: the server's resource versions cannot be ordered; every wait
	// fails with plainErr until a comparable list.
	plain
)

// gap is a bookmark proof of this epoch: the stream holds no event in
// (lo, hi].
type gap struct{ lo, hi freshness.RV }

// stamp is guard.Stamp: the epoch and failure count when a request was
// sent.
type stamp = guard.Stamp

// publishLocked is the one place that moves what waits see: they are
// released up to applied only while it is trusted and nothing puts it in
// doubt.
func (t *trust) publishLocked() rvwait.Due {
	switch {
	case t.stopped:
		return t.waits.StopLocked(freshness.ErrStopped)
	}
	if t.declaring == 0 || t.applied.Compare(t.shown) > 0 {
		t.shown = t.applied
	}
	if t.state == plain {
		return t.waits.FailLocked(t.plainErr)
	}
	return t.waits.PublishLocked(t.applied, t.openLocked())
}

// openLocked reports whether waits may be released up to applied: it is
// trusted, and nothing puts it in doubt.
func (t *trust) openLocked() bool {
	return t.state == trusted && !t.outage && t.checks == 0 && t.declaring == 0
}

// update runs change under the lock, then publishes.
func (t *trust) update(change func()) rvwait.Due {
	t.waits.Lock()
	defer t.waits.Unlock()
	if t.stopped {
		return nil
	}
	change()
	return t.publishLocked()
}

// read runs f under the lock.
func (t *trust) read(f func()) {
	t.waits.Lock()
	defer t.waits.Unlock()
	f()
}

// --- evidence from the stream (applyMu held) -------------------------------

// advance moves applied to rv, an applied event's or bookmark's, and to
// any bookmark proof that starts at or below it.
func (t *trust) advance(rv freshness.RV) rvwait.Due {
	return t.update(func() {
		switch t.state {
		case syncing: // after a list at "0": the first comparable position
			t.state, t.applied = trusted, rv
		case trusted:
			if rv.Compare(t.applied) > 0 {
				t.applied = rv
			}
		default:
			return
		}
		t.closeGapsLocked()
	})
}

// closeGapsLocked applies the bookmark proofs that applied has reached.
func (t *trust) closeGapsLocked() {
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

// raiseLocked moves applied and proven to rv if it is newer.
func (t *trust) raiseLocked(rv freshness.RV) {
	if rv.Compare(t.applied) > 0 {
		t.applied = rv
		t.advances++
	}
	if rv.Compare(t.proven) > 0 {
		t.proven = rv
	}
}

// listed records an applied list at rv, requested at st: the position
// starts over there (after a list at "0", plain mode or a restore, or
// below applied under a regression) or moves up to it; a list requested
// after the last failure ends an outage, and the relist of a restore ends
// it.
func (t *trust) listed(rv freshness.RV, st stamp) rvwait.Due {
	return t.update(func() {
		t.state, t.applied, t.plainErr = trusted, rv, nil
		if rv.Compare(t.proven) < 0 {
			t.proven = freshness.RV{}
		}
		if st.Failures == t.failures {
			t.outage = false
		}
		t.closeGapsLocked()
	})
}

// listedAtZero records an applied list at "0", which names no position (a
// fake source listing nothing; API servers never list at "0"): waits
// block until the first comparable event or bookmark.
func (t *trust) listedAtZero(st stamp) rvwait.Due {
	return t.update(func() {
		t.state, t.applied, t.proven, t.plainErr = syncing, freshness.RV{}, freshness.RV{}, nil
		if st.Failures == t.failures {
			t.outage = false
		}
	})
}

// incomparable enters plain mode: every wait fails with err. Applied
// stays what the cache last reached in order.
func (t *trust) incomparable(err error) rvwait.Due {
	return t.update(func() {
		t.state, t.plainErr, t.proven, t.gaps = plain, err, freshness.RV{}, nil
		t.outage = false // nothing is told "fresh" anyway
	})
}

// --- evidence off the stream ------------------------------------------------

// proved records a snapshot proof (applyMu held): the cache holds the
// server's state at rv. It reports false if the proof is void (provesNow).
func (t *trust) proved(rv freshness.RV, st stamp) (ok bool, due rvwait.Due) {
	due = t.update(func() {
		if ok = t.provesNowLocked(st); ok {
			t.raiseLocked(rv)
		}
	})
	return ok, due
}

// provedGap records a bookmark proof (applyMu held): the stream holds no
// event in (lo, hi], so once applied reaches lo it may move to hi.
func (t *trust) provedGap(lo, hi freshness.RV, st stamp) rvwait.Due {
	return t.update(func() {
		if !t.provesNowLocked(st) {
			return
		}
		t.gaps = append(t.gaps, gap{lo: lo, hi: hi})
		t.closeGapsLocked()
	})
}

// provesNowLocked reports whether a proof whose request was sent at st
// still speaks for the cache: no regression was found since (the history
// it compared was not rewritten), and no request failed nor stream broke
// since (the server it reached may have restarted, from a restored etcd
// whose history the rest of the proof comes from).
func (t *trust) provesNowLocked(st stamp) bool {
	return st.Epoch == t.epoch && st.Failures == t.failures && t.state == trusted
}

// found records a regression found (applyMu held), to be declared once
// the lock is released (declared): waits are held until then. rewritten
// says the cache's history changed: proofs in flight are void.
func (t *trust) found(rewritten bool) rvwait.Due {
	return t.update(func() {
		if rewritten {
			t.newEpochLocked()
		}
		t.declaring++
	})
}

// declared ends found's holds, once n regressions are declared.
func (t *trust) declared(n int) rvwait.Due {
	return t.update(func() { t.declaring -= n })
}

// regressed records that the Guard admitted a list older than the floor,
// to be declared as it is applied: proofs in flight are void (the floor
// follows the list).
func (t *trust) regressed() {
	t.update(t.newEpochLocked)
}

func (t *trust) newEpochLocked() {
	t.epoch++
	t.proven, t.gaps = freshness.RV{}, nil
}

// restore declares that the server's history went back, shown by a read
// requested at st (applyMu held): the position is forgotten until the
// relist. It reports false if a regression found since voids the read, or
// nothing is trusted to lose.
func (t *trust) restore(st stamp) (begun bool, due rvwait.Due) {
	due = t.update(func() {
		if st.Epoch != t.epoch || t.state != trusted {
			return
		}
		t.newEpochLocked()
		t.state, t.restoreEpoch, t.applied = restoring, t.epoch, freshness.RV{}
		t.declaring++ // declared once applyMu is released, as found's
		begun = true
	})
	return begun, due
}

// failed records a failed request or a stream the server ended early: the
// server may be restarting, and may come back from a restored etcd. No
// wait is told "fresh" until a list or check requested after it answers.
func (t *trust) failed() rvwait.Due {
	return t.update(func() {
		t.failures++
		t.outage = t.state != plain
	})
}

// checking records a restore check starting: waits are held until
// checkDone.
func (t *trust) checking() {
	t.update(func() { t.checks++ })
}

// checkDone ends checking's hold.
func (t *trust) checkDone() rvwait.Due {
	return t.update(func() { t.checks-- })
}

// answered records that a restore check requested at st answered: it ends
// an outage that began before it.
func (t *trust) answered(st stamp) rvwait.Due {
	return t.update(func() {
		if st.Failures == t.failures {
			t.outage = false
		}
	})
}

// tooLarge fails the waits that joined by seq for targets above server, a
// consistent read's resource version sent then: the server has not
// reached them.
func (t *trust) tooLarge(server freshness.RV, seq uint64) rvwait.Due {
	var due rvwait.Due
	t.read(func() {
		if t.state == trusted && !t.stopped {
			due = t.waits.FailAboveLocked(server, seq, func(target freshness.RV) error {
				return &freshness.TooLargeResourceVersionError{ResourceVersion: target.String(), ServerResourceVersion: server.String()}
			})
		}
	})
	return due
}

// stop releases every wait with freshness.ErrStopped, for good.
func (t *trust) stop() rvwait.Due {
	return t.update(func() { t.stopped = true })
}

// --- reads ------------------------------------------------------------------

// trustView is the trust state at one moment (view).
type trustView struct {
	state          trustState
	applied, shown freshness.RV // shown: LastObservedResourceVersion
	stamp          stamp        // of a request sent now
	seq            uint64       // the waits' joins so far (tooLarge)
	// held: waits are held, as no position is trusted or something puts
	// it in doubt; outage is one such thing.
	held, outage bool
	lowest       freshness.RV // the lowest pending target (of a wait or a callback)
	anyTarget    bool         // some target is pending
	pending      int          // callers blocked in a wait
	advances     uint64       // proofs that moved applied
}

func (t *trust) view() (v trustView) {
	t.read(func() {
		v = trustView{state: t.state, applied: t.applied, shown: t.shown, stamp: stamp{Epoch: t.epoch, Failures: t.failures},
			seq: t.waits.SeqLocked(), outage: t.outage, pending: t.waits.PendingLocked(), advances: t.advances}
		v.held = !t.openLocked()
		v.lowest, v.anyTarget = t.waits.LowestLocked()
	})
	return v
}

// reached reports whether a wait for target would return nil now; one
// atomic load when it would.
func (t *trust) reached(target freshness.RV) bool {
	if t.waits.ReachedFast(target) {
		return true
	}
	var r bool
	t.read(func() { r = t.waits.ReachedLocked(target) })
	return r
}

// wait blocks until target is published reached; see WaitForFreshness.
func (t *trust) wait(ctx context.Context, target freshness.RV) error {
	return t.waits.Wait(ctx, target, waitError)
}

// afterFunc is AfterFreshness's callback registration; the Due holds fn
// if it is to run at once.
func (t *trust) afterFunc(target freshness.RV, fn func(error)) (stop func() bool, due rvwait.Due) {
	t.read(func() { stop, due = t.waits.AfterFuncLocked(target, fn) })
	return stop, due
}

func waitError(target, current freshness.RV, waited time.Duration, cause error) error {
	return &freshness.WaitError{Target: target.String(), Current: current.String(), Waited: waited, Err: cause}
}
