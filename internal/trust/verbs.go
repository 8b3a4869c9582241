package trust

import (
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/rvwait"
)

// The verbs below are the Trust's evidence as it was submitted before
// Submit: thin wrappers, kept while the off-stream provers move out of
// package cache and still call them. Remove them once no caller is left;
// new code submits Evidence.

// Advance submits Stream{RV: rv}.
func (t *Trust) Advance(rv freshness.RV) rvwait.Due { due, _ := t.Submit(Stream{RV: rv}); return due }

// Listed submits List{RV: rv, Stamp: st}.
func (t *Trust) Listed(rv freshness.RV, st Stamp) rvwait.Due {
	due, _ := t.Submit(List{RV: rv, Stamp: st})
	return due
}

// ListedAtZero submits List{AtZero: true, Stamp: st}.
func (t *Trust) ListedAtZero(st Stamp) rvwait.Due {
	due, _ := t.Submit(List{AtZero: true, Stamp: st})
	return due
}

// Incomparable submits List{Unordered: err}.
func (t *Trust) Incomparable(err error) rvwait.Due {
	due, _ := t.Submit(List{Unordered: err})
	return due
}

// Proved submits a snapshot proof, Proof{To: rv, Stamp: st}.
func (t *Trust) Proved(rv freshness.RV, st Stamp) (ok bool, due rvwait.Due) {
	due, ok = t.Submit(Proof{To: rv, Stamp: st})
	return ok, due
}

// ProvedGap submits a bookmark proof, Proof{From: lo, To: hi, Stamp: st}.
func (t *Trust) ProvedGap(lo, hi freshness.RV, st Stamp) rvwait.Due {
	due, _ := t.Submit(Proof{From: lo, To: hi, Stamp: st})
	return due
}

// Found submits Regression{Step: Found, Rewritten: rewritten}.
func (t *Trust) Found(rewritten bool) rvwait.Due {
	due, _ := t.Submit(Regression{Step: Found, Rewritten: rewritten})
	return due
}

// Declared submits Regression{Step: Declared, N: n}.
func (t *Trust) Declared(n int) rvwait.Due {
	due, _ := t.Submit(Regression{Step: Declared, N: n})
	return due
}

// Regressed submits Regression{Step: Admitted}.
func (t *Trust) Regressed() { t.Submit(Regression{Step: Admitted}) }

// Restore submits Read{Shows: ReadRestored, Stamp: st}.
func (t *Trust) Restore(st Stamp) (begun bool, due rvwait.Due) {
	due, begun = t.Submit(Read{Shows: ReadRestored, Stamp: st})
	return begun, due
}

// Failed submits Failure{}.
func (t *Trust) Failed() rvwait.Due { due, _ := t.Submit(Failure{}); return due }

// Checking submits Check{}.
func (t *Trust) Checking() { t.Submit(Check{}) }

// CheckDone submits Check{Done: true}.
func (t *Trust) CheckDone() rvwait.Due { due, _ := t.Submit(Check{Done: true}); return due }

// Answered submits Read{Shows: ReadAnswered, Stamp: st}.
func (t *Trust) Answered(st Stamp) rvwait.Due {
	due, _ := t.Submit(Read{Shows: ReadAnswered, Stamp: st})
	return due
}

// TooLarge submits Read{Shows: ReadBehindWaits, Server: server, Seq: seq}.
func (t *Trust) TooLarge(server freshness.RV, seq uint64) rvwait.Due {
	due, _ := t.Submit(Read{Shows: ReadBehindWaits, Server: server, Seq: seq})
	return due
}

// Start submits Run{}.
func (t *Trust) Start() { t.Submit(Run{}) }

// Stop submits Run{Stopped: true}.
func (t *Trust) Stop() rvwait.Due { due, _ := t.Submit(Run{Stopped: true}); return due }

// Owned returns the state and applied without the lock, for the owner
// holding its apply lock (they change only under it).
func (t *Trust) Owned() (State, freshness.RV) { return t.state, t.applied }

// RelistOwned reports, for the owner holding its apply lock while
// Restoring, whether a list requested at st is the restore's relist
// (Taken decides it now).
func (t *Trust) RelistOwned(st Stamp) bool { return st.Epoch >= t.restoreEpoch }
