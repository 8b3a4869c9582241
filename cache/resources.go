package cache

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
)

// ErrUnknownResource is matched by the error of a lookup that cannot tell
// which resource an object belongs to: its kind is in no scheme it was
// given, or no RESTMapper maps it. Pass the scheme and RESTMapper that know
// the type (WithScheme), or name the resource explicitly (Record,
// WithResource).
var ErrUnknownResource = errors.New("cannot tell the resource of the object")

// WithScheme tells the informer (or, through WithInformerOptions, a
// factory and the ReadYourWrites over it) how to name the resource of
// types that client-go's scheme does not know: kubebuilder CRD structs, say.
// The kind comes from s (then from client-go's scheme), the resource from
// mapper when it is not nil (else from the kind's lower-case plural, as
// client-go guesses it). Either may be nil.
func WithScheme(s *runtime.Scheme, mapper meta.RESTMapper) Option {
	return func(o *Options) { o.resourceMapper = resourceMapper{scheme: s, mapper: mapper} }
}

// resourceMapper names the resource of an object.
type resourceMapper struct {
	scheme *runtime.Scheme
	mapper meta.RESTMapper
}

// kindOf returns obj's group-version-kind: the one it carries (unstructured
// objects, typed ones with TypeMeta set), else the caller's scheme's, else
// client-go's.
func (m resourceMapper) kindOf(obj runtime.Object) (schema.GroupVersionKind, error) {
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind != "" && gvk.Version != "" {
		return gvk, nil
	}
	for _, s := range []*runtime.Scheme{m.scheme, scheme.Scheme} {
		if s == nil {
			continue
		}
		if gvks, _, err := s.ObjectKinds(obj); err == nil && len(gvks) > 0 {
			return gvks[0], nil
		}
	}
	return schema.GroupVersionKind{}, fmt.Errorf("%w: %s is in no scheme given (cache.WithScheme)", ErrUnknownResource, typeName(obj))
}

// resourceFor returns obj's resource.
func (m resourceMapper) resourceFor(obj runtime.Object) (schema.GroupVersionResource, error) {
	gvk, err := m.kindOf(obj)
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	if m.mapper != nil {
		mapping, err := m.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return schema.GroupVersionResource{}, fmt.Errorf("%w: %s: %w", ErrUnknownResource, gvk.GroupKind(), err)
		}
		return mapping.Resource, nil
	}
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return plural, nil
}

// exampleResource names an informer's resource from its example object;
// the zero GroupResource when it cannot, never a Go type name.
func exampleResource(obj runtime.Object, o Options) schema.GroupResource {
	gvr, err := o.resourceMapper.resourceFor(obj)
	if err != nil {
		return schema.GroupResource{}
	}
	return gvr.GroupResource()
}

// typeName names obj's Go type with its package, for errors and as the
// last resort of OwnerOf.
func typeName(obj any) string {
	t := reflect.TypeOf(obj)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "<nil>"
	}
	if t.PkgPath() == "" {
		return t.String()
	}
	return t.PkgPath() + "." + t.Name()
}

// resourceString prints a resource as users write it: "secrets",
// "deployments.apps".
func resourceString(gr schema.GroupResource) string {
	if gr.Empty() {
		return "<unnamed resource>"
	}
	return gr.String()
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
var ErrNotFreshInformer = errors.New("the informer is not freshness-aware")

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
