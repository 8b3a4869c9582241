package freshctrl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	fcache "github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/metrics"
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
}

// NewCache is a controller-runtime cache.NewCacheFunc: the cache
// controller-runtime would make with opts, in which every informer
// (cluster-wide, per namespace, per ByObject selector; typed, unstructured
// and metadata-only) is a freshinformer cache.FreshInformer, named after
// its scope and reporting metrics on controller-runtime's registry.
func NewCache(config *rest.Config, opts crcache.Options) (crcache.Cache, error) {
	return Options{}.NewCache(config, opts)
}

// NewCache is the package-level NewCache with o's settings.
func (o Options) NewCache(config *rest.Config, opts crcache.Options) (crcache.Cache, error) {
	if opts.NewInformer != nil {
		return nil, errors.New("freshctrl: cache.Options.NewInformer is set, but freshctrl makes the informers itself")
	}
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
	reg := &registry{scheme: opts.Scheme, mapper: opts.Mapper, timeout: o.Timeout}
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
// FreshInformers. NewClient needs it as the manager's cache.
//
// It is safe for concurrent use, as controller-runtime's cache is.
type Cache struct {
	crcache.Cache
	reg           *registry
	failOnMissing bool
}

// Start runs the cache until ctx ends (see controller-runtime's Cache); it
// then frees the informers' metric names for a later cache.
func (c *Cache) Start(ctx context.Context) error {
	defer c.reg.release()
	return c.Cache.Start(ctx)
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

// FreshInformers returns the cache's informers so far (informers are made
// on first use, as in controller-runtime).
func (c *Cache) FreshInformers() []ScopedInformer {
	c.reg.mu.RLock()
	defer c.reg.mu.RUnlock()
	out := make([]ScopedInformer, len(c.reg.informers))
	for i, e := range c.reg.informers {
		out[i] = *e
	}
	return out
}

// registry records the informers a cache makes. mu guards informers and
// names; the other fields are set before use.
type registry struct {
	scheme  *runtime.Scheme
	mapper  meta.RESTMapper
	metrics *provider
	timeout time.Duration

	mu        sync.RWMutex
	informers []*ScopedInformer
	names     []string // metric name keys, freed when the cache stops
}

// newInformer is controller-runtime's NewInformer hook. It learns the
// informer's scope by sending one list request that probeTransport records
// and stops, then makes a FreshInformer named after that scope.
func (r *registry) newInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	e := &ScopedInformer{Representation: representationOf(obj), Scope: Scope{Unknown: true}}
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
	opts := []fcache.Option{
		fcache.WithResource(e.Resource),
		fcache.WithSelector(e.Scope.Selector()),
	}
	name, key := base, ""
	if r.metrics != nil {
		name, key = r.metrics.reserve(e.Resource, base)
		opts = append(opts, fcache.WithMetrics(r.metrics.p))
	}
	opts = append(opts, fcache.WithName(name))
	e.Informer = fcache.NewSharedIndexInformer(lw, obj, resync, indexers, opts...)
	r.mu.Lock()
	r.informers = append(r.informers, e)
	if r.metrics != nil {
		r.names = append(r.names, key)
	}
	r.mu.Unlock()
	return e.Informer
}

// lookup returns the informers of a group-kind in one representation.
func (r *registry) lookup(gk schema.GroupKind, rep Representation) []*ScopedInformer {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []*ScopedInformer
	for _, e := range r.informers {
		if e.GroupVersionKind.GroupKind() == gk && e.Representation == rep {
			out = append(out, e)
		}
	}
	return out
}

// all returns the informers of a group-kind in every representation.
func (r *registry) all(gk schema.GroupKind) []*ScopedInformer {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []*ScopedInformer
	for _, e := range r.informers {
		if e.GroupVersionKind.GroupKind() == gk {
			out = append(out, e)
		}
	}
	return out
}

func (r *registry) release() {
	if r.metrics == nil {
		return
	}
	r.mu.Lock()
	names := r.names
	r.names = nil
	r.mu.Unlock()
	for _, n := range names {
		r.metrics.free(n)
	}
}

// provider is one metrics.Provider per registerer, shared by every cache
// of the process, with the informer names in use on it: two informers of
// one resource never export the same label set, so scrapes never fail on
// duplicates (a second cache of the same scope gets "#2").
type provider struct {
	p *metrics.Provider

	mu    sync.Mutex
	inUse map[string]bool // resource + "\x00" + name
}

var (
	providersMu sync.Mutex
	providers   = map[prometheus.Registerer]*provider{}
)

func providerFor(r prometheus.Registerer) (*provider, error) {
	providersMu.Lock()
	defer providersMu.Unlock()
	if p := providers[r]; p != nil {
		return p, nil
	}
	mp, err := metrics.NewProvider(r)
	if err != nil {
		return nil, fmt.Errorf("freshctrl: %w", err)
	}
	p := &provider{p: mp, inUse: map[string]bool{}}
	providers[r] = p
	return p, nil
}

// reserve returns base, or base#n if that name is taken for gr, and
// reserves it until free is called with the returned key.
func (p *provider) reserve(gr schema.GroupResource, base string) (name, key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	name = base
	for n := 2; p.inUse[gr.String()+"\x00"+name]; n++ {
		name = base + "#" + strconv.Itoa(n)
	}
	key = gr.String() + "\x00" + name
	p.inUse[key] = true
	return name, key
}

func (p *provider) free(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.inUse, key)
}
