package metrics

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/freshinformer/freshinformer/consistency"
	"github.com/freshinformer/freshinformer/internal/resources"
)

// DefaultConsistencyWaitBuckets returns the buckets that cover
// EnsureReady's bounded wait (up to consistency.DefaultMaxWait and a few
// multiples) and how long after a skip the caches caught up. Each call
// returns a new slice.
func DefaultConsistencyWaitBuckets() []float64 {
	return []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5}
}

// ConsistencyMetrics is a consistency.Metrics for Prometheus, labelled
// with the store's name (the controller's: replicaset, job). Make one per
// Store (names distinct) and pass it with consistency.WithMetrics. Safe
// for concurrent use.
type ConsistencyMetrics struct {
	checks     *prometheus.CounterVec
	skips      *prometheus.CounterVec
	wait       prometheus.Histogram
	freshAfter prometheus.Histogram
}

var _ consistency.Metrics = (*ConsistencyMetrics)(nil)

// NewConsistencyMetrics registers the metrics of the consistency store
// named name on reg:
//
//	freshinformer_consistency_checks_total{name,outcome}      ready, waited, skipped, lost, incomparable
//	freshinformer_consistency_skips_total{name,resource}      skipped syncs, by the resource behind
//	freshinformer_consistency_wait_seconds{name}              EnsureReady's waits (histogram)
//	freshinformer_consistency_fresh_after_skip_seconds{name}  from a skip until the caches held the writes (histogram)
//
// Labels are bounded: five outcomes, and the resources the controller
// writes. Registering two stores of one name on one registry is an error.
func NewConsistencyMetrics(reg prometheus.Registerer, name string) (*ConsistencyMetrics, error) {
	labels := prometheus.Labels{"name": name}
	m := &ConsistencyMetrics{
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "consistency", Name: "checks_total",
			Help:        "EnsureReady calls of a consistency store, by outcome: ready, waited (the caches caught up within the bounded wait), skipped, lost (a write an etcd restore lost was dropped), incomparable (failed open).",
			ConstLabels: labels,
		}, []string{"outcome"}),
		skips: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "consistency", Name: "skips_total",
			Help:        "Syncs a consistency store skipped because a cache was still behind the owner's writes after the bounded wait, by the resource behind.",
			ConstLabels: labels,
		}, []string{"resource"}),
		wait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "consistency", Name: "wait_seconds",
			Help:        "How long EnsureReady waited for the caches to hold the owner's writes, when it waited.",
			ConstLabels: labels,
			Buckets:     DefaultConsistencyWaitBuckets(),
		}),
		freshAfter: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "consistency", Name: "fresh_after_skip_seconds",
			Help:        "How long after a skipped sync the caches held the skipped owner's writes.",
			ConstLabels: labels,
			Buckets:     DefaultConsistencyWaitBuckets(),
		}),
	}
	for _, c := range []prometheus.Collector{m.checks, m.skips, m.wait, m.freshAfter} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("consistency metrics named %q are already registered on this registry: %w", name, err)
			}
			return nil, fmt.Errorf("registering consistency metrics: %w", err)
		}
	}
	for _, o := range consistency.Outcomes() {
		m.checks.WithLabelValues(string(o)) // export zeros, so rates and alerts see the series
	}
	return m, nil
}

// ObserveEnsureReady implements consistency.Metrics.
func (m *ConsistencyMetrics) ObserveEnsureReady(outcome consistency.Outcome, waited time.Duration) {
	m.checks.WithLabelValues(string(outcome)).Inc()
	if waited > 0 {
		m.wait.Observe(waited.Seconds())
	}
}

// ObserveSkip implements consistency.Metrics.
func (m *ConsistencyMetrics) ObserveSkip(gr schema.GroupResource) {
	m.skips.WithLabelValues(resources.String(gr)).Inc()
}

// ObserveFreshAfterSkip implements consistency.Metrics.
func (m *ConsistencyMetrics) ObserveFreshAfterSkip(d time.Duration) {
	m.freshAfter.Observe(d.Seconds())
}
