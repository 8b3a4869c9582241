package trust

import "github.com/freshinformer/freshinformer/freshness"

// Evidence is what a Trust is told, through Submit: one of eight kinds,
// and no other (the set is closed). Each kind says what it changes; the
// one function that turns the state into what waits see is publishLocked.
//
//	kind        what it is                             what it changes
//	──────────  ─────────────────────────────────────  ─────────────────────────────────
//	Stream      an applied watch event or bookmark     applied moves up (syncing: starts
//	            (apply lock held)                      there); no RV at all: plain; past
//	                                                   where an ended stream left the
//	                                                   floor: ends the outage
//	List        an applied list (apply lock held)      applied is the list's (trusted);
//	                                                   at "0": syncing; not comparable:
//	                                                   plain; ends an outage before it
//	Proof       a snapshot's or a bookmark's proof     applied moves to its end (a gap's:
//	            (apply lock held)                      once applied reaches its start)
//	Read        a consistent read answered: the        answered: ends an outage before it;
//	            server's RV                            behind waits: fails them TooLarge;
//	                                                   restored: restoring (apply lock held)
//	Regression  found, declared, or admitted by the    found: held until declared; a new
//	            Guard below the floor                  epoch voids proofs in flight
//	Failure     a request failed or a stream ended     outage: held until a list or a
//	            early                                  read requested after it answers
//	                                                   (or, for ended streams only, the
//	                                                   stream applies past their floor)
//	Check       a restore check begun or ended         held while one is in flight
//	Run         Run begun (or about to) or returned    waits wait for the start; stopped
//
// Submit's second result, taken, says whether the evidence counted, as
// each kind's documentation defines.
type Evidence interface {
	// apply changes the state under the lock; it reports taken.
	apply(t *Trust) (taken bool)
}

// Stream is an applied watch event's or bookmark's resource version (apply
// lock held): applied moves to RV, and on to the bookmark proofs that
// start at or below it; while syncing (after a list at "0") it is the
// first position. Unordered, set instead of RV, is an event without any
// resource version (a fake clientset's): no position can be ordered, so
// every wait fails with it (plain) until a comparable list. Taken: the
// position moved, or (Unordered) the informer became plain.
type Stream struct {
	RV        freshness.RV
	Unordered error
}

func (e Stream) apply(t *Trust) bool {
	if e.Unordered != nil {
		return t.plainLocked(e.Unordered)
	}
	switch t.state {
	case Syncing: // after a list at "0": the first comparable position
		t.state, t.applied = Trusted, e.RV
	case Trusted:
		if e.RV.Compare(t.applied) <= 0 {
			t.closeGapsLocked()
			return false
		}
		t.applied = e.RV
		if t.outage && !t.outageAbove.IsZero() && e.RV.Compare(t.outageAbove) > 0 {
			t.outage = false // see Failure
		}
	default:
		return false
	}
	t.closeGapsLocked()
	return true
}

// List is an applied list, requested with Stamp (apply lock held): the
// position is the list's RV (it starts over after syncing, plain or a
// restore, follows a declared regression back, or moves up). AtZero is a
// list at "0", which names no position (a fake source; API servers never
// list at "0"): syncing. Unordered is a list whose resource version cannot
// be ordered: plain, every wait failing with it. A list requested after
// the last failure ends an outage. Taken: the list rewrote the cache's
// history (it ended a restore, or is older than applied), or, with
// Unordered, the informer became plain.
type List struct {
	RV        freshness.RV
	AtZero    bool
	Unordered error
	Stamp     Stamp
}

func (e List) apply(t *Trust) (taken bool) {
	if e.Unordered != nil {
		return t.plainLocked(e.Unordered)
	}
	if e.Stamp.Failures == t.failures {
		t.outage = false
	}
	if e.AtZero {
		t.state, t.applied, t.proven, t.plainErr = Syncing, freshness.RV{}, freshness.RV{}, nil
		return false
	}
	taken = t.state == Restoring || (t.state == Trusted && e.RV.Compare(t.applied) < 0)
	t.state, t.applied, t.plainErr = Trusted, e.RV, nil
	if e.RV.Compare(t.proven) < 0 {
		t.proven = freshness.RV{}
	}
	t.closeGapsLocked()
	return taken
}

// plainLocked enters plain mode: every wait fails with err. Applied stays
// what the cache last reached in order. It reports false if the informer
// was plain already (the first cause stays).
func (t *Trust) plainLocked(err error) bool {
	if t.state == Plain {
		return false
	}
	t.state, t.plainErr, t.proven, t.gaps = Plain, err, freshness.RV{}, nil
	t.outage = false // nothing is told "fresh" anyway
	return true
}

// Proof is a proof found off the stream by a read requested with Stamp
// (apply lock held). With From zero, a snapshot proof: the cache holds
// the server's state at To, and applied moves there. Otherwise a bookmark
// proof: the stream holds no event in (From, To], so once applied reaches
// From it moves to To. Taken: the proof is not void (a regression found,
// or a request failed, since it was requested voids it).
type Proof struct {
	From, To freshness.RV
	Stamp    Stamp
}

func (e Proof) apply(t *Trust) bool {
	if !t.provesNowLocked(e.Stamp) {
		return false
	}
	if e.From.IsZero() {
		t.raiseLocked(e.To)
		return true
	}
	t.gaps = append(t.gaps, gap{lo: e.From, hi: e.To})
	t.closeGapsLocked()
	return true
}

// ReadShows is what a consistent read showed (Read).
type ReadShows uint8

const (
	// ReadAnswered: the server answered a restore check; an outage that
	// began before the read was requested ends.
	ReadAnswered ReadShows = iota
	// ReadBehindWaits: the server was at Server when the waits' joins were
	// Seq: waits that joined by then for targets above it fail with
	// freshness.ErrTooLargeResourceVersion at the next publish.
	ReadBehindWaits
	// ReadRestored: the server's history went back (the read answered
	// below the floor, or showed keys back at older states, or writes
	// lost). Apply lock held. The position is forgotten until the relist
	// (restoring), and waits are held until the restore is declared too
	// (Regression{Step: Declared}). Taken: the restore began (not void by
	// a regression found since, and there was a trusted position to lose).
	ReadRestored
)

// Read is a consistent read's answer, requested with Stamp.
type Read struct {
	Shows  ReadShows
	Stamp  Stamp
	Server freshness.RV // ReadBehindWaits: the server's resource version
	Seq    uint64       // ReadBehindWaits: the waits' joins when it was sent (View.Seq)
}

func (e Read) apply(t *Trust) bool {
	switch e.Shows {
	case ReadAnswered:
		if e.Stamp.Failures == t.failures {
			t.outage = false
		}
		return true
	case ReadBehindWaits:
		if t.state != Trusted { // what else stands (a restore, plain) says more
			return false
		}
		t.beyond = &serverRead{rv: e.Server, seq: e.Seq}
		return true
	default: // ReadRestored
		if e.Stamp.Epoch != t.epoch || t.state != Trusted {
			return false
		}
		t.newEpochLocked()
		t.state, t.restoreEpoch, t.applied = Restoring, t.epoch, freshness.RV{}
		t.declaring++
		return true
	}
}

// RegressionStep is what a Regression tells.
type RegressionStep uint8

const (
	// Found: a regression was found (apply lock held), to be declared once
	// that lock is released: waits are held until Declared. Rewritten
	// says the cache's history changed: proofs in flight are void.
	Found RegressionStep = iota
	// Declared: N regressions found (or restores begun) are declared; their
	// holds end.
	Declared
	// Admitted: the Guard admitted a list older than the floor, to be
	// declared as it is applied: proofs in flight are void (the floor
	// follows the list).
	Admitted
)

// Regression is a regression's progress. Taken: always.
type Regression struct {
	Step      RegressionStep
	Rewritten bool // Found
	N         int  // Declared
}

func (e Regression) apply(t *Trust) bool {
	switch e.Step {
	case Found:
		if e.Rewritten {
			t.newEpochLocked()
		}
		t.declaring++
	case Declared:
		t.declaring -= e.N
	default: // Admitted
		t.newEpochLocked()
	}
	return true
}

// Failure is a failed request or a stream ended early: the server may be
// restarting, and may come back from a restored etcd. No wait returns nil
// until a list or restore check requested after it answers (an outage;
// not in plain mode, where no wait returns nil anyway). Delivered, set for
// a stream that only ended early, is the highest RV it delivered: while
// no request failed since, the resumed stream applying past the floor it
// left (Delivered, or a proof above it) ends the outage as well. It shows
// what a consistent read sent once the resumed watch was taken would: the
// server that took it is past the floor (a restored one delivers nothing
// above it until its new writes outrun the floor, which a read cannot
// tell either). Taken: always.
type Failure struct{ Delivered freshness.RV }

func (e Failure) apply(t *Trust) bool {
	t.failures++
	began := !t.outage
	t.outage = t.state != Plain
	if e.Delivered.IsZero() || !began && t.outageAbove.IsZero() {
		t.outageAbove = freshness.RV{} // a request failed: only a list or a read ends it
		return true
	}
	if above := t.floorLocked(e.Delivered); began || above.Compare(t.outageAbove) > 0 {
		t.outageAbove = above
	}
	return true
}

// Check is a restore check begun, or ended (Done), or a relist asked for
// by an event the snapshot zone could not place, or applied: waits are
// held while one is in flight. Taken: always.
type Check struct{ Done bool }

func (e Check) apply(t *Trust) bool {
	if e.Done {
		t.checks--
	} else {
		t.checks++
	}
	return true
}

// Run is the informer's Run beginning (or a factory's Start about to run
// it: waits go on as on a running informer), or, with Stopped, returning:
// every wait not reached fails with freshness.ErrStopped, for good.
// Taken: the informer started or stopped now, not before.
type Run struct{ Stopped bool }

func (e Run) apply(t *Trust) bool {
	if e.Stopped {
		t.stopped = true
		return true
	}
	if t.started.Swap(true) {
		return false
	}
	if t.begun != nil {
		close(t.begun)
	}
	return true
}
