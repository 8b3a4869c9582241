package metrics

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/freshinformer/freshinformer/requeue"
)

// DefaultRequeueBuckets returns the buckets that cover how long a key stays
// parked: about a write's visibility latency when healthy, up to the
// parking bound. Each call returns a new slice.
func DefaultRequeueBuckets() []float64 {
	return []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
}

// RequeueMetrics is a requeue.Metrics for Prometheus: the keys parked now
// and how long keys were parked, by outcome (fresh, max_park, failed,
// shutdown), labelled with the queue's name. Make one per Requeuer (names
// distinct) and pass it with requeue.WithMetrics. Safe for concurrent use.
type RequeueMetrics struct {
	parked prometheus.Gauge
	wait   *prometheus.HistogramVec
}

var _ requeue.Metrics = (*RequeueMetrics)(nil)

// NewRequeueMetrics registers the metrics of the Requeuer named name on
// reg:
//
//	freshinformer_requeue_parked_keys{name}
//	freshinformer_requeue_parked_seconds{name,outcome} (histogram)
//
// The _count of outcome="max_park" counts keys added back because the
// bound passed before the caches caught up. Registering two Requeuers of
// one name on one registry is an error.
func NewRequeueMetrics(reg prometheus.Registerer, name string) (*RequeueMetrics, error) {
	m := &RequeueMetrics{
		parked: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: "requeue", Name: "parked_keys",
			Help:        "Workqueue keys parked until the informer caches hold their owner's writes.",
			ConstLabels: prometheus.Labels{"name": name},
		}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "requeue", Name: "parked_seconds",
			Help:        "How long keys stayed parked before going back to the queue, by outcome: fresh (the requeue-when-fresh latency), max_park, failed, shutdown.",
			ConstLabels: prometheus.Labels{"name": name},
			Buckets:     DefaultRequeueBuckets(),
		}, []string{"outcome"}),
	}
	for _, c := range []prometheus.Collector{m.parked, m.wait} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("requeue metrics named %q are already registered on this registry: %w", name, err)
			}
			return nil, fmt.Errorf("registering requeue metrics: %w", err)
		}
	}
	for _, o := range []requeue.Outcome{requeue.OutcomeFresh, requeue.OutcomeMaxPark, requeue.OutcomeFailed, requeue.OutcomeShutDown} {
		m.wait.WithLabelValues(string(o)) // export zeros, so alerts see the series
	}
	return m, nil
}

// SetParked implements requeue.Metrics.
func (m *RequeueMetrics) SetParked(n int) { m.parked.Set(float64(n)) }

// ObserveRequeue implements requeue.Metrics.
func (m *RequeueMetrics) ObserveRequeue(outcome requeue.Outcome, parked time.Duration) {
	m.wait.WithLabelValues(string(outcome)).Observe(parked.Seconds())
}
