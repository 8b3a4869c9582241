package cache

//go:generate go run ./internal/gengroups -o factory_groups.go

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

// mapper returns the scheme and RESTMapper given with
// WithInformerOptions(WithScheme(...)).
func (o *factoryOptions) mapper() resourceMapper {
	var io Options
	for _, opt := range o.informerOptions {
		opt(&io)
	}
	return io.resourceMapper
}

func newFactoryOptions(opts []FactoryOption) factoryOptions {
	o := factoryOptions{customResync: map[reflect.Type]time.Duration{}}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// informerSet is what both factories share: the informers by key, in the
// order they were made, which are started, and the goroutines running them.
// Entries are FreshInformers, except the plain informers of types a typed
// factory's clientset does not serve.
type informerSet[K comparable] struct {
	mu           sync.Mutex
	informers    map[K]toolscache.SharedIndexInformer
	order        []K // creation order: lookups by resource are deterministic
	started      map[K]bool
	wg           sync.WaitGroup
	shuttingDown bool
}

func (s *informerSet[K]) getOrMake(key K, build func() toolscache.SharedIndexInformer) toolscache.SharedIndexInformer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if inf, ok := s.informers[key]; ok {
		return inf
	}
	if s.informers == nil {
		s.informers, s.started = map[K]toolscache.SharedIndexInformer{}, map[K]bool{}
	}
	inf := build()
	s.informers[key] = inf
	s.order = append(s.order, key)
	return inf
}

func (s *informerSet[K]) start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shuttingDown {
		return
	}
	for _, key := range s.order {
		if !s.started[key] {
			inf := s.informers[key]
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
func (s *informerSet[K]) startedInformers() map[K]toolscache.SharedIndexInformer {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[K]toolscache.SharedIndexInformer, len(s.started))
	for key := range s.started {
		out[key] = s.informers[key]
	}
	return out
}

// startedFresh returns the started informer of key if it is a FreshInformer.
func (s *informerSet[K]) startedFresh(key K) *FreshInformer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started[key] {
		return nil
	}
	f, _ := s.informers[key].(*FreshInformer)
	return f
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

// fresh returns the set's FreshInformers that match accepts, in creation
// order.
func (s *informerSet[K]) fresh(match func(*FreshInformer) bool) []*FreshInformer {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*FreshInformer
	for _, key := range s.order {
		if f, ok := s.informers[key].(*FreshInformer); ok && match(f) {
			out = append(out, f)
		}
	}
	return out
}

// SharedInformerFactory is a drop-in for client-go's
// informers.SharedInformerFactory whose informers are *FreshInformer:
// existing code that takes an informers.SharedInformerFactory runs
// unchanged (factory.Core().V1().Pods().Informer(), .Lister(), Start,
// WaitForCacheSync, Shutdown, InformerFor, ForResource), and gains
// WaitForFreshness per resource.
//
// It is an informers.SharedInformerFactory on every client-go this module
// supports. Its own accessors cover the API groups of the lowest (0.36);
// the groups newer client-go releases add (0.37's Lifecycle()) come from
// an embedded client-go factory, since Go cannot add a method only when a
// newer client-go is built in. Their informers are client-go's, without
// freshness (Start, WaitForCacheSync and Shutdown cover them); for
// FreshInformers of such a group, use the group's own constructor over
// this factory, lifecycle.New(factory, namespace, tweak).
type SharedInformerFactory struct {
	newerGroups

	client        kubernetes.Interface
	defaultResync time.Duration
	opts          factoryOptions
	set           informerSet[reflect.Type]
}

// newerGroups is client-go's own factory interface: embedded, it lends
// SharedInformerFactory the group accessors of client-go releases newer
// than the lowest supported (its own methods shadow the others).
type newerGroups = informers.SharedInformerFactory

var _ informers.SharedInformerFactory = &SharedInformerFactory{}

// NewSharedInformerFactory returns a factory for all namespaces, as
// client-go's function of the same name.
func NewSharedInformerFactory(client kubernetes.Interface, defaultResync time.Duration, opts ...FactoryOption) *SharedInformerFactory {
	return NewSharedInformerFactoryWithOptions(client, defaultResync, opts...)
}

// NewSharedInformerFactoryWithOptions returns a factory configured by opts.
func NewSharedInformerFactoryWithOptions(client kubernetes.Interface, defaultResync time.Duration, opts ...FactoryOption) *SharedInformerFactory {
	o := newFactoryOptions(opts)
	newer := []informers.SharedInformerOption{informers.WithNamespace(o.namespace), informers.WithTweakListOptions(o.tweakListOptions)}
	if o.transform != nil {
		newer = append(newer, informers.WithTransform(o.transform))
	}
	return &SharedInformerFactory{
		newerGroups:   informers.NewSharedInformerFactoryWithOptions(client, defaultResync, newer...),
		client:        client,
		defaultResync: defaultResync,
		opts:          o,
	}
}

// InformerFor returns the factory's informer for obj's type, making it if
// needed, as client-go's factory does: the first call for a type decides.
//
// For a type the clientset serves, the informer is a *FreshInformer over
// the typed client with what newFunc would have built: its namespace, its
// list options (label and field selectors) and its indexers, as
// kube-scheduler's pod informer with a byNode indexer and a field selector
// needs. (The factory learns them by running newFunc's informer once against
// a client that answers nothing; see scope_capture.go.)
//
// For a type the clientset does not serve, it is newFunc's own informer,
// plain: registered, started by Start, waited for by WaitForCacheSync and
// reused, but without freshness.
func (f *SharedInformerFactory) InformerFor(obj runtime.Object, newFunc internalinterfaces.NewInformerFunc) toolscache.SharedIndexInformer {
	key := reflect.TypeOf(obj)
	return f.set.getOrMake(key, func() toolscache.SharedIndexInformer {
		res, err := resolveTyped(f.client, obj, schema.GroupVersionResource{})
		if err != nil {
			klog.Background().V(2).Info("FreshInformer factory cannot list this type through its clientset; registering newFunc's plain informer", "type", typeName(obj), "reason", err.Error())
			inf := newFunc(f.client, f.resync(key))
			if f.opts.transform != nil {
				_ = inf.SetTransform(f.opts.transform) // not started: cannot fail
			}
			return inf
		}
		scope := f.defaultScope(res)
		if newFunc != nil {
			if captured, ok := captureScope(newFunc, f.resync(key)); ok {
				scope = captured
				if !res.namespaced {
					scope.namespace = ""
				}
			}
		}
		return f.newTyped(res, scope)
	})
}

// informerScope is what one informer lists and how it indexes.
type informerScope struct {
	namespace string
	tweak     func(*metav1.ListOptions)
	indexers  toolscache.Indexers
}

// defaultScope is the factory's: its namespace (none for cluster-scoped
// resources), its list options, a namespace index.
func (f *SharedInformerFactory) defaultScope(res *typedResource) informerScope {
	s := informerScope{namespace: f.opts.namespace, tweak: f.opts.tweakListOptions,
		indexers: toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}}
	if !res.namespaced {
		s.namespace = ""
	}
	return s
}

func (f *SharedInformerFactory) resync(key reflect.Type) time.Duration {
	if d, ok := f.opts.customResync[key]; ok {
		return d
	}
	return f.defaultResync
}

// informerFor returns the FreshInformer of res with the factory's scope.
func (f *SharedInformerFactory) informerFor(res *typedResource) (*FreshInformer, error) {
	inf := f.set.getOrMake(reflect.PointerTo(res.object), func() toolscache.SharedIndexInformer {
		return f.newTyped(res, f.defaultScope(res))
	})
	fi, ok := inf.(*FreshInformer)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFreshInformer, resourceString(res.gvr.GroupResource()))
	}
	return fi, nil
}

func (f *SharedInformerFactory) newTyped(res *typedResource, scope informerScope) *FreshInformer {
	lw := res.listerWatcher(f.client, scope.namespace, scope.tweak)
	return f.opts.newInformer(lw, res.newObject(), res.gvr.GroupResource(), f.resync(reflect.PointerTo(res.object)), SelectorOf(scope.namespace, scope.tweak), scope.indexers)
}

// newInformer makes one of a factory's informers.
func (o *factoryOptions) newInformer(lw toolscache.ListerWatcher, obj runtime.Object, gr schema.GroupResource, resync time.Duration, sel Selector, indexers toolscache.Indexers) *FreshInformer {
	opts := append([]Option{WithResource(gr), WithSelector(sel)}, o.informerOptions...)
	inf := NewSharedIndexInformer(lw, obj, resync, indexers, opts...)
	if o.transform != nil {
		_ = inf.SetTransform(o.transform) // not started: cannot fail
	}
	return inf
}

// FreshInformerFor returns the factory's informer for obj's type (making
// it if needed), as a *FreshInformer.
func (f *SharedInformerFactory) FreshInformerFor(obj runtime.Object) (*FreshInformer, error) {
	res, err := resolveTyped(f.client, obj, schema.GroupVersionResource{})
	if err != nil {
		return nil, err
	}
	return f.informerFor(res)
}

// ForResource returns a generic informer for gvr, a FreshInformer like the
// typed ones (and the same one, if the type's informer exists).
func (f *SharedInformerFactory) ForResource(gvr schema.GroupVersionResource) (informers.GenericInformer, error) {
	res, err := resolveTyped(f.client, nil, gvr)
	if err != nil {
		return nil, fmt.Errorf("no informer for resource %s: %w", resourceString(gvr.GroupResource()), err)
	}
	inf, err := f.informerFor(res)
	if err != nil {
		return nil, err
	}
	return genericInformer{informer: inf, resource: gvr.GroupResource()}, nil
}

type genericInformer struct {
	informer toolscache.SharedIndexInformer
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
func (f *SharedInformerFactory) StartWithContext(ctx context.Context) {
	f.set.start(ctx)
	if f.newerGroups != nil {
		f.newerGroups.StartWithContext(ctx)
	}
}

// Shutdown waits for every started informer to stop (after the context or
// channel given to Start ends) and makes later Starts do nothing.
func (f *SharedInformerFactory) Shutdown() {
	f.set.shutdown()
	if f.newerGroups != nil {
		f.newerGroups.Shutdown()
	}
}

// WaitForCacheSync waits for every started informer to sync.
func (f *SharedInformerFactory) WaitForCacheSync(stopCh <-chan struct{}) map[reflect.Type]bool {
	return f.WaitForCacheSyncWithContext(wait.ContextForChannel(stopCh)).Synced
}

// WaitForCacheSyncWithContext waits, without polling, for every started
// informer to sync.
func (f *SharedInformerFactory) WaitForCacheSyncWithContext(ctx context.Context) toolscache.SyncResult {
	synced, err := f.set.waitForCacheSync(ctx)
	if f.newerGroups != nil {
		newer := f.newerGroups.WaitForCacheSyncWithContext(ctx)
		for t, ok := range newer.Synced {
			if synced == nil {
				synced = map[reflect.Type]bool{}
			}
			synced[t] = ok
		}
		if err == nil {
			err = newer.Err
		}
	}
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
	return waitAll(ctx, rvs, func(gvr schema.GroupVersionResource) *FreshInformer {
		res, err := resolveTyped(f.client, nil, gvr)
		if err != nil {
			return nil
		}
		return f.set.startedFresh(reflect.PointerTo(res.object))
	})
}

// waitAll waits for each resource version in turn: the deadline is ctx's,
// shared, and the waits after the slowest return at once.
func waitAll(ctx context.Context, rvs []ResourceVersion, informerOf func(schema.GroupVersionResource) *FreshInformer) error {
	for _, rv := range rvs {
		inf := informerOf(rv.Resource)
		if inf == nil {
			return fmt.Errorf("%w: %s", ErrNoInformer, resourceString(rv.Resource.GroupResource()))
		}
		if err := inf.WaitForFreshness(ctx, rv.ResourceVersion); err != nil {
			return fmt.Errorf("%s: %w", resourceString(rv.Resource.GroupResource()), err)
		}
	}
	return nil
}

// AsFreshInformer is FreshInformerOf, kept for existing callers.
func AsFreshInformer(inf toolscache.SharedInformer) (*FreshInformer, bool) {
	return FreshInformerOf(inf)
}

// FreshInformerForResource returns the factory's first informer for gr
// (the one made first, if versions of gr have one each), deterministically.
func (f *SharedInformerFactory) FreshInformerForResource(gr schema.GroupResource) (*FreshInformer, bool) {
	infs := f.FreshInformersForResource(gr)
	if len(infs) == 0 {
		return nil, false
	}
	return infs[0], true
}

// FreshInformersForResource returns the factory's informers of gr, in the
// order they were made. It makes SharedInformerFactory an InformerSource
// for ReadYourWrites.
func (f *SharedInformerFactory) FreshInformersForResource(gr schema.GroupResource) []*FreshInformer {
	return f.set.fresh(func(inf *FreshInformer) bool { return inf.Resource() == gr })
}

// ResourceFor names obj's resource: the clientset's resource of its type,
// else what the scheme given with WithScheme says. It makes
// SharedInformerFactory a ResourceResolver for ReadYourWrites.Wrote.
func (f *SharedInformerFactory) ResourceFor(obj runtime.Object) (schema.GroupResource, error) {
	if res, err := resolveTyped(f.client, obj, schema.GroupVersionResource{}); err == nil {
		return res.gvr.GroupResource(), nil
	}
	gvr, err := f.opts.mapper().resourceFor(obj)
	return gvr.GroupResource(), err
}
