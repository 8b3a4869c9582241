package cache

import (
	"time"

	"github.com/freshinformer/freshinformer/internal/trust"
)

// WaitOutcome says how a WaitForFreshness call ended, for metrics.
type WaitOutcome string

// The outcomes of WaitForFreshness.
const (
	WaitFresh        WaitOutcome = trust.OutcomeFresh        // the cache reached the target
	WaitTimeout      WaitOutcome = trust.OutcomeTimeout      // the context's deadline passed
	WaitCanceled     WaitOutcome = trust.OutcomeCanceled     // the context was cancelled
	WaitStopped      WaitOutcome = trust.OutcomeStopped      // the informer stopped, or never started
	WaitIncomparable WaitOutcome = trust.OutcomeIncomparable // the target or the stream cannot be ordered
	WaitTooLarge     WaitOutcome = trust.OutcomeTooLarge     // a consistent read showed the server behind the target
)

// outcomeOf classifies WaitForFreshness's result (trust.Outcome).
func outcomeOf(err error) WaitOutcome { return WaitOutcome(trust.Outcome(err)) }

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
