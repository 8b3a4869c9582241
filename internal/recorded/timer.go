// Package recorded keeps what an informer knows of the writes its caller
// recorded (cache.RecordWrite, RecordWrittenObject): Timer times them until
// the cache shows them (the write-to-visible metric), Keys remembers the
// keys of those the cache has not reached, so that a list that lost them
// is told apart (a regression, WritesLost).
package recorded

import (
	"slices"
	"sync"
	"time"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/trust"
)

// MaxPending bounds the recorded writes an informer times
// until its cache reaches them (Timer).
const MaxPending = 256

// Timer times recorded writes until the cache reaches them, for the
// write-to-visible metric. Its memory is bounded however many writes
// the cache never reaches (an informer never started, or stuck): it keeps
// at most MaxPending writes, one per resource version (the
// first recording's time), and drops the lowest resource version (the
// write waiting longest) when full, so the samples it loses are those of a
// cache already far behind, which the lag and progress metrics show. It
// has at most one callback registered (AfterFunc) at a time, at the
// lowest pending resource version when registered; when it runs, every
// pending write the cache has reached is observed and the next callback
// goes to the lowest one left. A write recorded below the registered one
// (recorded after a higher one that raced it) is observed when the
// registered one is reached: a little late, never early. Writes pending
// when the informer stops or becomes incomparable are dropped, unobserved.
type Timer struct {
	// mu guards pending and armed; taken before the trust's, never under
	// the informer's. A lock, not a compare-and-swap of an immutable
	// record as probe.Reads has: each recorded write would copy the
	// pending set (up to MaxPending samples, about 12 KiB) while the
	// cache lags.
	mu      sync.Mutex
	pending []writeSample // ascending resource versions
	armed   bool          // a callback is registered
}

type writeSample struct {
	rv freshness.RV
	at time.Time
}

// Record starts timing a write of resource version rv recorded at start,
// until t reaches it; observe gets the time it took (at once if t has
// reached it already).
func (v *Timer) Record(t *trust.Trust, observe func(time.Duration), rv freshness.RV, start time.Time) {
	v.mu.Lock()
	if t.Reached(rv) {
		v.mu.Unlock()
		observe(time.Since(start))
		return
	}
	i, found := slices.BinarySearchFunc(v.pending, rv, func(s writeSample, rv freshness.RV) int { return s.rv.Compare(rv) })
	switch {
	case found: // timed from its first recording
	case len(v.pending) < MaxPending:
		v.pending = slices.Insert(v.pending, i, writeSample{rv: rv, at: start})
	case i > 0: // full: the lowest goes
		copy(v.pending, v.pending[1:i])
		v.pending[i-1] = writeSample{rv: rv, at: start}
	}
	v.armLocked(t, observe)
}

// armLocked registers the callback at the lowest pending write if
// none is registered, and unlocks v.mu.
func (v *Timer) armLocked(t *trust.Trust, observe func(time.Duration)) {
	if v.armed || len(v.pending) == 0 {
		v.mu.Unlock()
		return
	}
	v.armed = true
	target := v.pending[0].rv
	v.mu.Unlock()
	_, due := t.AfterFunc(target, func(err error) { v.reached(t, observe, err) })
	due.Run()
}

// reached is the callback. It may run on any goroutine: the one that moved
// the applied resource version to the target, once the informer's locks
// are dropped, or Record's caller, at once, when the target is reached
// already or the informer has stopped or is incomparable. No lock is held
// when it is called; it takes v.mu, reads the trust state, registers the
// next callback and calls observe under v.mu (a metrics provider's method
// must be quick and must not call back into the informer).
func (v *Timer) reached(t *trust.Trust, observe func(time.Duration), err error) {
	now := time.Now()
	v.mu.Lock()
	v.armed = false
	if err != nil { // stopped or incomparable: these writes are not timed
		v.pending = v.pending[:0]
		v.mu.Unlock()
		return
	}
	n := 0
	for n < len(v.pending) && t.Reached(v.pending[n].rv) {
		observe(now.Sub(v.pending[n].at))
		n++
	}
	v.pending = slices.Delete(v.pending, 0, n)
	v.armLocked(t, observe)
}

// Pending returns how many writes v times, and whether a callback is
// registered.
func (v *Timer) Pending() (int, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.pending), v.armed
}
