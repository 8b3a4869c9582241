package cache

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/internal/factory"
	"github.com/freshinformer/freshinformer/internal/resources"
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
	var out []*FreshInformer
	for _, inf := range l {
		if inf.Resource() == gr {
			out = append(out, inf)
		}
	}
	return out
}

// Sources joins InformerSources (two factories, say).
type Sources []InformerSource

// FreshInformersForResource implements InformerSource.
func (s Sources) FreshInformersForResource(gr schema.GroupResource) []*FreshInformer {
	var out []*FreshInformer
	for _, src := range s {
		for _, inf := range src.FreshInformersForResource(gr) {
			if !slices.Contains(out, inf) {
				out = append(out, inf)
			}
		}
	}
	return out
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
	return resourceByType(l, obj)
}

// ResourceFor implements ResourceResolver: the first source that can tell.
func (s Sources) ResourceFor(obj runtime.Object) (schema.GroupResource, error) {
	err := fmt.Errorf("%w: %s", ErrUnknownResource, resources.TypeName(obj))
	for _, src := range s {
		if r, ok := src.(ResourceResolver); ok {
			gr, rerr := r.ResourceFor(obj)
			if rerr == nil {
				return gr, nil
			}
			err = rerr
		}
	}
	return schema.GroupResource{}, err
}

// resourceByType finds the resource of the informer whose example object
// has obj's Go type (its reflect.Type: two packages' types may print
// alike); unstructured objects, and types no single informer has, are
// named by their kind instead.
func resourceByType(infs []*FreshInformer, obj runtime.Object) (schema.GroupResource, error) {
	if _, ok := obj.(runtime.Unstructured); !ok {
		var found []schema.GroupResource
		for _, inf := range infs {
			gr := inf.Resource()
			if reflect.TypeOf(inf.cfg.objectType) == reflect.TypeOf(obj) && !gr.Empty() && !slices.Contains(found, gr) {
				found = append(found, gr)
			}
		}
		if len(found) == 1 {
			return found[0], nil
		}
	}
	gvr, err := (resources.Mapper{}).ResourceFor(obj)
	return gvr.GroupResource(), err
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
