// Package metrics exports FreshInformer metrics for Prometheus: how far each
// cache is behind, how long reconcilers wait for freshness, and when the
// guards act. Make a Provider on a prometheus.Registerer and hand it to
// informers with cache.WithMetrics:
//
//	provider, err := metrics.NewProvider(registry)
//	informer := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, nil, cache.WithMetrics(provider))
//
// With controller-runtime, register on its registry
// (sigs.k8s.io/controller-runtime/pkg/metrics.Registry) to serve the
// metrics on the manager's endpoint.
//
// Every series carries the informer's identity, in five labels:
//
//   - resource: "group/resource" ("/configmaps", "apps/deployments");
//   - namespace: the namespace the informer lists, "" for all namespaces
//     (and for cluster-scoped resources);
//   - label_selector, field_selector: the informer's selectors as the API
//     takes them, "" for none;
//   - name: the informer's name (cache.WithName), "" if unnamed.
//
// So two informers of one resource (one per namespace, a filtered and an
// unfiltered one) never share series. Two informers with the same resource,
// scope and name in one Provider (two factories alike, say) would: the
// Provider makes the later one's name unique by appending "#2", "#3", ... in
// the order they are made (and frees the name when the informer stops), so
// a scrape never fails with duplicate series. Name informers to keep the
// series stable across restarts.
//
// Label values are bounded by the process's informers, never an object or
// a resource version. Counters and resource versions are read from the
// informers when scraped, so the per-event path pays nothing.
//
// Resource versions are exported as float64 gauges: exact up to 2^53
// (about 9e15, far beyond what an etcd revision reaches); larger values are
// rounded to the nearest float64, and the lag is computed exactly in integers
// before conversion.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
)

// Namespace prefixes every metric name.
const Namespace = "freshinformer"

// labels name an informer's identity; see the package documentation.
var labels = []string{"resource", "namespace", "label_selector", "field_selector", "name"}

// DefaultWaitBuckets cover WaitForFreshness from a fresh cache (0) to the
// timeouts reconcilers use (seconds).
var DefaultWaitBuckets = []float64{0, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// DefaultWriteVisibleBuckets cover write-to-visible latency: usually below
// a millisecond or two on a healthy cluster, seconds when a cache lags.
var DefaultWriteVisibleBuckets = []float64{0, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Options configure a Provider.
type Options struct {
	// WaitBuckets and WriteVisibleBuckets override the histograms' buckets.
	WaitBuckets, WriteVisibleBuckets []float64
	// LagProbeInterval, if positive, lets a scrape ask the server for its
	// current resource version (a consistent list with limit=1, through the
	// informer's ListerWatcher) at most once per interval per informer, so
	// the lag gauge sees writes made by others. Off by default: it costs
	// the server a quorum read.
	LagProbeInterval time.Duration
	// LagProbeTimeout bounds one probe (default 2s).
	LagProbeTimeout time.Duration
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
}

// Provider is a cache.MetricsProvider and a prometheus.Collector.
type Provider struct {
	opts Options

	waitDuration *prometheus.HistogramVec
	waits        *prometheus.CounterVec
	writeVisible *prometheus.HistogramVec

	mu        sync.Mutex
	informers map[*cache.FreshInformer]*informerState
	// identities are the label values in use, joined, so that no two
	// informers share series.
	identities map[string]*cache.FreshInformer
}

var _ cache.MetricsProvider = &Provider{}

// NewProvider makes a Provider and registers its collectors on reg. It
// returns an error (never panics) if they are registered there already.
func NewProvider(reg prometheus.Registerer, opts ...func(*Options)) (*Provider, error) {
	var o Options
	for _, f := range opts {
		f(&o)
	}
	if o.WaitBuckets == nil {
		o.WaitBuckets = DefaultWaitBuckets
	}
	if o.WriteVisibleBuckets == nil {
		o.WriteVisibleBuckets = DefaultWriteVisibleBuckets
	}
	if o.LagProbeTimeout <= 0 {
		o.LagProbeTimeout = 2 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	p := &Provider{
		opts: o,
		waitDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "wait_duration_seconds",
			Help:    "How long WaitForFreshness calls blocked; 0 when the cache was already fresh.",
			Buckets: o.WaitBuckets,
		}, labels),
		waits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "waits_total",
			Help: "WaitForFreshness calls by outcome: fresh, timeout, canceled, stopped, incomparable.",
		}, append(labels, "outcome")),
		writeVisible: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "write_to_visible_seconds",
			Help:    "Time from a recorded write's response (RecordWrite) until the cache reached its resource version.",
			Buckets: o.WriteVisibleBuckets,
		}, labels),
		informers:  map[*cache.FreshInformer]*informerState{},
		identities: map[string]*cache.FreshInformer{},
	}
	for _, c := range []prometheus.Collector{p.waitDuration, p.waits, p.writeVisible, (*scrapeCollector)(p)} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("freshinformer metrics are already registered on this registry (make one Provider per registry and share it): %w", err)
			}
			return nil, fmt.Errorf("registering freshinformer metrics: %w", err)
		}
	}
	return p, nil
}

// NewDefaultProvider is NewProvider on client_golang's default registry.
func NewDefaultProvider(opts ...func(*Options)) (*Provider, error) {
	return NewProvider(prometheus.DefaultRegisterer, opts...)
}

// WithLagProbe turns the lag probe on (see Options.LagProbeInterval).
func WithLagProbe(interval time.Duration) func(*Options) {
	return func(o *Options) { o.LagProbeInterval = interval }
}

// informerState is one informer's hot-path children and scrape-time memory.
type informerState struct {
	inf          *cache.FreshInformer
	labels       []string
	waitDuration prometheus.Observer
	waits        map[cache.WaitOutcome]prometheus.Counter
	writeVisible prometheus.Observer
	provider     *Provider

	// Scrape-time state, guarded by provider.mu.
	lastRV          string
	lastProgressSum uint64 // bookmarks + lists at the last scrape
	lastProgress    time.Time
	probedRV        string
	probedAt        time.Time
}

// Identity returns the label values (resource, namespace, label_selector,
// field_selector, name) an informer's series carry in p: its scope and its
// name, made unique within p. It is "", "" ... for an informer p does not
// report.
func (p *Provider) Identity(inf *cache.FreshInformer) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.informers[inf]; ok {
		return append([]string(nil), s.labels...)
	}
	return make([]string, len(labels))
}

// identity returns inf's label values, claimed in p.identities. p.mu is held.
func (p *Provider) identity(inf *cache.FreshInformer) []string {
	gr, sel := inf.Resource(), inf.Selector()
	lv := []string{gr.Group + "/" + gr.Resource, sel.Namespace, sel.LabelSelector(), sel.FieldSelector(), inf.Name()}
	name := inf.Name()
	for n := 2; ; n++ {
		key := strings.Join(lv, "\x00")
		if other, taken := p.identities[key]; !taken || other == inf {
			p.identities[key] = inf
			return lv
		}
		lv[len(lv)-1] = name + "#" + strconv.Itoa(n)
	}
}

// InformerMetrics implements cache.MetricsProvider.
func (p *Provider) InformerMetrics(inf *cache.FreshInformer) cache.InformerMetrics {
	p.mu.Lock()
	lv := p.identity(inf)
	p.mu.Unlock()
	s := &informerState{
		inf:          inf,
		labels:       lv,
		waitDuration: p.waitDuration.WithLabelValues(lv...),
		writeVisible: p.writeVisible.WithLabelValues(lv...),
		waits:        map[cache.WaitOutcome]prometheus.Counter{},
		provider:     p,
		lastProgress: p.opts.Clock.Now(),
	}
	for _, o := range []cache.WaitOutcome{cache.WaitFresh, cache.WaitTimeout, cache.WaitCanceled, cache.WaitStopped, cache.WaitIncomparable} {
		s.waits[o] = p.waits.WithLabelValues(append(lv, string(o))...)
	}
	p.mu.Lock()
	p.informers[inf] = s
	p.mu.Unlock()
	return s
}

func (s *informerState) ObserveWait(outcome cache.WaitOutcome, waited time.Duration) {
	s.waits[outcome].Inc()
	s.waitDuration.Observe(waited.Seconds())
}

func (s *informerState) ObserveWriteVisible(latency time.Duration) {
	s.writeVisible.Observe(latency.Seconds())
}

// Stopped drops the informer's series: a stopped informer has no lag.
func (s *informerState) Stopped() {
	p := s.provider
	p.mu.Lock()
	delete(p.informers, s.inf)
	delete(p.identities, strings.Join(s.labels, "\x00"))
	p.mu.Unlock()
	p.waitDuration.DeleteLabelValues(s.labels...)
	p.writeVisible.DeleteLabelValues(s.labels...)
	for o := range s.waits {
		p.waits.DeleteLabelValues(append(s.labels, string(o))...)
	}
}

// scrapeCollector collects the metrics read from informers at scrape time.
type scrapeCollector Provider

func desc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
}

var (
	observedRVDesc   = desc("observed_resource_version", "Highest resource version the cache has applied (float64: exact up to 2^53).")
	lagDesc          = desc("resource_version_lag", "Newest resource version known from the server (stream, recorded writes, optional probe) minus the observed one.")
	progressAgeDesc  = desc("last_progress_age_seconds", "Seconds since the cache last made progress (its resource version moved, or a bookmark or list arrived), as seen at scrapes.")
	pendingDesc      = desc("pending_waiters", "WaitForFreshness calls blocked now.")
	outOfOrderDesc   = desc("out_of_order_rejected_total", "Updates and deletes older than the cached object, rejected.")
	incomparableDesc = desc("incomparable_objects_total", "Events whose resource version could not be ordered, passed through unguarded.")
	staleListsDesc   = desc("stale_lists_refused_total", "Lists older than the cache, refused.")
	regressionsDesc  = desc("regressions_total", "Older lists accepted as declared regressions (etcd restored from a backup?).")
	bookmarksDesc    = desc("bookmarks_total", "Watch bookmarks applied.")
	listsDesc        = desc("lists_total", "Lists (initial list and relists, plain or watch-list) accepted into the cache.")
	watchesDesc      = desc("watches_total", "Watch requests: the first and every restart.")
	stalenessDesc    = desc("staleness_seconds", "Upper bound on how old the cache's view is: seconds since the newest moment the cache is known to have held everything the server had committed (from consistent lists, Sync, probes and recorded writes; see FreshInformer.Staleness). Absent until such a moment is known.")
)

func (c *scrapeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{observedRVDesc, lagDesc, progressAgeDesc, pendingDesc, outOfOrderDesc, incomparableDesc, staleListsDesc, regressionsDesc, bookmarksDesc, listsDesc, watchesDesc, stalenessDesc} {
		ch <- d
	}
}

func (c *scrapeCollector) Collect(ch chan<- prometheus.Metric) {
	p := (*Provider)(c)
	p.mu.Lock()
	states := make([]*informerState, 0, len(p.informers))
	for _, s := range p.informers {
		states = append(states, s)
	}
	p.mu.Unlock()
	now := p.opts.Clock.Now()
	for _, s := range states {
		p.collect(ch, s, now)
	}
}

func (p *Provider) collect(ch chan<- prometheus.Metric, s *informerState, now time.Time) {
	inf := s.inf
	st := inf.Stats()
	observed := inf.LastObservedResourceVersion()
	probed := p.probe(s, now)

	p.mu.Lock()
	if sum := st.Bookmarks + st.Lists; observed != s.lastRV || sum != s.lastProgressSum {
		s.lastRV, s.lastProgressSum, s.lastProgress = observed, sum, now
	}
	age := now.Sub(s.lastProgress).Seconds()
	p.mu.Unlock()

	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, s.labels...)
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), s.labels...)
	}
	if rv, err := freshness.ParseRV(observed); err == nil {
		gauge(observedRVDesc, rvFloat(rv))
		newest, _ := freshness.ParseRV(inf.NewestKnownResourceVersion())
		if pr, err := freshness.ParseRV(probed); err == nil && pr.Compare(newest) > 0 {
			newest = pr
		}
		gauge(lagDesc, lag(newest, rv))
	}
	gauge(progressAgeDesc, age)
	if s, ok := inf.Staleness(); ok {
		gauge(stalenessDesc, s.Seconds())
	}
	gauge(pendingDesc, float64(st.PendingWaiters))
	counter(outOfOrderDesc, st.OutOfOrderRejected)
	counter(incomparableDesc, st.IncomparableObjects)
	counter(staleListsDesc, st.StaleListsRefused)
	counter(regressionsDesc, st.Regressions)
	counter(bookmarksDesc, st.Bookmarks)
	counter(listsDesc, st.Lists)
	counter(watchesDesc, st.Watches)
}

// probe returns the server's current resource version from the last probe,
// probing first if the interval has passed.
func (p *Provider) probe(s *informerState, now time.Time) string {
	if p.opts.LagProbeInterval <= 0 {
		return ""
	}
	p.mu.Lock()
	due := now.Sub(s.probedAt) >= p.opts.LagProbeInterval
	if due {
		s.probedAt = now // one probe per interval, even if it fails
	}
	rv := s.probedRV
	p.mu.Unlock()
	if !due {
		return rv
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.LagProbeTimeout)
	defer cancel()
	got, err := s.inf.ProbeResourceVersion(ctx)
	if err != nil {
		return rv
	}
	p.mu.Lock()
	s.probedRV = got
	p.mu.Unlock()
	return got
}

// rvFloat converts for a gauge: exact up to 2^53.
func rvFloat(rv freshness.RV) float64 {
	if n, ok := rv.Uint64(); ok {
		return float64(n)
	}
	var f float64
	for _, d := range rv.String() {
		f = f*10 + float64(d-'0')
	}
	return f
}

// lag is newest minus observed, exact in integers when both fit 64 bits,
// never negative.
func lag(newest, observed freshness.RV) float64 {
	if newest.Compare(observed) <= 0 {
		return 0
	}
	n, ok1 := newest.Uint64()
	o, ok2 := observed.Uint64()
	if ok1 && ok2 {
		return float64(n - o)
	}
	return rvFloat(newest) - rvFloat(observed)
}
