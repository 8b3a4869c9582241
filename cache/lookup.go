package cache

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/internal/factory"
)

// ErrNotWatched is matched by Admits' error for an object outside the
// informer's scope (its namespace, label or field selector), and so by the
// errors of lookups that find no informer that will ever see a written
// object: waiting for it would only time out. Package readyourwrites
// returns it for such writes (cache.ErrNotWatched is this value).
var ErrNotWatched = errors.New("written object is outside every informer's selector")

// InformerSource finds the informers that cache a resource. Both factories
// implement it; InformerList is a fixed one and Sources joins several.
type InformerSource interface {
	// FreshInformersForResource returns every informer of gr (several:
	// one per namespace, a filtered and an unfiltered one, ...), in a
	// stable order; none if there are none.
	FreshInformersForResource(gr schema.GroupResource) []*FreshInformer
}

// InformerList is an InformerSource over informers made by hand, any
// number per resource (each informer's Resource says which).
type InformerList []*FreshInformer

// FreshInformersForResource implements InformerSource.
func (l InformerList) FreshInformersForResource(gr schema.GroupResource) []*FreshInformer {
	return factory.OfResource(l, gr)
}

// Sources joins InformerSources (two factories, say).
type Sources []InformerSource

// FreshInformersForResource implements InformerSource.
func (s Sources) FreshInformersForResource(gr schema.GroupResource) []*FreshInformer {
	return factory.Joined(s, gr, InformerSource.FreshInformersForResource)
}

// ResourceResolver is implemented by InformerSources that can tell the
// resource of a written object (both factories can); package
// readyourwrites uses it to route a written object without being told its
// resource.
type ResourceResolver interface {
	ResourceFor(obj runtime.Object) (schema.GroupResource, error)
}

// ResourceFor implements ResourceResolver by the informers' example
// objects' Go types.
func (l InformerList) ResourceFor(obj runtime.Object) (schema.GroupResource, error) {
	return factory.ResourceByType(l, obj, func(inf *FreshInformer) runtime.Object { return inf.cfg.objectType })
}

// ResourceFor implements ResourceResolver: the first source that can tell.
func (s Sources) ResourceFor(obj runtime.Object) (schema.GroupResource, error) {
	return factory.FirstResource(s, obj)
}

// FreshInformerOf returns the FreshInformer behind inf: inf itself, or the
// one inside a wrapper that delegates to it, such as the typed view that
// client-go's generated accessors return
// (factory.Core().V1().Pods().Informer()). It reads no private fields:
// the FreshInformer answers for itself through the wrapper's GetController.
func FreshInformerOf(inf toolscache.SharedInformer) (*FreshInformer, bool) {
	if inf == nil {
		return nil, false
	}
	if f, ok := inf.(*FreshInformer); ok {
		return f, true
	}
	if v, ok := inf.GetController().(controllerView); ok {
		return v.f, true
	}
	return nil, false
}

// ErrNotFreshInformer is matched by WaitForFreshness's error for an
// informer that cannot wait for freshness.
var ErrNotFreshInformer = factory.ErrNotFreshInformer

// WaitForFreshness waits until inf has applied rv: inf may be a
// FreshInformer, a WrappedInformer, or a typed view of a FreshInformer as
// client-go's generated accessors return it, so the common path is one
// call:
//
//	err := cache.WaitForFreshness(ctx, factory.Core().V1().ConfigMaps().Informer(), rv)
//
// Errors are FreshInformer.WaitForFreshness's, or one matching
// ErrNotFreshInformer at once for any other informer.
func WaitForFreshness(ctx context.Context, inf toolscache.SharedInformer, rv string) error {
	if w, ok := inf.(interface {
		WaitForFreshness(context.Context, string) error
	}); ok {
		return w.WaitForFreshness(ctx, rv)
	}
	if f, ok := FreshInformerOf(inf); ok {
		return f.WaitForFreshness(ctx, rv)
	}
	return fmt.Errorf("%w: %T", ErrNotFreshInformer, inf)
}
