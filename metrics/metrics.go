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
// # Labels
//
// Every series carries the informer's identity, in five labels, none of
// them a label Prometheus' Kubernetes service discovery or the usual
// relabelling puts on a target (namespace, pod, container, service,
// endpoint, job, instance, node), so no honor_labels is needed and the
// target's namespace and pod stay the controller's:
//
//   - resource: the resource as users write it (schema.GroupResource's
//     String): "configmaps", "deployments.apps";
//   - informer_namespace: the namespace the informer lists, "" for all
//     namespaces (and for cluster-scoped resources);
//   - label_selector, field_selector: the informer's selectors as the API
//     takes them, "" for none;
//   - name: the informer's name (cache.WithName), "" if unnamed.
//
// The identity is the informer's scope and name, nothing else, so a
// series keeps its identity across restarts, whatever the order the
// informers are made in. Two informers of one resource (one per namespace,
// a filtered and an unfiltered one) never share series. Two informers with
// the same identity in one Provider (two factories alike, say) do: they
// report as one, counters and histograms adding up, gauges giving the
// worse of the two (the lower observed resource version, the larger lag
// and staleness, the older progress), pending waiters adding up; the
// series stay until the last of them stops (a counter then drops, which
// Prometheus reads as a reset). Name informers (cache.WithName) to tell
// them apart.
//
// # Metrics
//
// By default an informer exports at most SeriesPerInformer series (about
// 20; docs/metrics.md has the count for 100 namespaces by 5 kinds):
//
//	freshinformer_observed_resource_version          gauge
//	freshinformer_resource_version_lag               gauge
//	freshinformer_staleness_seconds                  gauge (absent until known)
//	freshinformer_last_progress_timestamp_seconds    gauge (Unix time)
//	freshinformer_pending_waiters                    gauge
//	freshinformer_out_of_order_rejected_total        counter
//	freshinformer_stale_lists_refused_total          counter
//	freshinformer_regressions_total                  counter
//	freshinformer_bookmarks_total                    counter
//	freshinformer_lists_total                        counter (relists)
//	freshinformer_watches_total                      counter (watch restarts)
//	freshinformer_waits_total{outcome}               counter
//	freshinformer_wait_duration_seconds              histogram
//	freshinformer_write_to_visible_seconds           histogram
//
// With the stale-read detector on (package stalereads), one more series
// per detecting informer, with its labels, from 0 when it is made, gone
// with it (the count is the informer's own: FreshInformer.StaleReads):
//
//	freshinformer_stale_reads_total                  counter
//
// and one series per resource, labelled with the resource only (a
// transport is not an informer), counting the stale writes of the writes
// transports made with writes.WithStaleWriteCounter(p): from 0 at their
// first recorded write of the resource, or once one of p's informers of
// it detects stale reads, for p's life:
//
//	freshinformer_stale_writes_total{resource}       counter
//
// Each Provider exports only the counts of its own informers and
// transports: two Providers in one process never export the same count.
//
// The histograms have one bucket by default (le="1": what share took more
// than a second; _sum/_count give the mean) and appear at their first
// observation; waits_total has a series per outcome (fresh, timeout,
// canceled, stopped, incomparable) from its first occurrence. So an
// informer whose waits are all fresh and whose writes are recorded
// exports 20 series, and each other outcome that occurs adds one.
// WithDetailedMetrics restores the detailed buckets (DefaultWaitBuckets,
// DefaultWriteVisibleBuckets), exports every outcome from the start, and
// adds freshinformer_incomparable_objects_total.
//
// Progress is a timestamp, so that time() - x is its age whatever the
// scrape interval, and a scrape that stopped does not show an age that
// stopped growing.
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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
)

// Namespace prefixes every metric name.
const Namespace = "freshinformer"

// SeriesPerInformer is the default budget: the series an informer exports
// when its waits are fresh and its writes recorded (see the package
// documentation); each other wait outcome that occurs adds one.
const SeriesPerInformer = 20

// labelNames name an informer's identity; see the package documentation.
func labelNames() []string {
	return []string{"resource", "informer_namespace", "label_selector", "field_selector", "name"}
}

// DefaultWaitBuckets returns the detailed buckets of the wait histogram
// (WithDetailedMetrics): from a fresh cache (0) to the timeouts reconcilers
// use (seconds). Each call returns a new slice.
func DefaultWaitBuckets() []float64 {
	return []float64{0, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
}

// DefaultWriteVisibleBuckets returns the detailed buckets of the
// write-to-visible histogram (WithDetailedMetrics): usually below a
// millisecond or two on a healthy cluster, seconds when a cache lags. Each
// call returns a new slice.
func DefaultWriteVisibleBuckets() []float64 {
	return []float64{0, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
}

// CoarseBuckets returns both histograms' buckets by default: one, at a
// second, which the alert rules use. Every detailed set includes it. Each
// call returns a new slice.
func CoarseBuckets() []float64 { return []float64{1} }

// numOutcomes is how many wait outcomes there are.
const numOutcomes = 5

// waitOutcomes returns the wait outcomes, in the order of
// informerState.waits.
func waitOutcomes() [numOutcomes]cache.WaitOutcome {
	return [numOutcomes]cache.WaitOutcome{cache.WaitFresh, cache.WaitTimeout, cache.WaitCanceled, cache.WaitStopped, cache.WaitIncomparable}
}

// Option sets a field of Options.
type Option func(*Options)

// Options configure a Provider.
type Options struct {
	// WaitBuckets and WriteVisibleBuckets override the histograms' buckets
	// (default CoarseBuckets, or the detailed sets with Detailed). Keep 1
	// among them: the alert rules use le="1".
	WaitBuckets, WriteVisibleBuckets []float64
	// Detailed exports the detailed histograms (DefaultWaitBuckets,
	// DefaultWriteVisibleBuckets unless overridden), every wait outcome
	// from the start, and incomparable_objects_total: about 50 series per
	// informer instead of SeriesPerInformer.
	Detailed bool
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

// Provider is a cache.MetricsProvider and the prometheus.Collector of
// every freshinformer series.
type Provider struct {
	opts Options

	waitDuration *prometheus.HistogramVec
	waits        *prometheus.CounterVec
	writeVisible *prometheus.HistogramVec
	staleWrites  *prometheus.CounterVec // of the transports counting on p
	// discarded takes the waits counted after an informer's identity is
	// gone; never registered.
	discarded prometheus.Counter

	// mu guards informers, identities and the per-informer progress
	// readings. Informer methods are called with it released; it is taken
	// under an informer's write-visible samples lock (ObserveWriteVisible).
	mu        sync.Mutex
	informers map[*cache.FreshInformer]*informerState
	// identities are the label sets in use, by their values joined; alike
	// informers share one.
	identities map[string]*identity
}

var _ cache.MetricsProvider = &Provider{}

// NewProvider makes a Provider and registers it on reg. It returns an error
// (never panics) if reg has freshinformer metrics already: if they are
// another Provider's, the error is a prometheus.AlreadyRegisteredError
// whose ExistingCollector is that *Provider, for callers that share one
// Provider per registry (client_golang's idiom; freshctrl's caches do).
func NewProvider(reg prometheus.Registerer, opts ...Option) (*Provider, error) {
	var o Options
	for _, f := range opts {
		f(&o)
	}
	if o.WaitBuckets == nil {
		o.WaitBuckets = CoarseBuckets()
		if o.Detailed {
			o.WaitBuckets = DefaultWaitBuckets()
		}
	}
	if o.WriteVisibleBuckets == nil {
		o.WriteVisibleBuckets = CoarseBuckets()
		if o.Detailed {
			o.WriteVisibleBuckets = DefaultWriteVisibleBuckets()
		}
	}
	if o.LagProbeTimeout <= 0 {
		o.LagProbeTimeout = 2 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	p := &Provider{
		discarded: prometheus.NewCounter(prometheus.CounterOpts{Name: "discarded"}),
		opts:      o,
		waitDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "wait_duration_seconds",
			Help:    "How long WaitForFreshness calls blocked; 0 when the cache was already fresh.",
			Buckets: o.WaitBuckets,
		}, labelNames()),
		waits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "waits_total",
			Help: "WaitForFreshness calls by outcome: fresh, timeout, canceled, stopped, incomparable.",
		}, append(labelNames(), "outcome")),
		writeVisible: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "write_to_visible_seconds",
			Help:    "Time from a recorded write's response (RecordWrite) until the cache reached its resource version.",
			Buckets: o.WriteVisibleBuckets,
		}, labelNames()),
		staleWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "stale_writes_total",
			Help: "Updates and patches sent through a writes transport whose resourceVersion was older than this process's own last write of the object, found by the stale-write detector (transports made with writes.WithStaleWriteCounter).",
		}, []string{"resource"}),
		informers:  map[*cache.FreshInformer]*informerState{},
		identities: map[string]*identity{},
	}
	if err := reg.Register(p); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return nil, fmt.Errorf("freshinformer metrics are already registered on this registry (make one Provider per registry and share it): %w", err)
		}
		return nil, fmt.Errorf("registering freshinformer metrics: %w", err)
	}
	return p, nil
}

// NewDefaultProvider is NewProvider on client_golang's default registry.
func NewDefaultProvider(opts ...Option) (*Provider, error) {
	return NewProvider(prometheus.DefaultRegisterer, opts...)
}

// WithLagProbe turns the lag probe on (see Options.LagProbeInterval).
func WithLagProbe(interval time.Duration) Option {
	return func(o *Options) { o.LagProbeInterval = interval }
}

// AddStaleWrites counts n stale writes of gr found by a writes transport's
// detector (writes.StaleWriteCounter: give the transport
// writes.WithStaleWriteCounter(p)); n = 0 makes the series, at 0.
func (p *Provider) AddStaleWrites(gr schema.GroupResource, n int) {
	p.staleWrites.WithLabelValues(gr.String()).Add(float64(n))
}

// WithDetailedMetrics exports the detailed histograms and counters (see
// Options.Detailed).
func WithDetailedMetrics() Option {
	return func(o *Options) { o.Detailed = true }
}

// identity is one label set and the informers reporting under it. Its
// hot-path children are made at their first use (all at once with
// Detailed), under provider.mu, and never once the last informer stopped,
// so a late observation cannot bring a deleted series back.
type identity struct {
	labels   []string
	key      string
	provider *Provider
	members  []*informerState // guarded by provider.mu
	gone     bool             // the last member stopped; guarded by provider.mu

	waitDuration atomic.Pointer[prometheus.Observer]
	writeVisible atomic.Pointer[prometheus.Observer]
	waits        [numOutcomes]atomic.Pointer[prometheus.Counter]
}

// discard receives observations after the identity is gone.
type discard struct{}

func (discard) Observe(float64) {}

// observer returns the child in ptr, making it from vec the first time.
func (id *identity) observer(ptr *atomic.Pointer[prometheus.Observer], vec *prometheus.HistogramVec) prometheus.Observer {
	if o := ptr.Load(); o != nil {
		return *o
	}
	p := id.provider
	p.mu.Lock()
	defer p.mu.Unlock()
	return id.observerLocked(ptr, vec)
}

func (id *identity) observerLocked(ptr *atomic.Pointer[prometheus.Observer], vec *prometheus.HistogramVec) prometheus.Observer {
	if o := ptr.Load(); o != nil {
		return *o
	}
	if id.gone {
		return discard{}
	}
	o := vec.WithLabelValues(id.labels...)
	ptr.Store(&o)
	return o
}

// counter returns the waits_total child of outcome i, making it the first
// time.
func (id *identity) counter(i int) prometheus.Counter {
	if c := id.waits[i].Load(); c != nil {
		return *c
	}
	p := id.provider
	p.mu.Lock()
	defer p.mu.Unlock()
	return id.counterLocked(i)
}

func (id *identity) counterLocked(i int) prometheus.Counter {
	if c := id.waits[i].Load(); c != nil {
		return *c
	}
	if id.gone {
		return id.provider.discarded
	}
	var c prometheus.Counter = id.provider.waits.WithLabelValues(append(append([]string(nil), id.labels...), string(waitOutcomes()[i]))...)
	id.waits[i].Store(&c)
	return c
}

// informerState is one informer's scrape-time memory.
type informerState struct {
	inf *cache.FreshInformer
	id  *identity

	// Scrape-time state, guarded by provider.mu.
	lastRV          string
	lastProgressSum uint64 // bookmarks + lists at the last scrape
	lastProgress    time.Time
	probedRV        string
	probedAt        time.Time
}

// Identity returns the label values (resource, informer_namespace,
// label_selector, field_selector, name) an informer's series carry in p:
// its scope and its name. It is "", "" ... for an informer p does not
// report.
func (p *Provider) Identity(inf *cache.FreshInformer) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.informers[inf]; ok {
		return append([]string(nil), s.id.labels...)
	}
	return make([]string, len(labelNames()))
}

// identityLabels returns inf's label values: its scope and name only, so
// they do not depend on which informers exist or the order they came in.
func identityLabels(inf *cache.FreshInformer) []string {
	sel := inf.Selector()
	return []string{inf.Resource().String(), sel.Namespace, sel.LabelSelector(), sel.FieldSelector(), inf.Name()}
}

// InformerMetrics implements cache.MetricsProvider.
func (p *Provider) InformerMetrics(inf *cache.FreshInformer) cache.InformerMetrics {
	lv := identityLabels(inf)
	key := strings.Join(lv, "\x00")
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.identities[key]
	if id == nil {
		id = &identity{labels: lv, key: key, provider: p}
		p.identities[key] = id
		if p.opts.Detailed {
			id.observerLocked(&id.waitDuration, p.waitDuration)
			id.observerLocked(&id.writeVisible, p.writeVisible)
			for i := range numOutcomes {
				id.counterLocked(i)
			}
		}
	}
	s := &informerState{inf: inf, id: id, lastProgress: p.opts.Clock.Now()}
	id.members = append(id.members, s)
	p.informers[inf] = s
	return s
}

func outcomeIndex(o cache.WaitOutcome) int {
	for i, x := range waitOutcomes() {
		if x == o {
			return i
		}
	}
	return numOutcomes - 1 // unknown: cannot be ordered
}

func (s *informerState) ObserveWait(outcome cache.WaitOutcome, waited time.Duration) {
	s.id.counter(outcomeIndex(outcome)).Inc()
	s.id.observer(&s.id.waitDuration, s.id.provider.waitDuration).Observe(waited.Seconds())
}

func (s *informerState) ObserveWriteVisible(latency time.Duration) {
	s.id.observer(&s.id.writeVisible, s.id.provider.writeVisible).Observe(latency.Seconds())
}

// Stopped leaves the informer's identity; the last one out drops the
// series: a stopped informer has no lag.
func (s *informerState) Stopped() {
	id, p := s.id, s.id.provider
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.informers, s.inf)
	for i, m := range id.members {
		if m == s {
			id.members = append(id.members[:i], id.members[i+1:]...)
			break
		}
	}
	if len(id.members) > 0 || id.gone {
		return
	}
	id.gone = true
	delete(p.identities, id.key)
	p.waitDuration.DeleteLabelValues(id.labels...)
	p.writeVisible.DeleteLabelValues(id.labels...)
	for _, o := range waitOutcomes() {
		p.waits.DeleteLabelValues(append(append([]string(nil), id.labels...), string(o))...)
	}
}

var (
	observedRVDesc   = prometheus.NewDesc(Namespace+"_observed_resource_version", "Highest resource version the cache has applied (float64: exact up to 2^53).", labelNames(), nil)
	lagDesc          = prometheus.NewDesc(Namespace+"_resource_version_lag", "Newest resource version known from the server (stream, recorded writes, optional probe) minus the observed one.", labelNames(), nil)
	progressDesc     = prometheus.NewDesc(Namespace+"_last_progress_timestamp_seconds", "Unix time the cache last made progress (its resource version moved, or a bookmark or list arrived), as seen at scrapes; time() minus it is the age.", labelNames(), nil)
	pendingDesc      = prometheus.NewDesc(Namespace+"_pending_waiters", "WaitForFreshness calls blocked now.", labelNames(), nil)
	outOfOrderDesc   = prometheus.NewDesc(Namespace+"_out_of_order_rejected_total", "Updates and deletes older than the cached object, rejected.", labelNames(), nil)
	incomparableDesc = prometheus.NewDesc(Namespace+"_incomparable_objects_total", "Events whose resource version could not be ordered, passed through unguarded.", labelNames(), nil)
	staleListsDesc   = prometheus.NewDesc(Namespace+"_stale_lists_refused_total", "Lists older than the cache, refused.", labelNames(), nil)
	regressionsDesc  = prometheus.NewDesc(Namespace+"_regressions_total", "Older lists accepted as declared regressions (etcd restored from a backup?).", labelNames(), nil)
	bookmarksDesc    = prometheus.NewDesc(Namespace+"_bookmarks_total", "Watch bookmarks applied.", labelNames(), nil)
	listsDesc        = prometheus.NewDesc(Namespace+"_lists_total", "Lists (initial list and relists, plain or watch-list) accepted into the cache.", labelNames(), nil)
	watchesDesc      = prometheus.NewDesc(Namespace+"_watches_total", "Watch requests: the first and every restart.", labelNames(), nil)
	// Only informers whose stale-read detector is on have this series.
	staleReadsDesc = prometheus.NewDesc(Namespace+"_stale_reads_total", "Reads through the informer (indexer, listers, controller-runtime's cached client) that returned older state than this process's own write of the key, found by the stale-read detector.", labelNames(), nil)
	stalenessDesc  = prometheus.NewDesc(Namespace+"_staleness_seconds", "Upper bound on how old the cache's view is: seconds since the newest moment the cache is known to have held everything the server had committed (from consistent lists, Sync, probes and recorded writes; see FreshInformer.Staleness). Absent until such a moment is known.", labelNames(), nil)
)

// Describe sends the descriptions of every series the Provider exports
// (prometheus.Collector).
func (p *Provider) Describe(ch chan<- *prometheus.Desc) {
	p.waitDuration.Describe(ch)
	p.waits.Describe(ch)
	p.writeVisible.Describe(ch)
	p.staleWrites.Describe(ch)
	for _, d := range []*prometheus.Desc{observedRVDesc, lagDesc, progressDesc, pendingDesc, outOfOrderDesc, staleListsDesc, regressionsDesc, bookmarksDesc, listsDesc, watchesDesc, stalenessDesc, staleReadsDesc} {
		ch <- d
	}
	if p.opts.Detailed {
		ch <- incomparableDesc
	}
}

// Collect sends the wait and write histograms and counters, and reads the
// informers' own state (prometheus.Collector).
func (p *Provider) Collect(ch chan<- prometheus.Metric) {
	p.waitDuration.Collect(ch)
	p.waits.Collect(ch)
	p.writeVisible.Collect(ch)
	p.mu.Lock()
	ids := make([]*identity, 0, len(p.identities))
	members := make([][]*informerState, 0, len(p.identities))
	for _, id := range p.identities {
		ids = append(ids, id)
		members = append(members, append([]*informerState(nil), id.members...))
	}
	p.mu.Unlock()
	for i, id := range ids {
		for _, s := range members[i] {
			if _, on := s.inf.StaleReads(); on {
				// The resource's stale writes show, at 0, beside its
				// stale reads, for the alert and the dashboard to add up.
				p.staleWrites.WithLabelValues(id.labels[0])
				break
			}
		}
	}
	p.staleWrites.Collect(ch)
	now := p.opts.Clock.Now()
	for i, id := range ids {
		p.collect(ch, id.labels, members[i], now)
	}
}

// reading is one informer's values at a scrape.
type reading struct {
	observed     freshness.RV
	hasObserved  bool
	lag          float64
	progress     time.Time
	staleness    time.Duration
	hasStaleness bool
	stats        cache.Stats
	staleReads   uint64
	detecting    bool // the stale-read detector is on
}

func (p *Provider) read(s *informerState, now time.Time) reading {
	inf := s.inf
	r := reading{stats: inf.Stats()}
	r.staleReads, r.detecting = inf.StaleReads()
	observed := inf.LastObservedResourceVersion()
	probed := p.probe(s, now)

	p.mu.Lock()
	if sum := r.stats.Bookmarks + r.stats.Lists; observed != s.lastRV || sum != s.lastProgressSum {
		s.lastRV, s.lastProgressSum, s.lastProgress = observed, sum, now
	}
	r.progress = s.lastProgress
	p.mu.Unlock()

	if rv, err := freshness.ParseRV(observed); err == nil {
		r.observed, r.hasObserved = rv, true
		newest, _ := freshness.ParseRV(inf.NewestKnownResourceVersion())
		if pr, err := freshness.ParseRV(probed); err == nil && pr.Compare(newest) > 0 {
			newest = pr
		}
		r.lag = lag(newest, rv)
	}
	r.staleness, r.hasStaleness = inf.Staleness()
	return r
}

// merge folds an alike informer's reading r into agg: the worse of the
// gauges, the sum of the counters.
func (agg *reading) merge(r reading) {
	if r.hasObserved && (!agg.hasObserved || r.observed.Compare(agg.observed) < 0) {
		agg.observed, agg.hasObserved = r.observed, true
	}
	agg.lag = max(agg.lag, r.lag)
	if r.progress.Before(agg.progress) {
		agg.progress = r.progress
	}
	if r.hasStaleness && (!agg.hasStaleness || r.staleness > agg.staleness) {
		agg.staleness, agg.hasStaleness = r.staleness, true
	}
	a, b := &agg.stats, r.stats
	a.PendingWaiters += b.PendingWaiters
	a.OutOfOrderRejected += b.OutOfOrderRejected
	a.IncomparableObjects += b.IncomparableObjects
	a.StaleListsRefused += b.StaleListsRefused
	a.Regressions += b.Regressions
	a.Bookmarks += b.Bookmarks
	a.Lists += b.Lists
	a.Watches += b.Watches
	agg.staleReads += r.staleReads
	agg.detecting = agg.detecting || r.detecting
}

// collect sends the scrape-time series of one identity: its informer's,
// or the worse (gauges) and the sum (counters) of alike informers'.
func (p *Provider) collect(ch chan<- prometheus.Metric, lv []string, members []*informerState, now time.Time) {
	if len(members) == 0 {
		return
	}
	var agg reading
	for i, s := range members {
		r := p.read(s, now)
		if i == 0 {
			agg = r
			continue
		}
		agg.merge(r)
	}

	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), lv...)
	}
	if agg.hasObserved {
		gauge(observedRVDesc, rvFloat(agg.observed))
		gauge(lagDesc, agg.lag)
	}
	gauge(progressDesc, float64(agg.progress.UnixNano())/1e9)
	if agg.hasStaleness {
		gauge(stalenessDesc, agg.staleness.Seconds())
	}
	st := agg.stats
	gauge(pendingDesc, float64(st.PendingWaiters))
	counter(outOfOrderDesc, st.OutOfOrderRejected)
	if p.opts.Detailed {
		counter(incomparableDesc, st.IncomparableObjects)
	}
	counter(staleListsDesc, st.StaleListsRefused)
	counter(regressionsDesc, st.Regressions)
	counter(bookmarksDesc, st.Bookmarks)
	counter(listsDesc, st.Lists)
	counter(watchesDesc, st.Watches)
	if agg.detecting {
		counter(staleReadsDesc, agg.staleReads)
	}
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
	got, err := s.inf.ServerResourceVersion(ctx)
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
