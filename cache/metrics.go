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
