package cache

import (
	"context"
	"errors"
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
	WaitStopped      WaitOutcome = "stopped"      // the informer stopped
	WaitIncomparable WaitOutcome = "incomparable" // the target or the stream cannot be ordered
)

// outcomeOf classifies WaitForFreshness's result.
func outcomeOf(err error) WaitOutcome {
	switch {
	case err == nil:
		return WaitFresh
	case errors.Is(err, freshness.ErrIncomparable):
		return WaitIncomparable
	case errors.Is(err, freshness.ErrStopped):
		return WaitStopped
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
// path pays nothing for metrics.
type InformerMetrics interface {
	// ObserveWait records a WaitForFreshness call; waited is 0 when the
	// cache was already fresh.
	ObserveWait(outcome WaitOutcome, waited time.Duration)
	// ObserveWriteVisible records how long after RecordWrite the cache
	// reached the write's resource version (0 if it already had).
	ObserveWriteVisible(latency time.Duration)
	// Stopped is called once the informer has stopped.
	Stopped()
}

// WithMetrics has the informer report to provider (see package metrics).
func WithMetrics(provider MetricsProvider) Option {
	return func(o *Options) { o.Metrics = provider }
}

// waitObserved is WaitForFreshness with metrics: the fast path costs one
// more atomic load and the observation, no clock read.
func (f *FreshInformer) waitObserved(ctx context.Context, rv string) error {
	target, err := freshness.ParseRV(rv)
	if err != nil {
		f.metrics.ObserveWait(WaitIncomparable, 0)
		return err
	}
	if f.tracker.Reached(target) {
		f.metrics.ObserveWait(WaitFresh, 0)
		return nil
	}
	start := time.Now()
	err = f.waitBounded(ctx, target)
	f.metrics.ObserveWait(outcomeOf(err), time.Since(start))
	return err
}

// RecordWrite tells the informer that a write returned resource version rv
// just now. It makes rv the newest resource version known from the server
// (for the lag metric) if it is, and with metrics on, records how long the
// cache takes to reach it. A write below the cache's resource version that
// the stream never delivered starts a consistent limit=1 probe (one at a
// time; WaitForFreshness callers wait for its answer) that detects a server
// restored to an older revision. It returns an error
// matching freshness.ErrIncomparable for a malformed rv.
func (f *FreshInformer) RecordWrite(rv string) error {
	parsed, err := freshness.ParseRV(rv)
	if err != nil {
		return err
	}
	f.newestMu.Lock()
	if parsed.Compare(f.newestWrite) > 0 {
		f.newestWrite = parsed
	}
	f.newestMu.Unlock()
	f.checkWrite(parsed) // a write below the cache: restored server? (restore.go)
	f.addStalenessSample(f.clock.Now(), parsed)
	if f.metrics != nil {
		start := time.Now()
		f.tracker.AfterFunc(parsed, func(err error) {
			if err == nil {
				f.metrics.ObserveWriteVisible(time.Since(start))
			}
		})
	}
	return nil
}

// ProbeResourceVersion asks the server for the resource's current
// resource version: a consistent list with limit=1 through the informer's
// ListerWatcher (a quorum read: use sparingly).
func (f *FreshInformer) ProbeResourceVersion(ctx context.Context) (string, error) {
	rv, err := f.serverResourceVersion(ctx)
	if err != nil {
		return "", err
	}
	return rv.String(), nil
}

// NewestKnownResourceVersion returns the newest resource version the
// informer knows the server has reached: the newest its stream delivered
// (lists, events, bookmarks, applied or still queued) or a recorded write
// returned. "" before any.
func (f *FreshInformer) NewestKnownResourceVersion() string {
	newest, _ := freshness.ParseRV(f.LastSyncResourceVersion())
	f.newestMu.Lock()
	if f.newestWrite.Compare(newest) > 0 {
		newest = f.newestWrite
	}
	f.newestMu.Unlock()
	if cur := f.tracker.Current(); cur.Compare(newest) > 0 {
		newest = cur
	}
	return newest.String()
}
