package cache

import (
	"context"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
)

// DynamicSharedInformerFactory is a drop-in for client-go's
// dynamicinformer.DynamicSharedInformerFactory (CRDs and other resources as
// unstructured objects) whose informers are *FreshInformer, keyed by GVR.
type DynamicSharedInformerFactory struct {
	client        dynamic.Interface
	defaultResync time.Duration
	opts          factoryOptions
	set           informerSet[schema.GroupVersionResource]
}

var _ dynamicinformer.DynamicSharedInformerFactory = &DynamicSharedInformerFactory{}

// NewDynamicSharedInformerFactory returns a dynamic factory, as client-go's
// dynamicinformer.NewFilteredDynamicSharedInformerFactory does with the
// options WithNamespace and WithTweakListOptions.
func NewDynamicSharedInformerFactory(client dynamic.Interface, defaultResync time.Duration, opts ...FactoryOption) *DynamicSharedInformerFactory {
	return &DynamicSharedInformerFactory{client: client, defaultResync: defaultResync, opts: newFactoryOptions(opts)}
}

// ForResource returns the informer for gvr, making it if needed.
func (f *DynamicSharedInformerFactory) ForResource(gvr schema.GroupVersionResource) informers.GenericInformer {
	return genericInformer{informer: f.FreshInformerFor(gvr), resource: gvr.GroupResource()}
}

// FreshInformerFor returns the informer for gvr as a *FreshInformer.
func (f *DynamicSharedInformerFactory) FreshInformerFor(gvr schema.GroupVersionResource) *FreshInformer {
	return f.set.getOrMake(gvr, func() toolscache.SharedIndexInformer {
		client, ns, tweak := f.client, f.opts.namespace, f.opts.tweakListOptions
		options := func(o metav1.ListOptions) metav1.ListOptions {
			if tweak != nil {
				tweak(&o)
			}
			return o
		}
		lw := toolscache.ToListWatcherWithWatchListSemantics(&toolscache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return client.Resource(gvr).Namespace(ns).List(ctx, options(o))
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return client.Resource(gvr).Namespace(ns).Watch(ctx, options(o))
			},
		}, client)
		resync := f.defaultResync
		if d, ok := f.opts.customResync[reflect.TypeFor[*unstructured.Unstructured]()]; ok {
			resync = d
		}
		return f.opts.newInformer(lw, &unstructured.Unstructured{}, gvr.GroupResource(), resync,
			SelectorOf(ns, tweak), toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	}).(*FreshInformer)
}

// Start starts every informer made so far that is not running yet.
func (f *DynamicSharedInformerFactory) Start(stopCh <-chan struct{}) {
	f.StartWithContext(wait.ContextForChannel(stopCh))
}

// StartWithContext is Start with a context.
func (f *DynamicSharedInformerFactory) StartWithContext(ctx context.Context) { f.set.start(ctx) }

// Shutdown waits for every started informer to stop.
func (f *DynamicSharedInformerFactory) Shutdown() { f.set.shutdown() }

// WaitForCacheSync waits for every started informer to sync.
func (f *DynamicSharedInformerFactory) WaitForCacheSync(stopCh <-chan struct{}) map[schema.GroupVersionResource]bool {
	synced, _ := f.set.waitForCacheSync(wait.ContextForChannel(stopCh))
	return synced
}

// WaitForFreshness waits until the started informer for gvr has applied rv.
func (f *DynamicSharedInformerFactory) WaitForFreshness(ctx context.Context, gvr schema.GroupVersionResource, rv string) error {
	return f.WaitForFreshnessAll(ctx, ResourceVersion{Resource: gvr, ResourceVersion: rv})
}

// WaitForFreshnessAll waits, under ctx's one deadline, until every listed
// resource's informer has applied its resource version.
func (f *DynamicSharedInformerFactory) WaitForFreshnessAll(ctx context.Context, rvs ...ResourceVersion) error {
	return waitAll(ctx, rvs, f.set.startedFresh)
}

// FreshInformerForResource returns the factory's first informer for gr
// (the one made first, if several versions of gr have one).
func (f *DynamicSharedInformerFactory) FreshInformerForResource(gr schema.GroupResource) (*FreshInformer, bool) {
	infs := f.FreshInformersForResource(gr)
	if len(infs) == 0 {
		return nil, false
	}
	return infs[0], true
}

// FreshInformersForResource returns the factory's informers of gr (one per
// version asked for), in the order they were made. It makes
// DynamicSharedInformerFactory an InformerSource for ReadYourWrites.
func (f *DynamicSharedInformerFactory) FreshInformersForResource(gr schema.GroupResource) []*FreshInformer {
	return f.set.fresh(func(inf *FreshInformer) bool { return inf.Resource() == gr })
}

// ResourceFor names an unstructured object's resource from its apiVersion
// and kind: through the RESTMapper given with WithScheme if any, else as
// the kind's lower-case plural (client-go's guess). It makes DynamicSharedInformerFactory a ResourceResolver for
// ReadYourWrites.Wrote.
func (f *DynamicSharedInformerFactory) ResourceFor(obj runtime.Object) (schema.GroupResource, error) {
	gvr, err := f.opts.mapper().resourceFor(obj)
	return gvr.GroupResource(), err
}
