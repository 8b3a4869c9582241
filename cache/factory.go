package cache

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// ErrNoInformer is matched by the error of a factory-level wait for a
// resource the factory has no started informer for.
var ErrNoInformer = errors.New("no started informer for the resource")

// FactoryOption configures a SharedInformerFactory or a
// DynamicSharedInformerFactory, as client-go's SharedInformerOption does.
type FactoryOption func(*factoryOptions)

type factoryOptions struct {
	namespace        string
	tweakListOptions internalinterfaces.TweakListOptionsFunc
	transform        toolscache.TransformFunc
	customResync     map[reflect.Type]time.Duration
	informerOptions  []Option
}

// WithNamespace limits the factory's informers to one namespace.
func WithNamespace(namespace string) FactoryOption {
	return func(o *factoryOptions) { o.namespace = namespace }
}

// WithTweakListOptions changes every list and watch request of the
// factory's informers (label or field selectors, say).
func WithTweakListOptions(tweak internalinterfaces.TweakListOptionsFunc) FactoryOption {
	return func(o *factoryOptions) { o.tweakListOptions = tweak }
}

// WithTransform sets a transform on every informer the factory makes.
func WithTransform(transform toolscache.TransformFunc) FactoryOption {
	return func(o *factoryOptions) { o.transform = transform }
}

// WithCustomResyncConfig sets the resync period of the informers of the
// given objects' types.
func WithCustomResyncConfig(resync map[metav1.Object]time.Duration) FactoryOption {
	return func(o *factoryOptions) {
		for obj, d := range resync {
			o.customResync[reflect.TypeOf(obj)] = d
		}
	}
}

// WithInformerOptions applies informer options (WithMetrics,
// WithAcceptRegressionAfter, ...) to every informer the factory makes.
func WithInformerOptions(opts ...Option) FactoryOption {
	return func(o *factoryOptions) { o.informerOptions = append(o.informerOptions, opts...) }
}

func newFactoryOptions(opts []FactoryOption) factoryOptions {
	o := factoryOptions{customResync: map[reflect.Type]time.Duration{}}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// informerSet is what both factories share: the informers by key, which are
// started, and the goroutines running them.
type informerSet[K comparable] struct {
	mu           sync.Mutex
	informers    map[K]*FreshInformer
	started      map[K]bool
	wg           sync.WaitGroup
	shuttingDown bool
}

func (s *informerSet[K]) getOrMake(key K, build func() *FreshInformer) *FreshInformer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if inf, ok := s.informers[key]; ok {
		return inf
	}
	if s.informers == nil {
		s.informers, s.started = map[K]*FreshInformer{}, map[K]bool{}
	}
	inf := build()
	s.informers[key] = inf
	return inf
}

func (s *informerSet[K]) start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shuttingDown {
		return
	}
	for key, inf := range s.informers {
		if !s.started[key] {
			s.wg.Go(func() { inf.RunWithContext(ctx) })
			s.started[key] = true
		}
	}
}

func (s *informerSet[K]) shutdown() {
	s.mu.Lock()
	s.shuttingDown = true
	s.mu.Unlock()
	s.wg.Wait()
}

// startedInformers returns the informers that have been started.
func (s *informerSet[K]) startedInformers() map[K]*FreshInformer {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[K]*FreshInformer, len(s.started))
	for key := range s.started {
		out[key] = s.informers[key]
	}
	return out
}

func (s *informerSet[K]) waitForCacheSync(ctx context.Context) (map[K]bool, error) {
	infs := s.startedInformers()
	checkers := make([]toolscache.DoneChecker, 0, len(infs))
	for _, inf := range infs {
		checkers = append(checkers, inf.HasSyncedChecker())
	}
	toolscache.WaitFor(ctx, "", checkers...)
	synced := make(map[K]bool, len(infs))
	var err error
	for key, inf := range infs {
		synced[key] = inf.HasSynced()
		if !synced[key] {
			err = context.Cause(ctx)
		}
	}
	return synced, err
}

// SharedInformerFactory is a drop-in for client-go's
// informers.SharedInformerFactory whose informers are *FreshInformer:
// existing code that takes an informers.SharedInformerFactory runs
// unchanged (factory.Core().V1().Pods().Informer(), .Lister(), Start,
// WaitForCacheSync, Shutdown, InformerFor, ForResource), and gains
// WaitForFreshness per resource.
type SharedInformerFactory struct {
	client        kubernetes.Interface
	defaultResync time.Duration
	opts          factoryOptions
	set           informerSet[reflect.Type]
}

var _ informers.SharedInformerFactory = &SharedInformerFactory{}

// NewSharedInformerFactory returns a factory for all namespaces, as
// client-go's function of the same name.
func NewSharedInformerFactory(client kubernetes.Interface, defaultResync time.Duration, opts ...FactoryOption) *SharedInformerFactory {
	return NewSharedInformerFactoryWithOptions(client, defaultResync, opts...)
}

// NewSharedInformerFactoryWithOptions returns a factory configured by opts.
func NewSharedInformerFactoryWithOptions(client kubernetes.Interface, defaultResync time.Duration, opts ...FactoryOption) *SharedInformerFactory {
	return &SharedInformerFactory{client: client, defaultResync: defaultResync, opts: newFactoryOptions(opts)}
}

// InformerFor returns the factory's informer for obj's type, making it if
// needed. newFunc, which client-go's typed accessors pass, would build a
// plain informer: the factory builds a FreshInformer over the same typed
// client instead. Only for a type the clientset cannot list (a type of
// another clientset) does it fall back to newFunc, wrapped with Wrap and
// logged, since that informer's queue is out of reach.
func (f *SharedInformerFactory) InformerFor(obj runtime.Object, newFunc internalinterfaces.NewInformerFunc) toolscache.SharedIndexInformer {
	res, err := resolveTyped(f.client, obj, schema.GroupVersionResource{})
	if err != nil {
		return f.foreign(obj, newFunc, err)
	}
	return f.informerFor(res)
}

func (f *SharedInformerFactory) informerFor(res *typedResource) *FreshInformer {
	return f.set.getOrMake(reflect.PointerTo(res.object), func() *FreshInformer {
		resync, ok := f.opts.customResync[reflect.PointerTo(res.object)]
		if !ok {
			resync = f.defaultResync
		}
		return f.opts.newInformer(res.listerWatcher(f.client, f.opts.namespace, f.opts.tweakListOptions), res.newObject(), res.gvr.GroupResource(), resync)
	})
}

// newInformer makes one of a factory's informers.
func (o *factoryOptions) newInformer(lw toolscache.ListerWatcher, obj runtime.Object, gr schema.GroupResource, resync time.Duration) *FreshInformer {
	opts := append([]Option{WithResource(gr), WithSelector(SelectorOf(o.namespace, o.tweakListOptions))}, o.informerOptions...)
	inf := NewSharedIndexInformer(lw, obj, resync, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}, opts...)
	if o.transform != nil {
		_ = inf.SetTransform(o.transform) // not started: cannot fail
	}
	return inf
}

// foreign handles a type the clientset does not serve.
func (f *SharedInformerFactory) foreign(obj runtime.Object, newFunc internalinterfaces.NewInformerFunc, cause error) toolscache.SharedIndexInformer {
	klog.Background().Error(cause, "FreshInformer factory cannot list this type through its clientset; using a plain informer", "type", fmt.Sprintf("%T", obj))
	return newFunc(f.client, f.defaultResync)
}

// FreshInformerFor returns the factory's informer for obj's type (making
// it if needed), as a *FreshInformer.
func (f *SharedInformerFactory) FreshInformerFor(obj runtime.Object) (*FreshInformer, error) {
	res, err := resolveTyped(f.client, obj, schema.GroupVersionResource{})
	if err != nil {
		return nil, err
	}
	return f.informerFor(res), nil
}

// ForResource returns a generic informer for gvr, a FreshInformer like the
// typed ones (and the same one, if the type's informer exists).
func (f *SharedInformerFactory) ForResource(gvr schema.GroupVersionResource) (informers.GenericInformer, error) {
	res, err := resolveTyped(f.client, nil, gvr)
	if err != nil {
		return nil, fmt.Errorf("no informer for resource %s: %w", gvr, err)
	}
	return genericInformer{informer: f.informerFor(res), resource: gvr.GroupResource()}, nil
}

type genericInformer struct {
	informer *FreshInformer
	resource schema.GroupResource
}

func (g genericInformer) Informer() toolscache.SharedIndexInformer { return g.informer }
func (g genericInformer) Lister() toolscache.GenericLister {
	return toolscache.NewGenericLister(g.informer.GetIndexer(), g.resource)
}

// Start starts every informer made so far that is not running yet.
func (f *SharedInformerFactory) Start(stopCh <-chan struct{}) {
	f.StartWithContext(wait.ContextForChannel(stopCh))
}

// StartWithContext is Start with a context: the informers stop when it ends.
func (f *SharedInformerFactory) StartWithContext(ctx context.Context) { f.set.start(ctx) }

// Shutdown waits for every started informer to stop (after the context or
// channel given to Start ends) and makes later Starts do nothing.
func (f *SharedInformerFactory) Shutdown() { f.set.shutdown() }

// WaitForCacheSync waits for every started informer to sync.
func (f *SharedInformerFactory) WaitForCacheSync(stopCh <-chan struct{}) map[reflect.Type]bool {
	return f.WaitForCacheSyncWithContext(wait.ContextForChannel(stopCh)).Synced
}

// WaitForCacheSyncWithContext waits, without polling, for every started
// informer to sync.
func (f *SharedInformerFactory) WaitForCacheSyncWithContext(ctx context.Context) toolscache.SyncResult {
	synced, err := f.set.waitForCacheSync(ctx)
	return toolscache.SyncResult{Synced: synced, Err: err}
}

// InformerName returns nil: FreshInformers report metrics through
// WithMetrics, not client-go's informer names.
func (f *SharedInformerFactory) InformerName() *toolscache.InformerName { return nil }

// WaitForFreshness waits until the factory's started informer for gvr has
// applied rv. It fails at once, matching ErrNoInformer, if there is none.
func (f *SharedInformerFactory) WaitForFreshness(ctx context.Context, gvr schema.GroupVersionResource, rv string) error {
	return f.WaitForFreshnessAll(ctx, ResourceVersion{Resource: gvr, ResourceVersion: rv})
}

// ResourceVersion is a resource version of one resource.
type ResourceVersion struct {
	Resource        schema.GroupVersionResource
	ResourceVersion string
}

// WaitForFreshnessAll waits, under ctx's one deadline, until every listed
// resource's informer has applied its resource version.
func (f *SharedInformerFactory) WaitForFreshnessAll(ctx context.Context, rvs ...ResourceVersion) error {
	started := f.set.startedInformers()
	return waitAll(ctx, rvs, func(gvr schema.GroupVersionResource) *FreshInformer {
		res, err := resolveTyped(f.client, nil, gvr)
		if err != nil {
			return nil
		}
		return started[reflect.PointerTo(res.object)]
	})
}

// waitAll waits for each resource version in turn: the deadline is ctx's,
// shared, and the waits after the slowest return at once.
func waitAll(ctx context.Context, rvs []ResourceVersion, informerOf func(schema.GroupVersionResource) *FreshInformer) error {
	for _, rv := range rvs {
		inf := informerOf(rv.Resource)
		if inf == nil {
			return fmt.Errorf("%w: %s", ErrNoInformer, rv.Resource)
		}
		if err := inf.WaitForFreshness(ctx, rv.ResourceVersion); err != nil {
			return fmt.Errorf("%s: %w", rv.Resource.GroupResource(), err)
		}
	}
	return nil
}

// AsFreshInformer returns the FreshInformer inside inf: inf itself, or the
// informer wrapped by client-go's typed informers (client-go's generated
// accessors, factory.Core().V1().Pods().Informer(), wrap what the factory
// hands them in a type-safe view that embeds it).
func AsFreshInformer(inf toolscache.SharedInformer) (*FreshInformer, bool) {
	for range 4 { // wrappers do not nest deeply
		if f, ok := inf.(*FreshInformer); ok {
			return f, true
		}
		v := reflect.ValueOf(inf)
		if v.Kind() == reflect.Pointer {
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct {
			return nil, false
		}
		inner, ok := v.Type().FieldByName("SharedIndexInformer")
		if !ok || !inner.Anonymous {
			return nil, false
		}
		inf, ok = v.FieldByIndex(inner.Index).Interface().(toolscache.SharedInformer)
		if !ok {
			return nil, false
		}
	}
	return nil, false
}

// FreshInformerForResource returns the factory's informer for gr, if one
// was made (any version). It makes SharedInformerFactory an InformerSource
// for ReadYourWrites.
func (f *SharedInformerFactory) FreshInformerForResource(gr schema.GroupResource) (*FreshInformer, bool) {
	return f.set.find(func(inf *FreshInformer) bool { return inf.Resource() == gr })
}

// find returns an informer of the set that match accepts.
func (s *informerSet[K]) find(match func(*FreshInformer) bool) (*FreshInformer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, inf := range s.informers {
		if match(inf) {
			return inf, true
		}
	}
	return nil, false
}
