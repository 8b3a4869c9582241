package factory

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/internal/resources"
)

// cache.InformerFor and cache.ClusterInformerFor, over an informer-gen
// factory of the shape generated.go describes. Package cache keeps their
// API and documentation; this is what they do.

// ErrScopeMismatch is cache.ErrScopeMismatch: the scope given to
// cache.Scoped differs from the factory's own ListScope.
var ErrScopeMismatch = errors.New("the scope given differs from the factory's")

// ErrNotFreshInformer is cache.ErrNotFreshInformer.
var ErrNotFreshInformer = errors.New("the informer is not freshness-aware")

// TypedClient is a generated typed client of a kind whose list type is L.
type TypedClient[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// GeneratedFactory is an informer-gen factory: F is its NewInformerFunc,
// G its GenericInformer.
type GeneratedFactory[F any, G GenericInformer] interface {
	InformerFor(obj runtime.Object, newFunc F) toolscache.SharedIndexInformer
	ForResource(resource schema.GroupVersionResource) (G, error)
}

// GenericInformer is an informer-gen factory's GenericInformer.
type GenericInformer interface {
	Informer() toolscache.SharedIndexInformer
}

// listScoper is cache.ListScoper.
type listScoper interface {
	ListScope() (namespace string, tweak func(*metav1.ListOptions))
}

// comparableInformer is an informer InformerFor can tell from another.
type comparableInformer interface {
	comparable
	toolscache.SharedIndexInformer
}

// Generated is what InformerFor needs of package cache.
type Generated[I comparableInformer] struct {
	// Resource, if set, names the informer's group and resource
	// (cache.WithResource).
	Resource schema.GroupResource
	// New makes the informer (with Spec's namespace index).
	New func(Spec) I
	// Of returns the I behind an informer (cache.FreshInformerOf).
	Of func(toolscache.SharedInformer) (I, bool)
	// Unwrap returns the factory a cache.Scoped factory was given.
	Unwrap func(factory any) (any, bool)
}

// InformerFor puts an I made by g.New in factory for the kind client
// lists (namespaced: in the factory's namespace), and returns it; see
// cache.InformerFor.
func InformerFor[F ~func(C, time.Duration) toolscache.SharedIndexInformer, C any, G GenericInformer, T TypedClient[L], L runtime.Object, I comparableInformer](factory GeneratedFactory[F, G], client func(string) T, namespaced bool, g Generated[I]) (I, error) {
	var none I
	namespace, tweak, err := listScope(factory, g.Unwrap)
	if err != nil {
		return none, err
	}
	if !namespaced {
		namespace = ""
	}
	typed := client(namespace)
	obj, err := ListItem[L]()
	if err != nil {
		return none, err
	}
	gvr, err := TypedResource(typed, obj, g.Resource)
	if err != nil {
		return none, err
	}
	var made I
	newFunc := F(func(clientset C, resync time.Duration) toolscache.SharedIndexInformer {
		// As the generated informers: fake clientsets cannot stream lists.
		made = g.New(Spec{ListerWatcher: toolscache.ToListWatcherWithWatchListSemantics(typedListWatch(typed, tweak), clientset),
			Object: obj, Resource: gvr.GroupResource(), Resync: resync, Namespace: namespace, TweakListOptions: tweak,
			Indexers: toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}})
		return made
	})
	inf := factory.InformerFor(obj, newFunc)
	if made == none {
		if fresh, ok := g.Of(inf); ok {
			return fresh, nil // made by an earlier call
		}
		return none, fmt.Errorf("%w: the factory made its informer of %T before (an accessor, lister or ForResource asked for it first): call InformerFor right after making the factory", ErrNotFreshInformer, obj)
	}
	if gi, err := factory.ForResource(gvr); err != nil || !servedBy(gi, made, g.Of) {
		return made, fmt.Errorf("%w: the factory does not serve %T as %s: name its resource with WithResource", resources.ErrUnknown, obj, gvr)
	}
	return made, nil
}

// typedListWatch lists and watches with typed, each request changed by
// tweak (if not nil).
func typedListWatch[L runtime.Object](typed TypedClient[L], tweak func(*metav1.ListOptions)) *toolscache.ListWatch {
	return &toolscache.ListWatch{
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
}

// servedBy reports whether g's informer is inf (or a view of it).
func servedBy[I comparableInformer](g GenericInformer, inf I, of func(toolscache.SharedInformer) (I, bool)) bool {
	got, ok := of(g.Informer())
	return ok && got == inf
}

// listScope returns the namespace and tweak factory lists with: its
// ListScope's, checked against the wrapped factory's when Scoped gave
// them and the factory says its own.
func listScope(factory any, unwrap func(any) (any, bool)) (string, func(*metav1.ListOptions), error) {
	s, ok := factory.(listScoper)
	if !ok {
		return "", nil, fmt.Errorf("%w: %T does not say what it lists: run cmd/scope-gen on its package, or pass cache.Scoped(factory, namespace, tweak)", ErrUnsupportedFactory, factory)
	}
	namespace, tweak := s.ListScope()
	w, ok := unwrap(factory)
	if !ok {
		return namespace, tweak, nil
	}
	own, ok := w.(listScoper)
	if !ok {
		return namespace, tweak, nil
	}
	ownNamespace, ownTweak := own.ListScope()
	if ownNamespace != namespace || !sameTweak(ownTweak, tweak) {
		return "", nil, fmt.Errorf("%w: Scoped was given namespace %q and a tweak making %v, the factory lists namespace %q with one making %v",
			ErrScopeMismatch, namespace, tweakedPtr(tweak), ownNamespace, tweakedPtr(ownTweak))
	}
	return namespace, tweak, nil
}

// sameTweak reports whether a and b make the same list options from empty
// ones: funcs cannot be compared, what they do can.
func sameTweak(a, b func(*metav1.ListOptions)) bool {
	return reflect.DeepEqual(tweaked(a), tweaked(b))
}

// tweaked returns the list options tweak makes from empty ones.
func tweaked(tweak func(*metav1.ListOptions)) metav1.ListOptions {
	var o metav1.ListOptions
	if tweak != nil {
		tweak(&o)
	}
	return o
}

// tweakedPtr is tweaked, printable.
func tweakedPtr(tweak func(*metav1.ListOptions)) *metav1.ListOptions {
	o := tweaked(tweak)
	return &o
}
