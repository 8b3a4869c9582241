package factory

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// Code-generated informer factories (informer-gen's, as sample-controller's
// pkg/generated/informers/externalversions) make their informers inline,
// over their own clientset: there is no constructor to swap. InformerFor
// and ClusterInformerFor put a FreshInformer in such a factory instead,
// through the one door every generated accessor goes through: the
// factory's InformerFor(obj, newFunc), whose first call for a type decides.
// They rely on this shape of the generated code (code-generator's 0.35 to
// 0.37 output has it), all of it exported:
//
//   - its InformerFor(obj, newFunc) calls newFunc(clientset, resync) once
//     per type, with its custom resync for the type, sets its transform on
//     what newFunc returns, and hands that to every accessor and lister;
//   - its ForResource(gvr) returns that informer for the kind's resource;
//   - the typed client of a kind (clientset.GroupVersion().Kinds(namespace))
//     has List and Watch, as gentype's clients have.
//
// What the factory lists, its WithNamespace and WithTweakListOptions, is
// in unexported fields that nothing outside the generated package may
// read. The factory says it through a ListScope method, which
// cmd/scope-gen writes into the generated package, or the caller says it
// (cache.Scoped).

// ErrUnsupportedFactory is cache.ErrUnsupportedFactory: a factory that does
// not say what it lists.
var ErrUnsupportedFactory = errors.New("not an informer-gen factory that says what it lists")

// ListItem returns an empty item of the list type L (*FooList: a *Foo).
func ListItem[L runtime.Object]() (runtime.Object, error) {
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

// TypedResource names the resource client lists: the fake typed client's,
// or the group version of client's REST client with obj's kind's plural as
// client-gen makes it; override, when set, names the group and resource.
func TypedResource(client any, obj runtime.Object, override schema.GroupResource) (schema.GroupVersionResource, error) {
	if fake, ok := client.(interface {
		Resource() schema.GroupVersionResource
	}); ok {
		gvr := fake.Resource()
		if !override.Empty() {
			gvr.Group, gvr.Resource = override.Group, override.Resource
		}
		return gvr, nil
	}
	rc, ok := client.(interface{ GetClient() rest.Interface })
	if !ok || rc.GetClient() == nil {
		return schema.GroupVersionResource{}, fmt.Errorf("%w: the typed client %T has no REST client to name its group version", ErrUnsupportedFactory, client)
	}
	gvr := rc.GetClient().APIVersion().WithResource(pluralOf(reflect.TypeOf(obj).Elem().Name()))
	if !override.Empty() {
		gvr.Group, gvr.Resource = override.Group, override.Resource
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
