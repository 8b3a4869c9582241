// Package resources names the kind and resource of an object, one way for
// the informers (cache.WithScheme) and for read-your-writes, so that a
// written object and the informer that caches it agree on its resource.
package resources

import (
	"errors"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
)

// ErrUnknown is matched by the error of a lookup that cannot tell which
// resource an object belongs to (cache.ErrUnknownResource is this value).
var ErrUnknown = errors.New("cannot tell the resource of the object")

// Mapper names the resource of an object: its kind is the one it carries
// (unstructured objects, typed ones with TypeMeta set), else Scheme's, else
// client-go's; its resource is RESTMapper's for that kind, else the kind's
// lower-case plural, as client-go guesses it. Either field may be nil.
type Mapper struct {
	Scheme     *runtime.Scheme
	RESTMapper meta.RESTMapper
}

// KindOf returns obj's group, version and kind.
func (m Mapper) KindOf(obj runtime.Object) (schema.GroupVersionKind, error) {
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind != "" && gvk.Version != "" {
		return gvk, nil
	}
	for _, s := range []*runtime.Scheme{m.Scheme, scheme.Scheme} {
		if s == nil {
			continue
		}
		if gvks, _, err := s.ObjectKinds(obj); err == nil && len(gvks) > 0 {
			return gvks[0], nil
		}
	}
	return schema.GroupVersionKind{}, fmt.Errorf("%w: %s is in no scheme given (cache.WithScheme)", ErrUnknown, TypeName(obj))
}

// ResourceFor returns obj's resource.
func (m Mapper) ResourceFor(obj runtime.Object) (schema.GroupVersionResource, error) {
	gvk, err := m.KindOf(obj)
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	if m.RESTMapper != nil {
		mapping, err := m.RESTMapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return schema.GroupVersionResource{}, fmt.Errorf("%w: %s: %w", ErrUnknown, gvk.GroupKind(), err)
		}
		return mapping.Resource, nil
	}
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return plural, nil
}

// TypeName names obj's Go type with its package, for errors.
func TypeName(obj any) string {
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

// String prints a resource as users write it: "secrets",
// "deployments.apps".
func String(gr schema.GroupResource) string {
	if gr.Empty() {
		return "<unnamed resource>"
	}
	return gr.String()
}

// Key is an object's cache key: "namespace/name", or "name" when it is
// cluster-scoped.
func Key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// ResourceVersion returns obj's resource version, "" if it has no object
// metadata.
func ResourceVersion(obj any) string {
	if m, err := meta.Accessor(obj); err == nil {
		return m.GetResourceVersion()
	}
	return ""
}

// Meta returns obj's object metadata for klog.KObj, nil if it has none.
func Meta(obj any) klog.KMetadata {
	if m, err := meta.Accessor(obj); err == nil {
		return m
	}
	return nil
}
