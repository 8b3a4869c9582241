package freshctrl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	fcache "github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/metrics"
	"github.com/freshinformer/freshinformer/stalereads"
)

// DefaultTimeout bounds how long a read through the client waits for the
// cache when the request's context has no earlier deadline.
const DefaultTimeout = 10 * time.Second

// Options configure NewCache and NewClient. The zero value is what the
// package-level NewCache and NewClient use; to change a setting, use the
// methods of a value in the manager's options:
//
//	o := freshctrl.Options{Timeout: 3 * time.Second}
//	ctrl.Options{NewCache: o.NewCache, NewClient: o.NewClient}
type Options struct {
	// Timeout bounds a read's wait for the cache (default DefaultTimeout).
	// A context deadline that comes earlier wins; WaitTimeout overrides it
	// per request.
	Timeout time.Duration
	// Registerer receives the informers' metrics. Nil means
	// controller-runtime's metrics.Registry, which the manager serves.
	Registerer prometheus.Registerer
	// DisableMetrics turns the metrics off.
	DisableMetrics bool
	// Logger receives the few messages freshctrl logs itself (a feature
	// turned off by the configuration, said once). The zero value means
	// controller-runtime's logger, named "freshctrl".
	Logger logr.Logger
	// DetectStaleReads turns the stale-read detector on for every
	// informer the cache makes (package stalereads; the environment
	// variable FRESHINFORMER_DEBUG=stalereads=1 does too): a read through
	// the cache that returns older state than the client's own earlier
	// write is logged with its stack and counted in
	// freshinformer_stale_reads_total; each informer logs one line when it
	// starts, saying the detector is on. NewClient's reads wait for the
	// client's writes, so such reads are those made without waiting:
	// with client.DisableReadYourWritesConsistency, or through the cache
	// itself (a manager's GetCache, an event handler).
	DetectStaleReads bool
	// OnStaleRead, if set, receives each report (and turns the detector
	// on) in place of the log: reports are then not logged, unless
	// LogStaleReads. It runs on the reading goroutine and must not block.
	OnStaleRead func(stalereads.Report)
	// LogStaleReads logs the reports even with OnStaleRead set.
	LogStaleReads bool
	// NewListerWatcher, if set, makes the ListerWatcher each informer of
	// the cache lists and watches through, in place of its API server's:
	// a test's fake server (package fake's), a recording proxy. It is
	// called once per informer, when the cache makes it, with what the
	// informer caches (Informer is nil then): its kind, resource,
	// representation and the scope controller-runtime asked for.
	NewListerWatcher func(ScopedInformer) toolscache.ListerWatcher
}

func (o Options) logger() logr.Logger {
	if o.Logger.GetSink() != nil {
		return o.Logger
	}
	return crlog.Log.WithName("freshctrl")
}

// NewCache is a controller-runtime cache.NewCacheFunc: the cache
// controller-runtime would make with opts, in which every informer
// (cluster-wide, per namespace, per ByObject selector; typed, unstructured
// and metadata-only) is a freshinformer cache.FreshInformer, named after
// its scope and reporting metrics on controller-runtime's registry.
//
// # cache.Options.NewInformer
//
// A NewInformer hook in opts is honoured: controller-runtime calls it, as
// it would without freshctrl, on the goroutine that first asks for the
// informer (GetInformer, a read, IndexField), while it holds its informer
// map's lock, so the hook must not call back into the cache. The informer
// it returns is the one the cache hands out and reads from.
//
//   - A hook that returns a FreshInformer (built with the ListerWatcher it
//     was given and cache.NewSharedIndexInformer) loses nothing; its name
//     and metrics are whatever its own options say. Writes are routed to
//     it by its own scope (cache.WithSelector): without one, it is taken
//     to see every object of its resource, and a read through it may wait
//     for a write it never sees until its next bookmark or quiet-resource
//     probe proves the write is not in its stream.
//   - Any other informer (a fake in a test, one built elsewhere) is made as
//     fresh as it can be from the outside: when the cache starts (or at
//     once, if it runs already) freshctrl wraps it with cache.Wrap, so
//     reads through NewClient's client still wait for their own writes to
//     reach it. It gives up what only a FreshInformer has: no out-of-order
//     or stale-relist guard, no metrics, no quiet-resource probe (a waiting
//     read wakes at the informer's next event; bookmarks and lists count
//     only when a read starts), no per-key waits (package readyourwrites
//     works on FreshInformers: a read through it waits for the newest
//     write through the client that its scope can see, whatever the key),
//     no waiting for deletes (a read after a Delete may still see the
//     object), and a Requeuer re-queues its requests through the rate
//     limiter instead of exactly when it catches up. An informer whose objects carry no resource versions (a fake
//     clientset's) cannot be waited for: see cache.WrappedInformer.
//     With client-go's AtomicFIFO feature gate off cache.Wrap refuses:
//     the informer is then used as it is and reads do not wait for it
//     (said once in the log).
func NewCache(config *rest.Config, opts crcache.Options) (crcache.Cache, error) {
	return Options{}.NewCache(config, opts)
}

// NewCache is the package-level NewCache with o's settings.
func (o Options) NewCache(config *rest.Config, opts crcache.Options) (crcache.Cache, error) {
	if opts.HTTPClient == nil {
		hc, err := rest.HTTPClientFor(config)
		if err != nil {
			return nil, fmt.Errorf("freshctrl: HTTP client for the cache: %w", err)
		}
		opts.HTTPClient = hc
	}
	if opts.Scheme == nil {
		opts.Scheme = scheme.Scheme
	}
	if opts.Mapper == nil {
		m, err := apiutil.NewDynamicRESTMapper(config, opts.HTTPClient)
		if err != nil {
			return nil, fmt.Errorf("freshctrl: REST mapper for the cache: %w", err)
		}
		opts.Mapper = m
	}
	reg := &registry{scheme: opts.Scheme, mapper: opts.Mapper, timeout: o.Timeout, userHook: opts.NewInformer, newLW: o.NewListerWatcher, log: o.logger(),
		detect: o.DetectStaleReads || o.OnStaleRead != nil, onStale: o.OnStaleRead, logStale: o.LogStaleReads}
	if reg.timeout <= 0 {
		reg.timeout = DefaultTimeout
	}
	if !o.DisableMetrics {
		r := o.Registerer
		if r == nil {
			r = crmetrics.Registry
		}
		p, err := providerFor(r)
		if err != nil {
			return nil, err
		}
		reg.metrics = p
	}
	// The informers' requests go through this client: its transport lets
	// a probe learn each informer's scope without sending anything.
	hc := *opts.HTTPClient
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	hc.Transport = &probeTransport{next: next}
	opts.HTTPClient = &hc
	opts.NewInformer = reg.newInformer
	inner, err := crcache.New(config, opts)
	if err != nil {
		return nil, err
	}
	return &Cache{Cache: inner, reg: reg, failOnMissing: opts.ReaderFailOnMissingInformer}, nil
}

// Cache is the cache NewCache returns: controller-runtime's cache, made of
// FreshInformers. NewClient gives read-your-writes with it as its reader.
//
// It is safe for concurrent use, as controller-runtime's cache is.
type Cache struct {
	crcache.Cache
	reg           *registry
	failOnMissing bool
}

var _ manager.LeaderElectionRunnable = (*Cache)(nil)

// NeedLeaderElection implements manager.LeaderElectionRunnable: like
// controller-runtime's cache, it runs on every replica, leader or not, so
// a cache added with mgr.Add starts and syncs on a standby replica too.
func (c *Cache) NeedLeaderElection() bool { return false }

// Start runs the cache until ctx ends (see controller-runtime's Cache).
func (c *Cache) Start(ctx context.Context) error {
	c.reg.start(ctx)
	return c.Cache.Start(ctx)
}

// RemoveInformer implements controller-runtime's Informers: it removes and
// stops obj's informers (every namespace's), and forgets them: reads stop
// waiting on them and their metric names are free again.
func (c *Cache) RemoveInformer(ctx context.Context, obj client.Object) error {
	if err := c.Cache.RemoveInformer(ctx, obj); err != nil {
		return err
	}
	gvk, err := apiutil.GVKForObject(obj, c.reg.scheme)
	if err != nil {
		return nil // controller-runtime removed nothing either
	}
	c.reg.forget(gvk, representationOf(obj))
	return nil
}

// started reports whether Start was called: before it, reads report
// ErrCacheNotStarted and no informer runs to wait on.
func (c *Cache) started() bool {
	c.reg.mu.RLock()
	defer c.reg.mu.RUnlock()
	return c.reg.ctx != nil
}

// Representation is how a cached resource is read: typed objects,
// unstructured ones, or metadata only. controller-runtime keeps one
// informer per representation.
type Representation string

// The representations.
const (
	Typed        Representation = "typed"
	Unstructured Representation = "unstructured"
	Metadata     Representation = "metadata"
)

func representationOf(obj runtime.Object) Representation {
	switch obj.(type) {
	case runtime.Unstructured:
		return Unstructured
	case *metav1.PartialObjectMetadata, *metav1.PartialObjectMetadataList:
		return Metadata
	}
	return Typed
}

// ScopedInformer is one informer of the cache, with what it caches.
type ScopedInformer struct {
	Informer         *fcache.FreshInformer
	GroupVersionKind schema.GroupVersionKind
	Resource         schema.GroupResource
	Representation   Representation
	Scope            Scope
}

// FreshInformers returns the cache's FreshInformers so far (informers are
// made on first use, as in controller-runtime, and leave with
// RemoveInformer). Informers a cache.Options.NewInformer hook made that
// are not FreshInformers are not among them.
func (c *Cache) FreshInformers() []ScopedInformer {
	c.reg.mu.RLock()
	defer c.reg.mu.RUnlock()
	out := make([]ScopedInformer, 0, len(c.reg.informers))
	for _, e := range c.reg.informers {
		if e.Informer != nil {
			out = append(out, e.ScopedInformer)
		}
	}
	return out
}

// informerEntry is the registry's record of one informer: a FreshInformer
// (ScopedInformer.Informer), or a foreign one from the user's NewInformer
// hook, wrapped once the cache runs.
type informerEntry struct {
	ScopedInformer
	name string // in errors and logs

	foreign toolscache.SharedIndexInformer // nil for a FreshInformer
	wrapped atomic.Pointer[fcache.WrappedInformer]
	stop    context.CancelFunc // ends the wrap; nil until wrapped
}

// freshness is what reads wait on: nil for a foreign informer not (or not
// yet) wrapped, which cannot say what it applied.
func (e *informerEntry) freshness() freshnessView {
	if e.Informer != nil {
		return e.Informer
	}
	if w := e.wrapped.Load(); w != nil {
		return w
	}
	return nil
}

func (e *informerEntry) indexer() toolscache.Indexer {
	if e.Informer != nil {
		return e.Informer.GetIndexer()
	}
	return e.foreign.GetIndexer()
}

// freshnessView is what FreshInformer and WrappedInformer both offer.
type freshnessView interface {
	WaitForFreshness(ctx context.Context, rv string) error
	LastObservedResourceVersion() string
}

// registry records the informers a cache makes. mu guards informers, ctx
// and the foreign entries' stop; the other fields are set before use. It is
// a leaf: nothing is called under it but cache.Wrap (at Start, which calls
// into the wrapped informer only), and the client's ReadYourWrites and
// foreign marks take it, never the other way round.
//
// Bound: one entry per informer the cache holds (per kind, representation
// and namespace or selector of its configuration); RemoveInformer drops
// them.
type registry struct {
	scheme   *runtime.Scheme
	mapper   meta.RESTMapper
	metrics  *metrics.Provider
	timeout  time.Duration
	userHook func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer
	newLW    func(ScopedInformer) toolscache.ListerWatcher
	log      logr.Logger
	detect   bool                    // Options.DetectStaleReads
	onStale  func(stalereads.Report) // Options.OnStaleRead
	logStale bool                    // Options.LogStaleReads

	mu        sync.RWMutex // guards the fields below (lock order: see the type's doc)
	informers []*informerEntry
	ctx       context.Context // Start's, nil before it

	unwrappedOnce sync.Once
}

// newInformer is controller-runtime's NewInformer hook, run on the
// goroutine that first asks for the informer, under controller-runtime's
// informer map lock. It learns the informer's scope by sending one list
// request that probeTransport records and stops, then makes a
// FreshInformer named after that scope (or has the user's hook make one).
func (r *registry) newInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	e := &informerEntry{ScopedInformer: ScopedInformer{Representation: representationOf(obj), Scope: Scope{Unknown: true}}}
	if gvk, err := apiutil.GVKForObject(obj, r.scheme); err == nil {
		e.GroupVersionKind = gvk
		if m, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			e.Resource = m.Resource.GroupResource()
		}
	}
	p := &scopeProbe{}
	_, _ = toolscache.ToListerWatcherWithContext(lw).ListWithContext(withProbe(context.Background(), p), metav1.ListOptions{Limit: 1})
	if p.url != nil {
		if s, gr, ok := scopeFromURL(p.url); ok {
			e.Scope = s
			if e.Resource.Empty() {
				e.Resource = gr
			}
		}
	}
	base := e.Scope.String()
	if e.Representation != Typed {
		base = string(e.Representation) + ":" + base
	}
	e.name = base
	if r.newLW != nil {
		lw = r.newLW(e.ScopedInformer) // the scope is learned: serve it from there
	}
	if r.userHook != nil {
		return r.adopt(e, r.userHook(lw, obj, resync, indexers))
	}
	opts := []fcache.Option{
		fcache.WithResource(e.Resource),
		fcache.WithSelector(e.Scope.Selector()),
	}
	if r.metrics != nil {
		// The metrics' identity is the scope and this name, never a
		// creation order: a second cache of the same scope reports with
		// the first (package metrics).
		opts = append(opts, fcache.WithMetrics(r.metrics))
	}
	opts = append(opts, fcache.WithName(e.name))
	if r.detect {
		opts = append(opts, fcache.WithStaleReadDetection(r.onStale))
	}
	if r.logStale {
		opts = append(opts, fcache.WithStaleReadLogging())
	}
	e.Informer = fcache.NewSharedIndexInformer(lw, obj, resync, indexers, opts...)
	r.mu.Lock()
	r.informers = append(r.informers, e)
	r.mu.Unlock()
	return e.Informer
}

// adopt records the informer the user's hook made and returns it
// unchanged: a FreshInformer as it is, anything else to be wrapped when
// the cache runs.
func (r *registry) adopt(e *informerEntry, inf toolscache.SharedIndexInformer) toolscache.SharedIndexInformer {
	if inf == nil {
		return nil
	}
	if f, ok := fcache.FreshInformerOf(inf); ok {
		e.Informer = f
		if n := f.Name(); n != "" {
			e.name = n
		}
	} else {
		e.foreign = inf
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.informers = append(r.informers, e)
	if e.foreign != nil && r.ctx != nil {
		r.wrapLocked(e)
	}
	return inf
}

// wrapLocked wraps a foreign informer for the running cache; the wrap ends
// with the cache or RemoveInformer. r.mu is held.
func (r *registry) wrapLocked(e *informerEntry) {
	ctx, cancel := context.WithCancel(r.ctx)
	w, err := fcache.Wrap(ctx, e.foreign)
	if err != nil {
		cancel()
		r.unwrappedOnce.Do(func() {
			r.log.Info("informers from cache.Options.NewInformer cannot be wrapped, so reads through freshctrl's client do not wait for them to reflect its writes",
				"informer", fmt.Sprintf("%T", e.foreign), "reason", err.Error())
		})
		return
	}
	e.wrapped.Store(w)
	e.stop = cancel
}

// start records the cache's context and wraps the foreign informers made
// before it.
func (r *registry) start(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx != nil {
		return // controller-runtime reports a second Start
	}
	r.ctx = ctx
	for _, e := range r.informers {
		if e.foreign != nil {
			r.wrapLocked(e)
		}
	}
}

// forget drops the informers of gvk in representation rep (RemoveInformer
// stopped them).
func (r *registry) forget(gvk schema.GroupVersionKind, rep Representation) {
	r.mu.Lock()
	var gone []*informerEntry
	kept := r.informers[:0]
	for _, e := range r.informers {
		if e.GroupVersionKind == gvk && e.Representation == rep {
			gone = append(gone, e)
		} else {
			kept = append(kept, e)
		}
	}
	clear(r.informers[len(kept):])
	r.informers = kept
	r.mu.Unlock()
	for _, e := range gone {
		if e.stop != nil {
			e.stop()
		}
	}
}

// lookup returns the informers of a group-kind in one representation.
func (r *registry) lookup(gk schema.GroupKind, rep Representation) []*informerEntry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []*informerEntry
	for _, e := range r.informers {
		if e.GroupVersionKind.GroupKind() == gk && e.Representation == rep {
			out = append(out, e)
		}
	}
	return out
}

// representations returns the three, in the order writes are recorded.
func representations() [3]Representation { return [3]Representation{Typed, Unstructured, Metadata} }

// informersOf is the registry's FreshInformers of one representation as a
// cache.InformerSource, for that representation's ReadYourWrites.
type informersOf struct {
	reg *registry
	rep Representation
}

// FreshInformersForResource implements cache.InformerSource.
func (s informersOf) FreshInformersForResource(gr schema.GroupResource) []*fcache.FreshInformer {
	s.reg.mu.RLock()
	defer s.reg.mu.RUnlock()
	var out []*fcache.FreshInformer
	for _, e := range s.reg.informers {
		if e.Informer != nil && e.Resource == gr && e.Representation == s.rep {
			out = append(out, e.Informer)
		}
	}
	return out
}

// resourceOf returns the resource of gk's informers; false if the cache
// has none.
func (r *registry) resourceOf(gk schema.GroupKind) (schema.GroupResource, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, e := range r.informers {
		if e.GroupVersionKind.GroupKind() == gk && !e.Resource.Empty() {
			return e.Resource, true
		}
	}
	return schema.GroupResource{}, false
}

// nameOf returns the name the registry knows inf by (its scope, or the
// name its NewInformer hook gave it).
func (r *registry) nameOf(inf *fcache.FreshInformer) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, e := range r.informers {
		if e.Informer == inf {
			return e.name
		}
	}
	return inf.Name()
}

// has reports whether e is still among the registry's informers.
func (r *registry) has(e *informerEntry) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Contains(r.informers, e)
}

// all returns the informers of a group-kind in every representation.
func (r *registry) all(gk schema.GroupKind) []*informerEntry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []*informerEntry
	for _, e := range r.informers {
		if e.GroupVersionKind.GroupKind() == gk {
			out = append(out, e)
		}
	}
	return out
}

// providerFor returns the metrics.Provider registered on r, registering
// one if r has none: every cache of a process on one registry (a manager's
// and a test's) shares it, and the registry is the only record of it.
func providerFor(r prometheus.Registerer) (*metrics.Provider, error) {
	p, err := metrics.NewProvider(r)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(*metrics.Provider); ok {
			return existing, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("freshctrl: %w", err)
	}
	return p, nil
}
