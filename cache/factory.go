package cache

import (
	"context"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	clientgoinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/informers"
)

// The factories live in package informers, generic over the informer they
// make (informers cannot import cache); this file instantiates them with
// FreshInformer and keeps their constructors and options where callers
// have always found them.

// SharedInformerFactory is a drop-in for client-go's
// informers.SharedInformerFactory whose informers are *FreshInformer:
// existing code that takes an informers.SharedInformerFactory runs
// unchanged (factory.Core().V1().Pods().Informer(), .Lister(), Start,
// WaitForCacheSync, Shutdown, InformerFor, ForResource), and gains
// WaitForFreshness per resource. Its methods are documented on
// informers.SharedInformerFactory.
type SharedInformerFactory = informers.SharedInformerFactory[*FreshInformer]

// DynamicSharedInformerFactory is a drop-in for client-go's
// dynamicinformer.DynamicSharedInformerFactory (CRDs and other resources as
// unstructured objects) whose informers are *FreshInformer, keyed by GVR.
// Its methods are documented on informers.DynamicSharedInformerFactory.
type DynamicSharedInformerFactory = informers.DynamicSharedInformerFactory[*FreshInformer]

// ResourceVersion is a resource version of one resource.
type ResourceVersion = informers.ResourceVersion

// ErrNoInformer is matched by the error of a factory-level wait for a
// resource the factory has no started informer for.
var ErrNoInformer = informers.ErrNoInformer

var _ clientgoinformers.SharedInformerFactory = &SharedInformerFactory{}

// FactoryOption configures a SharedInformerFactory or a
// DynamicSharedInformerFactory, as client-go's SharedInformerOption does.
type FactoryOption func(*factoryOptions)

type factoryOptions struct {
	config          informers.Config[*FreshInformer]
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

// WithInformerOptions applies informer options (WithMetrics,
// WithAcceptRegressionAfter, ...) to every informer the factory makes.
func WithInformerOptions(opts ...Option) FactoryOption {
	return func(o *factoryOptions) { o.informerOptions = append(o.informerOptions, opts...) }
}

// factoryConfig returns what the factories are made of: opts, and
// FreshInformers made with the informer options, named after their
// resource and scope.
func factoryConfig(opts []FactoryOption) informers.Config[*FreshInformer] {
	o := factoryOptions{config: informers.Config[*FreshInformer]{CustomResync: map[reflect.Type]time.Duration{}}}
	for _, opt := range opts {
		opt(&o)
	}
	var io Options
	for _, opt := range o.informerOptions {
		opt(&io)
	}
	mapper, informerOptions := io.resourceMapper, o.informerOptions
	o.config.New = func(s informers.Spec) *FreshInformer {
		opts := append([]Option{WithResource(s.Resource), WithSelector(SelectorOf(s.Namespace, s.TweakListOptions))}, informerOptions...)
		return NewSharedIndexInformer(s.ListerWatcher, s.Object, s.Resync, s.Indexers, opts...)
	}
	o.config.ResourceFor = mapper.ResourceFor
	o.config.HasStarted = (*FreshInformer).HasStarted
	o.config.Starting = (*FreshInformer).starting
	return o.config
}

// NewSharedInformerFactory returns a factory for all namespaces, as
// client-go's function of the same name.
func NewSharedInformerFactory(client kubernetes.Interface, defaultResync time.Duration, opts ...FactoryOption) *SharedInformerFactory {
	return NewSharedInformerFactoryWithOptions(client, defaultResync, opts...)
}

// NewSharedInformerFactoryWithOptions returns a factory configured by opts.
func NewSharedInformerFactoryWithOptions(client kubernetes.Interface, defaultResync time.Duration, opts ...FactoryOption) *SharedInformerFactory {
	return informers.NewSharedInformerFactory(client, defaultResync, factoryConfig(opts))
}

// NewDynamicSharedInformerFactory returns a dynamic factory, as client-go's
// dynamicinformer.NewFilteredDynamicSharedInformerFactory does with the
// options WithNamespace and WithTweakListOptions.
func NewDynamicSharedInformerFactory(client dynamic.Interface, defaultResync time.Duration, opts ...FactoryOption) *DynamicSharedInformerFactory {
	return informers.NewDynamicSharedInformerFactory(client, defaultResync, factoryConfig(opts))
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
func NewGroup[G any](factory *SharedInformerFactory, newGroup func(internalinterfaces.SharedInformerFactory, string, internalinterfaces.TweakListOptionsFunc) G) G {
	return informers.NewGroup(factory, newGroup)
}

// SyncAll is a read barrier over several informers: it returns once each
// listed resource's informer in source reflects everything the server had
// committed when SyncAll was called (see FreshInformer.Sync). Every
// informer of a resource syncs (one per namespace, say), all in parallel
// under ctx's one deadline; the cost is one Sync per informer. A resource
// without an informer fails at once with an error matching ErrNoInformer;
// otherwise the errors of the informers that failed are joined.
func SyncAll(ctx context.Context, source InformerSource, resources ...schema.GroupResource) error {
	return informers.SyncResources(ctx, source.FreshInformersForResource, resources...)
}

// AsFreshInformer is FreshInformerOf, kept for existing callers.
//
// Deprecated: use FreshInformerOf. It will be removed in the next release.
func AsFreshInformer(inf toolscache.SharedInformer) (*FreshInformer, bool) {
	return FreshInformerOf(inf)
}
