package freshness

// Suspend puts the tracker's RV in question: until the matching Resume, no
// Wait returns nil, no AfterFunc callback runs with nil and Reached reports
// false, even for targets the tracker has reached. Advance and Reset still
// move the RV; the waiters they reach are released at Resume. Suspensions
// nest.
//
// It is for a cache that must check something before its RV can be trusted
// again: a probe asking whether the server went back in time, or a
// regression that must be declared before the waiters its list reaches are
// told "fresh". Stop and SetIncomparable release waiters with their errors
// as usual.
func (t *Tracker) Suspend() {
	t.mu.Lock()
	t.suspended++
	t.fast.Store(0)
	t.mu.Unlock()
}

// Resume ends a Suspend. The last one releases every waiter the current RV
// reaches, and the fast path of Wait works again.
func (t *Tracker) Resume() {
	t.mu.Lock()
	if t.suspended == 0 {
		t.mu.Unlock()
		panic("freshness: Resume without Suspend")
	}
	t.suspended--
	if t.suspended == 0 && t.incomparable == nil && !t.stopped {
		t.set(t.cur)
	}
	t.unlockAndRun()
}

// reachedLocked reports whether target counts as reached now: the RV is at
// or past it and not in question. t.mu is held.
func (t *Tracker) reachedLocked(target RV) bool {
	return t.suspended == 0 && t.cur.AtLeast(target)
}
