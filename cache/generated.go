package cache

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	internalfactory "github.com/freshinformer/freshinformer/internal/factory"
)

// Code-generated informer factories (informer-gen's) make their informers
// inline: InformerFor and ClusterInformerFor put a FreshInformer in one
// through its InformerFor(obj, newFunc). The shape of the generated code
// they rely on is in package internal/factory (generated.go), and so is
// what they do (informerfor.go). What the factory lists (its namespace and
// tweak) lives in its unexported fields, which code outside the generated
// package may not read: the factory says it through a ListScope method
// that cmd/scope-gen writes into the generated package, or the caller
// says it with Scoped.

// typedClient is what InformerFor lists and watches with: a generated
// typed client (gentype's, or a hand-written one with the same methods).
// generatedFactory is what InformerFor needs of an informer-gen factory: F
// is its internalinterfaces.NewInformerFunc, a func(clientset, resync); G
// its GenericInformer (genericInformer).
type (
	typedClient[L runtime.Object]              = internalfactory.TypedClient[L]
	generatedFactory[F any, G genericInformer] = internalfactory.GeneratedFactory[F, G]
	genericInformer                            = internalfactory.GenericInformer
)

// ErrUnsupportedFactory is matched by the error of InformerFor and
// ClusterInformerFor for a factory that does not have the shape of
// informer-gen's (see InformerFor).
var ErrUnsupportedFactory = internalfactory.ErrUnsupportedFactory

// ErrScopeMismatch is matched by the error of InformerFor and
// ClusterInformerFor when the namespace or list options tweak given to
// Scoped differ from the ones the factory says it was made with (its
// ListScope): the informer would list something else than the generated
// listers promise.
var ErrScopeMismatch = internalfactory.ErrScopeMismatch

// ListScoper is a factory that says what its informers list: the
// namespace and the list options tweak it was made with. cmd/scope-gen
// writes this method into an informer-gen factory's package, where it may
// read the factory's fields:
//
//	go run github.com/freshinformer/freshinformer/cmd/scope-gen pkg/generated/informers/externalversions
type ListScoper interface {
	ListScope() (namespace string, tweak func(*metav1.ListOptions))
}

// ScopedFactory is an informer-gen factory with the namespace and list
// options tweak it was made with, as Scoped returns it: a factory for
// InformerFor and ClusterInformerFor, which delegates to the factory.
type ScopedFactory[F any, G genericInformer] struct {
	factory   generatedFactory[F, G]
	namespace string
	tweak     func(*metav1.ListOptions)
}

// Scoped tells InformerFor and ClusterInformerFor what factory lists, for
// a generated factory without the ListScope method of cmd/scope-gen: pass
// the namespace and tweak the factory was made with (empty and nil for
// informer-gen's defaults, all namespaces and no tweak):
//
//	factory := informers.NewSharedInformerFactoryWithOptions(clientset, resync,
//		informers.WithNamespace(ns), informers.WithTweakListOptions(tweak))
//	counters, err := cache.InformerFor(cache.Scoped(factory, ns, tweak), clientset.CountingV1alpha1().Counters)
//
// The informer lists what Scoped was told: nothing outside the generated
// package can read the factory's own. If the factory has ListScope as
// well, InformerFor checks that the two agree (ErrScopeMismatch).
func Scoped[F any, G genericInformer](factory generatedFactory[F, G], namespace string, tweak func(*metav1.ListOptions)) ScopedFactory[F, G] {
	return ScopedFactory[F, G]{factory: factory, namespace: namespace, tweak: tweak}
}

// InformerFor is the factory's InformerFor.
func (s ScopedFactory[F, G]) InformerFor(obj runtime.Object, newFunc F) toolscache.SharedIndexInformer {
	return s.factory.InformerFor(obj, newFunc)
}

// ForResource is the factory's ForResource.
func (s ScopedFactory[F, G]) ForResource(resource schema.GroupVersionResource) (G, error) {
	return s.factory.ForResource(resource)
}

// ListScope returns the namespace and tweak given to Scoped.
func (s ScopedFactory[F, G]) ListScope() (namespace string, tweak func(*metav1.ListOptions)) {
	return s.namespace, s.tweak
}

// wrapped returns the factory Scoped was given.
func (s ScopedFactory[F, G]) wrapped() any { return s.factory }

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
// The factory's namespace and tweak come from its ListScope method, which
// cmd/scope-gen writes into the generated package (run it after
// informer-gen), or from Scoped, which takes them from the caller:
//
//	counters, err := cache.InformerFor(cache.Scoped(factory, ns, tweak), clientset.CountingV1alpha1().Counters)
//
// It fails, matching ErrNotFreshInformer, if the factory already made its
// informer of the kind (an accessor, a lister or ForResource asked first):
// call it right after making the factory. It fails matching
// ErrUnsupportedFactory if the factory says nothing of its scope (neither
// ListScope nor Scoped: an informer listing the wrong namespace would go
// unnoticed), matching ErrScopeMismatch if Scoped's scope differs from the
// factory's ListScope, and matching ErrUnknownResource if the factory
// serves the kind under another resource than the one named (the informer
// is then the factory's, named wrong: pass WithResource). It relies on
// informer-gen's InformerFor making one informer per type and handing it
// to every accessor (code-generator 0.35 to 0.37).
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
	var o Options
	for _, opt := range opts {
		opt(&o)
	}
	return internalfactory.InformerFor[F, C, G, T, L](factory, client, namespaced, internalfactory.Generated[*FreshInformer]{
		Resource: o.Resource, New: newFromSpec(opts), Of: FreshInformerOf,
		Unwrap: func(factory any) (any, bool) {
			w, ok := factory.(interface{ wrapped() any })
			if !ok {
				return nil, false
			}
			return w.wrapped(), true
		},
	})
}
