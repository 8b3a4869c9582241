package factory

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
	clientgoinformers "k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
)

// DynamicSharedInformerFactory is a drop-in for client-go's
// dynamicinformer.DynamicSharedInformerFactory (CRDs and other resources as
// unstructured objects) whose informers are Is, keyed by GVR. Package
// cache's DynamicSharedInformerFactory is this over its FreshInformer;
// make one with cache.NewDynamicSharedInformerFactory.
type DynamicSharedInformerFactory[I Informer] struct {
	client        dynamic.Interface
	defaultResync time.Duration
	config        Config[I]
	set           informerSet[schema.GroupVersionResource, I]
}

var _ dynamicinformer.DynamicSharedInformerFactory = (*DynamicSharedInformerFactory[Informer])(nil)

// NewDynamicSharedInformerFactory returns a dynamic factory over client
// whose informers config.New makes, as client-go's
// dynamicinformer.NewFilteredDynamicSharedInformerFactory does with
// config's namespace and list options.
func NewDynamicSharedInformerFactory[I Informer](client dynamic.Interface, defaultResync time.Duration, config Config[I]) *DynamicSharedInformerFactory[I] {
	return &DynamicSharedInformerFactory[I]{client: client, defaultResync: defaultResync, config: config}
}

// ForResource returns the informer for gvr, making it if needed.
func (f *DynamicSharedInformerFactory[I]) ForResource(gvr schema.GroupVersionResource) clientgoinformers.GenericInformer {
	return genericInformer{informer: f.informer(gvr), resource: gvr.GroupResource()}
}

// informer returns the informer for gvr, making it if needed.
func (f *DynamicSharedInformerFactory[I]) informer(gvr schema.GroupVersionResource) I {
	return f.set.getOrMake(gvr, func() toolscache.SharedIndexInformer {
		client, ns, tweak := f.client, f.config.Namespace, f.config.TweakListOptions
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
		return f.config.make(Spec{
			ListerWatcher:    lw,
			Object:           &unstructured.Unstructured{},
			Resource:         gvr.GroupResource(),
			Resync:           f.config.resync(reflect.TypeFor[*unstructured.Unstructured](), f.defaultResync),
			Namespace:        ns,
			TweakListOptions: tweak,
			Indexers:         toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc},
			Identifier:       f.config.InformerName.WithResource(gvr),
		})
	}).(I)
}

// Start starts every informer made so far that is not running yet.
func (f *DynamicSharedInformerFactory[I]) Start(stopCh <-chan struct{}) {
	f.StartWithContext(wait.ContextForChannel(stopCh))
}

// StartWithContext is Start with a context: the informers stop when it ends.
func (f *DynamicSharedInformerFactory[I]) StartWithContext(ctx context.Context) {
	f.set.start(ctx, f.config.Starting)
}

// Shutdown waits for every started informer to stop.
func (f *DynamicSharedInformerFactory[I]) Shutdown() {
	f.set.shutdown()
	f.config.InformerName.Release()
}

// WaitForCacheSync waits for every started informer to sync.
func (f *DynamicSharedInformerFactory[I]) WaitForCacheSync(stopCh <-chan struct{}) map[schema.GroupVersionResource]bool {
	synced, _ := f.set.waitForCacheSync(wait.ContextForChannel(stopCh))
	return synced
}

// WaitForFreshness waits until the started informer for gvr has applied rv.
func (f *DynamicSharedInformerFactory[I]) WaitForFreshness(ctx context.Context, gvr schema.GroupVersionResource, rv string) error {
	return waitFor(ctx, gvr, rv, f.set.startedOne)
}

// Sync is a read barrier over the factory's started informers: it returns
// once each of them (or only those of the listed resources) reflects
// everything the server had committed when Sync was called. See
// SyncResources.
func (f *DynamicSharedInformerFactory[I]) Sync(ctx context.Context, resources ...schema.GroupResource) error {
	if len(resources) > 0 {
		return SyncResources(ctx, f.FreshInformersForResource, resources...)
	}
	return syncInformers(ctx, f.set.startedMatching(f.config.HasStarted))
}

// FreshInformersForResource returns the factory's informers of gr (one per
// version asked for), in the order they were made. It makes the factory a
// cache.InformerSource for ReadYourWrites and SyncAll: the one lookup by
// resource.
func (f *DynamicSharedInformerFactory[I]) FreshInformersForResource(gr schema.GroupResource) []I {
	return f.set.matching(func(inf I) bool { return inf.Resource() == gr })
}

// ResourceFor names an unstructured object's resource from its apiVersion
// and kind, with Config.ResourceFor (package cache: through the RESTMapper
// given with WithScheme if any, else as the kind's lower-case plural,
// client-go's guess). It makes the factory a cache.ResourceResolver for
// ReadYourWrites.Wrote.
func (f *DynamicSharedInformerFactory[I]) ResourceFor(obj runtime.Object) (schema.GroupResource, error) {
	gvr, err := f.config.ResourceFor(obj)
	return gvr.GroupResource(), err
}
