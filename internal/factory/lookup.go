package factory

import (
	"fmt"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/freshinformer/freshinformer/internal/resources"
)

// The lookups of informers made by hand (cache.InformerList) and of
// several sources joined (cache.Sources); package cache keeps their API
// and documentation.

// OfResource returns the informers of infs whose resource is gr, in
// order.
func OfResource[I Informer](infs []I, gr schema.GroupResource) []I {
	var out []I
	for _, inf := range infs {
		if inf.Resource() == gr {
			out = append(out, inf)
		}
	}
	return out
}

// Joined returns the informers of gr that the sources hold (of says
// which a source holds), each once, in the sources' order.
func Joined[S any, I comparable](sources []S, gr schema.GroupResource, of func(S, schema.GroupResource) []I) []I {
	var out []I
	for _, src := range sources {
		for _, inf := range of(src, gr) {
			if !slices.Contains(out, inf) {
				out = append(out, inf)
			}
		}
	}
	return out
}

// resourceResolver is cache.ResourceResolver.
type resourceResolver interface {
	ResourceFor(obj runtime.Object) (schema.GroupResource, error)
}

// FirstResource names obj's resource as the first of the sources that
// resolves resources (a resourceResolver) and can tell; else the last
// error, or one matching resources.ErrUnknown if none could.
func FirstResource[S any](sources []S, obj runtime.Object) (schema.GroupResource, error) {
	err := fmt.Errorf("%w: %s", resources.ErrUnknown, resources.TypeName(obj))
	for _, src := range sources {
		if r, ok := any(src).(resourceResolver); ok {
			gr, rerr := r.ResourceFor(obj)
			if rerr == nil {
				return gr, nil
			}
			err = rerr
		}
	}
	return schema.GroupResource{}, err
}

// ResourceByType finds the resource of the informer whose example object
// (example returns it) has obj's Go type (its reflect.Type: two packages'
// types may print alike); unstructured objects, and types no single
// informer has, are named by their kind instead.
func ResourceByType[I Informer](infs []I, obj runtime.Object, example func(I) runtime.Object) (schema.GroupResource, error) {
	if _, ok := obj.(runtime.Unstructured); !ok {
		var found []schema.GroupResource
		for _, inf := range infs {
			gr := inf.Resource()
			if reflect.TypeOf(example(inf)) == reflect.TypeOf(obj) && !gr.Empty() && !slices.Contains(found, gr) {
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
