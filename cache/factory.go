package cache

import (
	"context"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	clientgoinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/internal/factory"
)

// The factories' machinery is internal/factory, generic over the informer
// it makes (it cannot import cache); this file makes them with
// FreshInformer and documents what they add to client-go's.

// SharedInformerFactory is a drop-in for client-go's
// informers.SharedInformerFactory whose informers are *FreshInformer. It
// is one: every method of that interface is there as client-go documents
// it (Start, Shutdown, WaitForCacheSync, InformerFor, ForResource, and the
// group accessors: factory.Core().V1().Pods().Informer(), .Lister()), so
// existing code that takes one runs unchanged. Its getters do no I/O and
// start nothing, as client-go's. It adds the methods below.
type SharedInformerFactory struct{ *typedFactory }

type typedFactory = factory.SharedInformerFactory[*FreshInformer]

// DynamicSharedInformerFactory is a drop-in for client-go's
// dynamicinformer.DynamicSharedInformerFactory (CRDs and other resources as
// unstructured objects) whose informers are *FreshInformer, keyed by GVR:
// every method of that interface is there as client-go documents it
// (ForResource, Start, Shutdown, WaitForCacheSync). It adds the methods
// below.
type DynamicSharedInformerFactory struct{ *dynamicFactory }

type dynamicFactory = factory.DynamicSharedInformerFactory[*FreshInformer]

// ErrNoInformer is matched by the error of a wait or sync on a resource
// that has no informer to wait on: a factory without a started informer
// for it, or (package readyourwrites) an informer never started.
var ErrNoInformer = factory.ErrNoInformer

var (
	_ clientgoinformers.SharedInformerFactory      = &SharedInformerFactory{}
	_ dynamicinformer.DynamicSharedInformerFactory = &DynamicSharedInformerFactory{}
	_ InformerSource                               = &SharedInformerFactory{}
	_ InformerSource                               = &DynamicSharedInformerFactory{}
	_ ResourceResolver                             = &SharedInformerFactory{}
)

// WaitForFreshness waits until the factory's started informer for gvr has
// applied rv (FreshInformer.WaitForFreshness). It fails at once, matching
// ErrNoInformer, if there is none.
func (f *SharedInformerFactory) WaitForFreshness(ctx context.Context, gvr schema.GroupVersionResource, rv string) error {
	return f.typedFactory.WaitForFreshness(ctx, gvr, rv)
}

// Sync is a read barrier over the factory's started informers (or only
// those of the listed resources): it returns once each reflects everything
// the server had committed when Sync was called (FreshInformer.Sync), all
// in parallel. A listed resource without an informer fails at once,
// matching ErrNoInformer.
func (f *SharedInformerFactory) Sync(ctx context.Context, resources ...schema.GroupResource) error {
	return f.typedFactory.Sync(ctx, resources...)
}

// FreshInformersForResource returns the factory's informers of gr, in the
// order they were made: the factory is an InformerSource (for
// readyourwrites and SyncAll).
func (f *SharedInformerFactory) FreshInformersForResource(gr schema.GroupResource) []*FreshInformer {
	return f.typedFactory.FreshInformersForResource(gr)
}

// ResourceFor names obj's resource (the clientset's for its type, else the
// scheme's given with WithScheme): the factory is a ResourceResolver.
func (f *SharedInformerFactory) ResourceFor(obj runtime.Object) (schema.GroupResource, error) {
	return f.typedFactory.ResourceFor(obj)
}

// WaitForFreshness is SharedInformerFactory.WaitForFreshness.
func (f *DynamicSharedInformerFactory) WaitForFreshness(ctx context.Context, gvr schema.GroupVersionResource, rv string) error {
	return f.dynamicFactory.WaitForFreshness(ctx, gvr, rv)
}

// Sync is SharedInformerFactory.Sync.
func (f *DynamicSharedInformerFactory) Sync(ctx context.Context, resources ...schema.GroupResource) error {
	return f.dynamicFactory.Sync(ctx, resources...)
}

// FreshInformersForResource is SharedInformerFactory.FreshInformersForResource
// (one informer per version asked for).
func (f *DynamicSharedInformerFactory) FreshInformersForResource(gr schema.GroupResource) []*FreshInformer {
	return f.dynamicFactory.FreshInformersForResource(gr)
}

// ResourceFor names an unstructured object's resource from its apiVersion
// and kind (through WithScheme's RESTMapper, or client-go's guess).
func (f *DynamicSharedInformerFactory) ResourceFor(obj runtime.Object) (schema.GroupResource, error) {
	return f.dynamicFactory.ResourceFor(obj)
}

// FactoryOption configures a SharedInformerFactory or a
// DynamicSharedInformerFactory, as client-go's SharedInformerOption does.
type FactoryOption func(*factoryOptions)

type factoryOptions struct {
	config          factory.Config[*FreshInformer]
	informerOptions []Option
}

// WithNamespace limits the factory's informers to one namespace.
func WithNamespace(namespace string) FactoryOption {
	return func(o *factoryOptions) { o.config.Namespace = namespace }
}

// WithTweakListOptions changes every list and watch request of the
// factory's informers (label or field selectors, say).
func WithTweakListOptions(tweak internalinterfaces.TweakListOptionsFunc) FactoryOption {
	return func(o *factoryOptions) { o.config.TweakListOptions = tweak }
}

// WithTransform sets a transform on every informer the factory makes.
func WithTransform(transform toolscache.TransformFunc) FactoryOption {
	return func(o *factoryOptions) { o.config.Transform = transform }
}

// WithCustomResyncConfig sets the resync period of the informers of the
// given objects' types.
func WithCustomResyncConfig(resync map[metav1.Object]time.Duration) FactoryOption {
	return func(o *factoryOptions) {
		for obj, d := range resync {
			o.config.CustomResync[reflect.TypeOf(obj)] = d
		}
	}
}

// WithInformerName names the factory's informers in client-go's informer
// metrics (the store's resource version, the queue), as client-go's
// informers.WithInformerName does: make name with
// toolscache.NewInformerName at start-up; Shutdown releases it.
func WithInformerName(name *toolscache.InformerName) FactoryOption {
	return func(o *factoryOptions) { o.config.InformerName = name }
}

// WithInformerOptions applies informer options (WithMetrics,
// WithAcceptRegressionAfter, ...) to every informer the factory makes.
func WithInformerOptions(opts ...Option) FactoryOption {
	return func(o *factoryOptions) { o.informerOptions = append(o.informerOptions, opts...) }
}

// factoryConfig returns what the factories are made of: opts, and
// FreshInformers made with the informer options, named after their
// resource and scope.
func factoryConfig(opts []FactoryOption) factory.Config[*FreshInformer] {
	o := factoryOptions{config: factory.Config[*FreshInformer]{CustomResync: map[reflect.Type]time.Duration{}}}
	for _, opt := range opts {
		opt(&o)
	}
	var io Options
	for _, opt := range o.informerOptions {
		opt(&io)
	}
	o.config.New = newFromSpec(o.informerOptions)
	o.config.ResourceFor = io.resourceMapper.ResourceFor
	o.config.HasStarted = (*FreshInformer).hasStarted
	o.config.Starting = (*FreshInformer).starting
	return o.config
}

// newFromSpec makes the FreshInformers of the factories (and of
// InformerFor): named after their resource and scope, with the informer
// options opts.
func newFromSpec(opts []Option) func(factory.Spec) *FreshInformer {
	return func(s factory.Spec) *FreshInformer {
		opts := append([]Option{WithResource(s.Resource), WithSelector(SelectorOf(s.Namespace, s.TweakListOptions)),
			func(o *Options) { o.Identifier = s.Identifier }}, opts...)
		return NewSharedIndexInformer(s.ListerWatcher, s.Object, s.Resync, s.Indexers, opts...)
	}
}

// NewSharedInformerFactory returns a factory for all namespaces, as
// client-go's function of the same name.
func NewSharedInformerFactory(client kubernetes.Interface, defaultResync time.Duration, opts ...FactoryOption) *SharedInformerFactory {
	return NewSharedInformerFactoryWithOptions(client, defaultResync, opts...)
}

// NewSharedInformerFactoryWithOptions returns a factory configured by opts.
func NewSharedInformerFactoryWithOptions(client kubernetes.Interface, defaultResync time.Duration, opts ...FactoryOption) *SharedInformerFactory {
	return &SharedInformerFactory{factory.NewSharedInformerFactory(client, defaultResync, factoryConfig(opts))}
}

// NewDynamicSharedInformerFactory returns a dynamic factory, as client-go's
// dynamicinformer.NewFilteredDynamicSharedInformerFactory does with the
// options WithNamespace and WithTweakListOptions.
func NewDynamicSharedInformerFactory(client dynamic.Interface, defaultResync time.Duration, opts ...FactoryOption) *DynamicSharedInformerFactory {
	return &DynamicSharedInformerFactory{factory.NewDynamicSharedInformerFactory(client, defaultResync, factoryConfig(opts))}
}

// NewGroup returns client-go's API group accessor that newGroup (the group
// package's New) makes over the factory, as factory.Core() is made: its
// informers are the factory's FreshInformers, in its namespace and list
// options. It gives the groups of a client-go newer than the factory's own
// accessors, such as 0.37's Lifecycle(), which the factory lends from an
// embedded client-go factory (plain informers):
//
//	type factory struct{ *cache.SharedInformerFactory }
//
//	func (f factory) Lifecycle() lifecycle.Interface { return cache.NewGroup(f.SharedInformerFactory, lifecycle.New) }
func NewGroup[G any](f *SharedInformerFactory, newGroup func(internalinterfaces.SharedInformerFactory, string, internalinterfaces.TweakListOptionsFunc) G) G {
	return factory.NewGroup(f.typedFactory, newGroup)
}

// SyncAll is a read barrier over several informers: it returns once each
// listed resource's informer in source reflects everything the server had
// committed when SyncAll was called (see FreshInformer.Sync). Every
// informer of a resource syncs (one per namespace, say), all in parallel
// under ctx's one deadline; the cost is one Sync per informer. A resource
// without an informer fails at once with an error matching ErrNoInformer;
// otherwise the errors of the informers that failed are joined.
func SyncAll(ctx context.Context, source InformerSource, resources ...schema.GroupResource) error {
	return factory.SyncResources(ctx, source.FreshInformersForResource, resources...)
}
