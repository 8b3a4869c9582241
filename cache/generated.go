package cache

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
)

// Code-generated informer factories (informer-gen's, as sample-controller's
// pkg/generated/informers/externalversions) make their informers inline,
// over their own clientset: there is no constructor to swap. InformerFor
// and ClusterInformerFor put a FreshInformer in such a factory instead,
// through the one door every generated accessor goes through: the
// factory's InformerFor(obj, newFunc), whose first call for a type decides.
// They rely on this shape of the generated code (code-generator's 0.35 to
// 0.37 output has it):
//
//   - the factory is a pointer to a struct whose fields namespace (string)
//     and tweakListOptions (func(*metav1.ListOptions)) hold its
//     WithNamespace and WithTweakListOptions (read once, with reflect;
//     nothing else is);
//   - its InformerFor(obj, newFunc) calls newFunc(clientset, resync) once
//     per type, with its custom resync for the type, sets its transform on
//     what newFunc returns, and hands that to every accessor and lister;
//   - its ForResource(gvr) returns that informer for the kind's resource;
//   - the typed client of a kind (clientset.GroupVersion().Kinds(namespace))
//     has List and Watch, as gentype's clients have.

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
var ErrUnsupportedFactory = errors.New("not an informer-gen factory")

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
// (see the file's comment), and matching ErrUnknownResource if the
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
	namespace, tweak, err := generatedScope(factory)
	if err != nil {
		return nil, err
	}
	if !namespaced {
		namespace = ""
	}
	typed := client(namespace)
	obj, err := listItem[L]()
	if err != nil {
		return nil, err
	}
	gvr, err := typedResource(typed, obj, opts)
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
func servedBy(g genericInformer, f *FreshInformer) bool {
	got, ok := FreshInformerOf(g.Informer())
	return ok && got == f
}

// generatedScope reads an informer-gen factory's namespace and
// tweakListOptions (see the file's comment).
func generatedScope(factory any) (string, func(*metav1.ListOptions), error) {
	v := reflect.ValueOf(factory)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return "", nil, fmt.Errorf("%w: %T is not a pointer to a struct", ErrUnsupportedFactory, factory)
	}
	ns, tw := v.Elem().FieldByName("namespace"), v.Elem().FieldByName("tweakListOptions")
	tweakType := reflect.TypeFor[func(*metav1.ListOptions)]()
	if ns.Kind() != reflect.String || tw.Kind() != reflect.Func || !tw.Type().ConvertibleTo(tweakType) {
		return "", nil, fmt.Errorf("%w: %T has no fields namespace string and tweakListOptions func(*v1.ListOptions)", ErrUnsupportedFactory, factory)
	}
	if tw.IsNil() {
		return ns.String(), nil, nil
	}
	// An unexported field's value can be read but not called through
	// reflect: take it at its address.
	tweak := reflect.NewAt(tw.Type(), unsafe.Pointer(tw.UnsafeAddr())).Elem().Convert(tweakType).Interface().(func(*metav1.ListOptions))
	return ns.String(), tweak, nil
}

// listItem returns an empty item of the list type L (*FooList: a *Foo).
func listItem[L runtime.Object]() (runtime.Object, error) {
	t := reflect.TypeFor[L]()
	if t.Kind() == reflect.Pointer {
		if items, ok := t.Elem().FieldByName("Items"); ok && items.Type.Kind() == reflect.Slice {
			if obj, ok := reflect.New(items.Type.Elem()).Interface().(runtime.Object); ok {
				return obj, nil
			}
		}
	}
	return nil, fmt.Errorf("%w: the typed client lists %v, not a list with Items of objects", ErrUnsupportedFactory, t)
}

// typedResource names the resource client lists: WithResource's if opts
// set it, the fake typed client's, or the group version of client's REST
// client with obj's kind's plural as client-gen makes it.
func typedResource(client any, obj runtime.Object, opts []Option) (schema.GroupVersionResource, error) {
	var o Options
	for _, opt := range opts {
		opt(&o)
	}
	if fake, ok := client.(interface {
		Resource() schema.GroupVersionResource
	}); ok {
		gvr := fake.Resource()
		if !o.Resource.Empty() {
			gvr.Group, gvr.Resource = o.Resource.Group, o.Resource.Resource
		}
		return gvr, nil
	}
	rc, ok := client.(interface{ GetClient() rest.Interface })
	if !ok || rc.GetClient() == nil {
		return schema.GroupVersionResource{}, fmt.Errorf("%w: the typed client %T has no REST client to name its group version", ErrUnsupportedFactory, client)
	}
	gvr := rc.GetClient().APIVersion().WithResource(pluralOf(reflect.TypeOf(obj).Elem().Name()))
	if !o.Resource.Empty() {
		gvr.Group, gvr.Resource = o.Resource.Group, o.Resource.Resource
	}
	return gvr, nil
}

// pluralOf is the resource of kind as client-gen names it by default
// (gengo's plural namer, with client-gen's one exception), which
// UnsafeGuessKindToResource does not follow for a vowel before a final y:
// gateways, not gatewaies.
func pluralOf(kind string) string {
	n := len(kind)
	switch {
	case kind == "Endpoints", n < 2:
		return strings.ToLower(kind)
	case strings.ContainsRune("sxz", rune(kind[n-1])),
		kind[n-1] == 'h' && (kind[n-2] == 'c' || kind[n-2] == 's'):
		return strings.ToLower(kind) + "es"
	case kind[n-1] == 'y' && strings.ContainsRune("bcdfghjklmnpqrstvwxyz", rune(kind[n-2])):
		return strings.ToLower(kind[:n-1]) + "ies"
	case kind[n-1] == 'e' && kind[n-2] == 'f':
		return strings.ToLower(kind[:n-2]) + "ves"
	case kind[n-1] == 'f':
		return strings.ToLower(kind[:n-1]) + "ves"
	}
	return strings.ToLower(kind) + "s"
}
