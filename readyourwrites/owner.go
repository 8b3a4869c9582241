package readyourwrites

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/freshinformer/freshinformer/cache"
)

// Owner is the object a reconciler works on behalf of: its kind, its
// namespace and name, and its UID, which tells a recreated owner from its
// predecessor. Owners of different kinds never share records, so one
// ReadYourWrites can serve every controller of a process.
type Owner struct {
	schema.GroupKind
	types.NamespacedName
	UID types.UID
}

// OwnerOf returns obj as an Owner. The kind comes from the object's own
// apiVersion and kind when set (unstructured objects), else from
// client-go's scheme; a type no scheme knows is told apart by its Go type
// (package path and name).
func OwnerOf(obj metav1.Object) Owner {
	o := Owner{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}, UID: obj.GetUID()}
	if ro, ok := obj.(runtime.Object); ok {
		if gvk, err := (resolver{}).kindOf(ro); err == nil {
			o.GroupKind = gvk.GroupKind()
			return o
		}
	}
	o.Kind = typeName(obj)
	return o
}

// String prints the owner as "Deployment.apps ns/web".
func (o Owner) String() string {
	if o.GroupKind.Empty() {
		return o.NamespacedName.String()
	}
	return o.GroupKind.String() + " " + o.NamespacedName.String()
}

// ownerKey identifies an owner across recreations.
type ownerKey struct {
	gk schema.GroupKind
	nn types.NamespacedName
}

func (o Owner) key() ownerKey { return ownerKey{o.GroupKind, o.NamespacedName} }

// resolver names the kind and resource of a written object when the
// InformerSource cannot: from the kind the object carries, else the
// caller's scheme's, else client-go's; the resource from the caller's
// RESTMapper, else the kind's lower-case plural (client-go's guess). The
// informers name theirs the same way (cache.WithScheme).
type resolver struct {
	scheme *runtime.Scheme
	mapper meta.RESTMapper
}

func (r resolver) kindOf(obj runtime.Object) (schema.GroupVersionKind, error) {
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind != "" && gvk.Version != "" {
		return gvk, nil
	}
	for _, s := range []*runtime.Scheme{r.scheme, scheme.Scheme} {
		if s == nil {
			continue
		}
		if gvks, _, err := s.ObjectKinds(obj); err == nil && len(gvks) > 0 {
			return gvks[0], nil
		}
	}
	return schema.GroupVersionKind{}, fmt.Errorf("%w: %s is in no scheme given (Options.Scheme)", cache.ErrUnknownResource, typeName(obj))
}

func (r resolver) resourceFor(obj runtime.Object) (schema.GroupResource, error) {
	gvk, err := r.kindOf(obj)
	if err != nil {
		return schema.GroupResource{}, err
	}
	if r.mapper != nil {
		mapping, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return schema.GroupResource{}, fmt.Errorf("%w: %s: %w", cache.ErrUnknownResource, gvk.GroupKind(), err)
		}
		return mapping.Resource.GroupResource(), nil
	}
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return plural.GroupResource(), nil
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

// objectKey is obj's cache key: "ns/name", or "name" when cluster-scoped.
func objectKey(obj metav1.Object) string {
	return keyOf(types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()})
}

func keyOf(nn types.NamespacedName) string {
	if nn.Namespace == "" {
		return nn.Name
	}
	return nn.Namespace + "/" + nn.Name
}

// describe names an informer in errors: its resource, its scope, and its
// name if it has one.
func describe(inf *cache.FreshInformer) string {
	d := resourceString(inf.Resource()) + " informer (" + inf.Selector().String()
	if n := inf.Name(); n != "" {
		d += ", name " + n
	}
	return d + ")"
}
