package cache

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/freshinformer/freshinformer/freshness"
)

// WaitOutcome says how a WaitForFreshness call ended, for metrics.
type WaitOutcome string

// The outcomes of WaitForFreshness.
const (
	WaitFresh        WaitOutcome = "fresh"        // the cache reached the target
	WaitTimeout      WaitOutcome = "timeout"      // the context's deadline passed
	WaitCanceled     WaitOutcome = "canceled"     // the context was cancelled
	WaitStopped      WaitOutcome = "stopped"      // the informer stopped, or never started
	WaitIncomparable WaitOutcome = "incomparable" // the target or the stream cannot be ordered
	WaitTooLarge     WaitOutcome = "too_large"    // a consistent read showed the server behind the target
)

// outcomeOf classifies WaitForFreshness's result.
func outcomeOf(err error) WaitOutcome {
	switch {
	case err == nil:
		return WaitFresh
	case errors.Is(err, freshness.ErrIncomparable):
		return WaitIncomparable
	case errors.Is(err, freshness.ErrStopped), errors.Is(err, freshness.ErrNotStarted):
		return WaitStopped
	case errors.Is(err, freshness.ErrTooLargeResourceVersion):
		return WaitTooLarge
	case errors.Is(err, context.DeadlineExceeded):
		return WaitTimeout
	}
	return WaitCanceled
}

// MetricsProvider makes the metrics of each informer it is given to with
// WithMetrics. Package metrics implements it for Prometheus.
type MetricsProvider interface {
	// InformerMetrics is called once, when inf is made.
	InformerMetrics(inf *FreshInformer) InformerMetrics
}

// InformerMetrics receives one informer's measurements that happen at a
// moment. Everything else (resource versions, counters, pending waiters) a
// provider reads from the informer when it is scraped, so the per-event
// path pays nothing for metrics. Its methods are called from any
// goroutine, sometimes under a lock of the informer's: they must be quick
// and must not call back into the informer.
type InformerMetrics interface {
	// ObserveWait records a WaitForFreshness call; waited is 0 when the
	// cache was already fresh.
	ObserveWait(outcome WaitOutcome, waited time.Duration)
	// ObserveWriteVisible records how long after RecordWrite the cache
	// reached the write's resource version (0 if it already had). The
	// informer times a bounded number of writes the cache has not reached
	// (the most recent ones), so when it falls far behind, some writes
	// are never observed.
	ObserveWriteVisible(latency time.Duration)
	// Stopped is called once the informer has stopped.
	Stopped()
}

// WithMetrics has the informer report to provider (see package metrics).
func WithMetrics(provider MetricsProvider) Option {
	return func(o *Options) { o.Metrics = provider }
}

// maxPendingWriteSamples bounds the recorded writes an informer times
// until its cache reaches them (writeVisibility).
const maxPendingWriteSamples = 256

// writeVisibility times recorded writes until the cache reaches them, for
// the write-to-visible metric. Its memory is bounded however many writes
// the cache never reaches (an informer never started, or stuck): it keeps
// at most maxPendingWriteSamples writes, one per resource version (the
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
type writeVisibility struct {
	mu      sync.Mutex    // guards pending and armed; taken before the trust's, never under the informer's
	pending []writeSample // ascending resource versions
	armed   bool          // a callback is registered
}

type writeSample struct {
	rv freshness.RV
	at time.Time
}

// record starts timing a write of resource version rv recorded at start;
// it is observed at once if the cache has reached it already.
func (v *writeVisibility) record(f *FreshInformer, rv freshness.RV, start time.Time) {
	v.mu.Lock()
	if f.trust.Reached(rv) {
		v.mu.Unlock()
		f.metrics.ObserveWriteVisible(time.Since(start))
		return
	}
	i, found := slices.BinarySearchFunc(v.pending, rv, func(s writeSample, rv freshness.RV) int { return s.rv.Compare(rv) })
	switch {
	case found: // timed from its first recording
	case len(v.pending) < maxPendingWriteSamples:
		v.pending = slices.Insert(v.pending, i, writeSample{rv: rv, at: start})
	case i > 0: // full: the lowest goes
		copy(v.pending, v.pending[1:i])
		v.pending[i-1] = writeSample{rv: rv, at: start}
	}
	v.armLocked(f)
}

// armLocked registers the callback at the lowest pending write if
// none is registered, and unlocks v.mu.
func (v *writeVisibility) armLocked(f *FreshInformer) {
	if v.armed || len(v.pending) == 0 {
		v.mu.Unlock()
		return
	}
	v.armed = true
	target := v.pending[0].rv
	v.mu.Unlock()
	_, due := f.trust.AfterFunc(target, func(err error) { v.reached(f, err) })
	due.Run()
}

// reached is the callback. It may run on any goroutine: the one that moved
// the applied resource version to the target, once the informer's locks
// are dropped, or RecordWrite's caller, at once, when the target is
// reached already or the informer has stopped or is
// incomparable. No lock is held when it is called; it takes v.mu, reads
// the trust state, registers the next callback and calls
// f.metrics.ObserveWriteVisible under v.mu (a provider's method must be
// quick and must not call back into the informer).
func (v *writeVisibility) reached(f *FreshInformer, err error) {
	now := time.Now()
	v.mu.Lock()
	v.armed = false
	if err != nil { // stopped or incomparable: these writes are not timed
		v.pending = v.pending[:0]
		v.mu.Unlock()
		return
	}
	n := 0
	for n < len(v.pending) && f.trust.Reached(v.pending[n].rv) {
		f.metrics.ObserveWriteVisible(now.Sub(v.pending[n].at))
		n++
	}
	v.pending = slices.Delete(v.pending, 0, n)
	v.armLocked(f)
}

// pendingSamples returns how many writes v times, and whether a
// callback is registered (for tests).
func (v *writeVisibility) pendingSamples() (int, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.pending), v.armed
}
