package readyourwrites

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/internal/resources"
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
		if gvk, err := (resources.Mapper{}).KindOf(ro); err == nil {
			o.GroupKind = gvk.GroupKind()
			return o
		}
	}
	o.Kind = resources.TypeName(obj)
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

// describe names an informer in errors: its resource, its scope, and its
// name if it has one.
func describe(inf *cache.FreshInformer) string {
	d := resources.String(inf.Resource()) + " informer (" + inf.Selector().String()
	if n := inf.Name(); n != "" {
		d += ", name " + n
	}
	return d + ")"
}
