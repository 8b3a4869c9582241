package cache

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	internalfactory "github.com/freshinformer/freshinformer/internal/factory"
)

// Code-generated informer factories (informer-gen's) make their informers
// inline: InformerFor and ClusterInformerFor put a FreshInformer in one
// through its InformerFor(obj, newFunc). The shape of the generated code
// they rely on is in package internal/factory (generated.go).

// typedClient is what InformerFor lists and watches with: a generated
// typed client (gentype's, or a hand-written one with the same methods).
type typedClient[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// generatedFactory is what InformerFor needs of an informer-gen factory. F
// is its internalinterfaces.NewInformerFunc, a func(clientset, resync); G
// its GenericInformer.
type generatedFactory[F any, G genericInformer] interface {
	InformerFor(obj runtime.Object, newFunc F) toolscache.SharedIndexInformer
	ForResource(resource schema.GroupVersionResource) (G, error)
}

// genericInformer is an informer-gen factory's GenericInformer.
type genericInformer interface {
	Informer() toolscache.SharedIndexInformer
}

// ErrUnsupportedFactory is matched by the error of InformerFor and
// ClusterInformerFor for a factory that does not have the shape of
// informer-gen's (see InformerFor).
var ErrUnsupportedFactory = internalfactory.ErrUnsupportedFactory

// InformerFor makes factory's informer of a namespaced kind a FreshInformer,
// before anything asks for it, and returns it. factory is a code-generated
// (informer-gen) SharedInformerFactory; client is the kind's typed client
// getter on the clientset the factory was made with, as a method value:
//
//	factory := informers.NewSharedInformerFactoryWithOptions(clientset, resync, informers.WithNamespace(ns))
//	counters, err := cache.InformerFor(factory, clientset.CountingV1alpha1().Counters, cache.WithMetrics(provider))
//	lister := factory.Counting().V1alpha1().Counters().Lister() // the generated lister, over the FreshInformer
//
// The informer is the factory's from then on: its accessors, listers,
// ForResource, Start, WaitForCacheSync and Shutdown use it. It lists and
// watches with client in the factory's namespace, with the factory's
// tweakListOptions, custom resync and transform, and a namespace index, as
// the generated informer would; opts are informer options (WithMetrics,
// WithName, ...). Its resource is the fake typed client's if client is
// one, else the kind's plural as client-gen makes it (WithResource
// overrides it), checked against the factory's ForResource.
//
// It fails, matching ErrNotFreshInformer, if the factory already made its
// informer of the kind (an accessor, a lister or ForResource asked first):
// call it right after making the factory. It fails matching
// ErrUnsupportedFactory if factory does not have informer-gen's shape
// (code-generator 0.35 to 0.37: a pointer to a struct with the fields
// namespace and tweakListOptions, whose InformerFor makes one informer per
// type and hands it to every accessor), and matching ErrUnknownResource if the
// factory serves the kind under another resource than the one named (the
// informer is then the factory's, named wrong: pass WithResource).
func InformerFor[F ~func(C, time.Duration) toolscache.SharedIndexInformer, C any, G genericInformer, T typedClient[L], L runtime.Object](factory generatedFactory[F, G], client func(namespace string) T, opts ...Option) (*FreshInformer, error) {
	return generatedInformerFor[F, C](factory, client, true, opts)
}

// ClusterInformerFor is InformerFor for a cluster-scoped kind, whose typed
// client getter takes no namespace:
//
//	ceilings, err := cache.ClusterInformerFor(factory, clientset.CountingV1alpha1().Ceilings)
func ClusterInformerFor[F ~func(C, time.Duration) toolscache.SharedIndexInformer, C any, G genericInformer, T typedClient[L], L runtime.Object](factory generatedFactory[F, G], client func() T, opts ...Option) (*FreshInformer, error) {
	return generatedInformerFor[F, C](factory, func(string) T { return client() }, false, opts)
}

func generatedInformerFor[F ~func(C, time.Duration) toolscache.SharedIndexInformer, C any, G genericInformer, T typedClient[L], L runtime.Object](factory generatedFactory[F, G], client func(string) T, namespaced bool, opts []Option) (*FreshInformer, error) {
	namespace, tweak, err := internalfactory.GeneratedScope(factory)
	if err != nil {
		return nil, err
	}
	if !namespaced {
		namespace = ""
	}
	typed := client(namespace)
	obj, err := internalfactory.ListItem[L]()
	if err != nil {
		return nil, err
	}
	var o Options
	for _, opt := range opts {
		opt(&o)
	}
	gvr, err := internalfactory.TypedResource(typed, obj, o.Resource)
	if err != nil {
		return nil, err
	}
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			if tweak != nil {
				tweak(&o)
			}
			return typed.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if tweak != nil {
				tweak(&o)
			}
			return typed.Watch(ctx, o)
		},
	}
	var made *FreshInformer
	newFunc := F(func(clientset C, resync time.Duration) toolscache.SharedIndexInformer {
		// As the generated informers: fake clientsets cannot stream lists.
		made = NewSharedIndexInformer(toolscache.ToListWatcherWithWatchListSemantics(lw, clientset), obj, resync,
			toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc},
			append([]Option{WithResource(gvr.GroupResource()), WithSelector(SelectorOf(namespace, tweak))}, opts...)...)
		return made
	})
	inf := factory.InformerFor(obj, newFunc)
	if made == nil {
		if fresh, ok := FreshInformerOf(inf); ok {
			return fresh, nil // made by an earlier call
		}
		return nil, fmt.Errorf("%w: the factory made its informer of %T before (an accessor, lister or ForResource asked for it first): call InformerFor right after making the factory", ErrNotFreshInformer, obj)
	}
	if g, err := factory.ForResource(gvr); err != nil || !servedBy(g, made) {
		return made, fmt.Errorf("%w: the factory does not serve %T as %s: name its resource with WithResource", ErrUnknownResource, obj, gvr)
	}
	return made, nil
}

// servedBy reports whether g's informer is f (or a view of it).
func servedBy(g genericInformer, inf *FreshInformer) bool {
	got, ok := FreshInformerOf(g.Informer())
	return ok && got == inf
}
