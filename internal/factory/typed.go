package factory

//go:generate env GOWORK=off go run ./internal/gentyped -o typed_generated.go

// The generator runs outside the workspace: go.work may select a newer
// client-go than go.mod's, whose resources the file must not name.

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// SharedInformerFactory is a drop-in for client-go's
// informers.SharedInformerFactory whose informers are Is: existing code
// that takes an informers.SharedInformerFactory runs unchanged
// (factory.Core().V1().Pods().Informer(), .Lister(), Start,
// WaitForCacheSync, Shutdown, InformerFor, ForResource), and gains
// WaitForFreshness per resource. Package cache's SharedInformerFactory is
// this over its FreshInformer; make one with cache.NewSharedInformerFactory.
//
// It is an informers.SharedInformerFactory on every client-go this module
// supports. Its own accessors and its table of resources are those of the
// lowest (0.36) that every supported client-go serves. What only some
// serve (0.37's Lifecycle() group and new versions, 0.36's
// scheduling.k8s.io/v1alpha2) is an I too when reached through the
// factory's group accessors or ForResource (newer.go). Go cannot add a
// method only when a newer client-go is built in, so the accessors of such
// groups (factory.Lifecycle() on 0.37) come from an embedded client-go
// factory: their informers are client-go's, without freshness (Start,
// WaitForCacheSync and Shutdown cover them).
type SharedInformerFactory[I Informer] struct {
	newerGroups

	client        kubernetes.Interface
	defaultResync time.Duration
	config        Config[I]
	set           informerSet[reflect.Type, I]
}

// newerGroups is client-go's own factory interface: embedded, it lends
// SharedInformerFactory the group accessors of client-go releases newer
// than the lowest supported (its own methods shadow the others).
type newerGroups = clientgoinformers.SharedInformerFactory

var _ clientgoinformers.SharedInformerFactory = (*SharedInformerFactory[Informer])(nil)

// NewSharedInformerFactory returns a typed factory over client whose
// informers config.New makes.
func NewSharedInformerFactory[I Informer](client kubernetes.Interface, defaultResync time.Duration, config Config[I]) *SharedInformerFactory[I] {
	newer := []clientgoinformers.SharedInformerOption{clientgoinformers.WithNamespace(config.Namespace), clientgoinformers.WithTweakListOptions(config.TweakListOptions)}
	if config.Transform != nil {
		newer = append(newer, clientgoinformers.WithTransform(config.Transform))
	}
	if config.InformerName != nil {
		newer = append(newer, clientgoinformers.WithInformerName(config.InformerName))
	}
	return &SharedInformerFactory[I]{
		newerGroups:   clientgoinformers.NewSharedInformerFactoryWithOptions(client, defaultResync, newer...),
		client:        client,
		defaultResync: defaultResync,
		config:        config,
	}
}

// typed returns the factory's informer of res, making it in the factory's
// scope if there is none.
func (f *SharedInformerFactory[I]) typed(res typedResource) toolscache.SharedIndexInformer {
	return f.set.getOrMake(res.key(), func() toolscache.SharedIndexInformer { return f.makeTyped(res) })
}

// makeTyped makes the factory's informer of res, in the factory's scope:
// its namespace (none for cluster-scoped resources) and list options, and
// a namespace index, as client-go's generated informers have.
func (f *SharedInformerFactory[I]) makeTyped(res typedResource) I {
	namespace := f.config.Namespace
	if !res.namespaced {
		namespace = ""
	}
	return f.config.make(Spec{
		ListerWatcher:    res.listerWatcher(f.client, namespace, f.config.TweakListOptions),
		Object:           res.object,
		Resource:         res.gvr.GroupResource(),
		Resync:           f.config.resync(res.key(), f.defaultResync),
		Namespace:        namespace,
		TweakListOptions: f.config.TweakListOptions,
		Indexers:         toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc},
		Identifier:       f.config.InformerName.WithResource(res.gvr),
	})
}

// accessors is the factory as it hands itself to client-go's group
// packages (Core(), Apps(), ...): every InformerFor call through it comes
// from a generated accessor, whose newFunc builds its informer in the
// factory's namespace with the factory's list options and a namespace
// index, so the factory knows that scope without calling newFunc.
type accessors[I Informer] struct{ f *SharedInformerFactory[I] }

func (a accessors[I]) Start(stopCh <-chan struct{})           { a.f.Start(stopCh) }
func (a accessors[I]) InformerName() *toolscache.InformerName { return a.f.InformerName() }

func (a accessors[I]) InformerFor(obj runtime.Object, newFunc internalinterfaces.NewInformerFunc) toolscache.SharedIndexInformer {
	return a.f.informerFor(obj, newFunc, true)
}

// NewGroup returns client-go's API group accessor that newGroup (the
// group package's New, such as lifecycle.New) makes over f, as f.Core()
// is made: its informers are f's Is in f's namespace and list options. It
// is for the groups of a client-go newer than f's own accessors (0.37's
// Lifecycle()); passing f itself to newGroup gives plain informers, since
// f cannot see the scope newGroup's informers are asked in.
func NewGroup[G any, I Informer](f *SharedInformerFactory[I], newGroup func(internalinterfaces.SharedInformerFactory, string, internalinterfaces.TweakListOptionsFunc) G) G {
	return newGroup(accessors[I]{f}, f.config.Namespace, f.config.TweakListOptions)
}

// errNotInformer is matched by the error for a resource whose informer in
// the factory is a plain one.
var errNotInformer = errors.New("the factory's informer of the resource is not freshness-aware")

// typedI returns the factory's informer of res as an I.
func (f *SharedInformerFactory[I]) typedI(res typedResource) (I, error) {
	inf, ok := f.typed(res).(I)
	if !ok {
		return inf, fmt.Errorf("%w: %s", errNotInformer, resourceString(res.gvr.GroupResource()))
	}
	return inf, nil
}

// InformerFor returns the factory's informer for obj's type, making it
// with newFunc if there is none, as client-go's factory does: the first
// call for a type decides, and the informer is newFunc's own, built over
// the factory's client with the factory's transform. The factory cannot
// see what such an informer lists without running it, and a getter runs
// nothing: so it is plain, without freshness (its informer of the type,
// for Start, WaitForCacheSync and the accessors), unless newFunc returns
// an I, such as a cache.FreshInformer, which the factory registers as it
// is.
//
// The group accessors (factory.Core().V1().Pods()) and ForResource reach
// the factory by another door and always make an I, in the factory's
// namespace, list options and a namespace index: for every resource of
// the factory's table (typed_generated.go), and for the resources of
// client-go's clientset outside it whose scope it knows (newer.go).
func (f *SharedInformerFactory[I]) InformerFor(obj runtime.Object, newFunc internalinterfaces.NewInformerFunc) toolscache.SharedIndexInformer {
	return f.informerFor(obj, newFunc, false)
}

// informerFor is InformerFor; scoped says that newFunc is a generated
// accessor's, in the factory's scope, so the factory may make its own
// informer instead.
func (f *SharedInformerFactory[I]) informerFor(obj runtime.Object, newFunc internalinterfaces.NewInformerFunc, scoped bool) toolscache.SharedIndexInformer {
	key := reflect.TypeOf(obj)
	return f.set.getOrMake(key, func() toolscache.SharedIndexInformer {
		if scoped {
			if res, ok := typedResourceOf(obj); ok {
				return f.makeTyped(res)
			}
			if res, ok := f.newerResource(obj); ok {
				return f.makeTyped(res)
			}
		}
		inf := newFunc(f.client, f.config.resync(key, f.defaultResync))
		if _, fresh := inf.(I); !fresh {
			klog.Background().V(2).Info("Registering newFunc's informer as it is, without freshness: the factory cannot see what it lists without running it", "type", fmt.Sprintf("%T", obj))
		}
		if f.config.Transform != nil {
			_ = inf.SetTransform(f.config.Transform) // not started: cannot fail
		}
		return inf
	})
}

// ForResource returns a generic informer for gvr, an I like the typed ones
// (and the same one, if the type's informer exists). A resource outside
// the factory's table that the linked client-go serves gets one too if the
// factory knows its scope (newer.go); its type is found in client-go's
// scheme by the rule schemeObjectOf states. Otherwise it is the embedded
// client-go factory's plain informer.
func (f *SharedInformerFactory[I]) ForResource(gvr schema.GroupVersionResource) (clientgoinformers.GenericInformer, error) {
	t, ok := objectTypeOf(gvr)
	if !ok {
		if generic, ok := f.newerForResource(gvr); ok {
			return generic, nil
		}
		if f.newerGroups != nil {
			if generic, err := f.newerGroups.ForResource(gvr); err == nil {
				return generic, nil
			}
		}
		return nil, fmt.Errorf("no informer for resource %s: client-go's clientset does not serve it", resourceString(gvr.GroupResource()))
	}
	res, _ := typedResourceOf(reflect.New(t.Elem()).Interface().(runtime.Object))
	inf, err := f.typedI(res)
	if err != nil {
		return nil, err
	}
	return genericInformer{informer: inf, resource: gvr.GroupResource()}, nil
}

// newerForResource returns the informer of gvr, a resource outside the
// table; ok is false if the factory cannot list it (newerResource).
func (f *SharedInformerFactory[I]) newerForResource(gvr schema.GroupVersionResource) (clientgoinformers.GenericInformer, bool) {
	obj, ok := schemeObjectOf(gvr)
	if !ok {
		return nil, false
	}
	res, ok := f.newerResource(obj)
	if !ok {
		return nil, false
	}
	return genericInformer{informer: f.typed(res), resource: gvr.GroupResource()}, true
}

// Start starts every informer made so far that is not running yet.
func (f *SharedInformerFactory[I]) Start(stopCh <-chan struct{}) {
	f.StartWithContext(wait.ContextForChannel(stopCh))
}

// StartWithContext is Start with a context: the informers stop when it ends.
func (f *SharedInformerFactory[I]) StartWithContext(ctx context.Context) {
	f.set.start(ctx, f.config.Starting)
	if f.newerGroups != nil {
		f.newerGroups.StartWithContext(ctx)
	}
}

// Shutdown waits for every started informer to stop (after the context or
// channel given to Start ends) and makes later Starts do nothing.
func (f *SharedInformerFactory[I]) Shutdown() {
	f.set.shutdown()
	if f.newerGroups != nil {
		f.newerGroups.Shutdown()
	}
	f.config.InformerName.Release()
}

// WaitForCacheSync waits for every started informer to sync.
func (f *SharedInformerFactory[I]) WaitForCacheSync(stopCh <-chan struct{}) map[reflect.Type]bool {
	return f.WaitForCacheSyncWithContext(wait.ContextForChannel(stopCh)).Synced
}

// WaitForCacheSyncWithContext waits, without polling, for every started
// informer to sync.
func (f *SharedInformerFactory[I]) WaitForCacheSyncWithContext(ctx context.Context) toolscache.SyncResult {
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

// InformerName returns the name the factory's informers report client-go's
// informer metrics under (Config.InformerName), nil if none.
func (f *SharedInformerFactory[I]) InformerName() *toolscache.InformerName {
	return f.config.InformerName
}

// WaitForFreshness waits until the factory's started informer for gvr has
// applied rv. It fails at once, matching ErrNoInformer, if there is none.
func (f *SharedInformerFactory[I]) WaitForFreshness(ctx context.Context, gvr schema.GroupVersionResource, rv string) error {
	return waitFor(ctx, gvr, rv, func(gvr schema.GroupVersionResource) (I, bool) {
		t, ok := objectTypeOf(gvr)
		if !ok {
			obj, newer := schemeObjectOf(gvr)
			if !newer {
				var zero I
				return zero, false
			}
			t = reflect.TypeOf(obj)
		}
		return f.set.startedOne(t)
	})
}

// Sync is a read barrier over the factory's started informers: it returns
// once each of them (or only those of the listed resources) reflects
// everything the server had committed when Sync was called. See
// SyncResources.
func (f *SharedInformerFactory[I]) Sync(ctx context.Context, resources ...schema.GroupResource) error {
	if len(resources) > 0 {
		return SyncResources(ctx, f.FreshInformersForResource, resources...)
	}
	return syncInformers(ctx, f.set.startedMatching(f.config.HasStarted))
}

// FreshInformersForResource returns the factory's informers of gr, in the
// order they were made. It makes the factory a cache.InformerSource for
// ReadYourWrites and SyncAll: the one lookup by resource.
func (f *SharedInformerFactory[I]) FreshInformersForResource(gr schema.GroupResource) []I {
	return f.set.matching(func(inf I) bool { return inf.Resource() == gr })
}

// ResourceFor names obj's resource: the clientset's resource of its type,
// else what Config.ResourceFor says (the scheme given with cache's
// WithScheme). It makes the factory a cache.ResourceResolver for
// ReadYourWrites.Wrote.
func (f *SharedInformerFactory[I]) ResourceFor(obj runtime.Object) (schema.GroupResource, error) {
	if gvr, ok := resourceOfType(obj); ok {
		return gvr.GroupResource(), nil
	}
	if f.config.ResourceFor == nil {
		return schema.GroupResource{}, fmt.Errorf("%T is not a type of client-go's clientset", obj)
	}
	gvr, err := f.config.ResourceFor(obj)
	return gvr.GroupResource(), err
}
