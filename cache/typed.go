package cache

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
)

// typedResource is how a typed clientset reaches one resource: the group
// client's accessor (Pods(namespace), Nodes()) whose List returns a list of
// the resource's objects. Finding it by the types the accessor returns, not
// by guessing names, works for the real clientset and for client-go's fakes
// alike (whose RESTClient is nil).
type typedResource struct {
	gvr        schema.GroupVersionResource
	object     reflect.Type // the object's struct type, e.g. corev1.Pod
	groupCall  string       // the clientset method, e.g. "CoreV1"
	accessor   string       // the group client method, e.g. "Pods"
	namespaced bool
}

var typedResources sync.Map // key: typedKey → *typedResource

type typedKey struct {
	client reflect.Type
	object reflect.Type // or nil when looking up by resource
	gvr    schema.GroupVersionResource
}

var (
	listOptionsType = reflect.TypeFor[metav1.ListOptions]()
	contextType     = reflect.TypeFor[context.Context]()
	errorType       = reflect.TypeFor[error]()
	watchType       = reflect.TypeFor[watch.Interface]()
)

// groupCall names the clientset method of a group version: "" v1 is
// CoreV1, apps/v1 AppsV1, rbac.authorization.k8s.io/v1 RbacV1.
func groupCall(gv schema.GroupVersion) string {
	group, _, _ := strings.Cut(gv.Group, ".")
	if group == "" {
		group = "core"
	}
	return upperFirst(group) + upperFirst(gv.Version)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	r := []rune(s)
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}

// resolveTyped finds the resource of obj (or, with obj nil, of gvr) in the
// typed clientset.
func resolveTyped(client kubernetes.Interface, obj runtime.Object, gvr schema.GroupVersionResource) (*typedResource, error) {
	key := typedKey{client: reflect.TypeOf(client), gvr: gvr}
	var gv schema.GroupVersion
	if obj != nil {
		key.object, key.gvr = reflect.TypeOf(obj), schema.GroupVersionResource{}
		gvks, _, err := scheme.Scheme.ObjectKinds(obj)
		if err != nil {
			return nil, fmt.Errorf("%T is not a type of client-go's clientset: %w", obj, err)
		}
		gv = gvks[0].GroupVersion()
	} else {
		gv = gvr.GroupVersion()
	}
	if r, ok := typedResources.Load(key); ok {
		return r.(*typedResource), nil
	}

	call := groupCall(gv)
	m := reflect.ValueOf(client).MethodByName(call)
	if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 {
		return nil, fmt.Errorf("the clientset has no %s() for %s", call, gv)
	}
	groupClient := m.Type().Out(0)
	for i := range groupClient.NumMethod() {
		acc := groupClient.Method(i)
		namespaced := acc.Type.NumIn() == 1 && acc.Type.In(0).Kind() == reflect.String
		if (acc.Type.NumIn() != 0 && !namespaced) || acc.Type.NumOut() != 1 {
			continue
		}
		item, ok := listItemType(acc.Type.Out(0))
		if !ok {
			continue
		}
		resource := strings.ToLower(acc.Name)
		if (obj != nil && reflect.PointerTo(item) == key.object) || (obj == nil && resource == gvr.Resource) {
			r := &typedResource{
				gvr:        gv.WithResource(resource),
				object:     item,
				groupCall:  call,
				accessor:   acc.Name,
				namespaced: namespaced,
			}
			typedResources.Store(key, r)
			return r, nil
		}
	}
	if obj != nil {
		return nil, fmt.Errorf("the clientset's %s() has no resource listing %T", call, obj)
	}
	return nil, fmt.Errorf("the clientset's %s() has no resource %q", call, gvr.Resource)
}

// listItemType returns T when resourceClient has
// List(context.Context, metav1.ListOptions) (*TList, error) with
// TList.Items []T, and Watch of the same shape.
func listItemType(resourceClient reflect.Type) (reflect.Type, bool) {
	list, ok := resourceClient.MethodByName("List")
	if !ok || list.Type.NumIn() != 2 || list.Type.In(0) != contextType || list.Type.In(1) != listOptionsType ||
		list.Type.NumOut() != 2 || list.Type.Out(1) != errorType || list.Type.Out(0).Kind() != reflect.Pointer {
		return nil, false
	}
	w, ok := resourceClient.MethodByName("Watch")
	if !ok || w.Type.NumOut() != 2 || w.Type.Out(0) != watchType {
		return nil, false
	}
	items, ok := list.Type.Out(0).Elem().FieldByName("Items")
	if !ok || items.Type.Kind() != reflect.Slice {
		return nil, false
	}
	return items.Type.Elem(), true
}

// newObject returns a new, empty object of the resource.
func (r *typedResource) newObject() runtime.Object {
	return reflect.New(r.object).Interface().(runtime.Object)
}

// listerWatcher lists and watches the resource through the typed client,
// in namespace (all if empty), applying tweak to every request.
func (r *typedResource) listerWatcher(client kubernetes.Interface, namespace string, tweak func(*metav1.ListOptions)) toolscache.ListerWatcher {
	resourceClient := func() reflect.Value {
		group := reflect.ValueOf(client).MethodByName(r.groupCall).Call(nil)[0]
		var args []reflect.Value
		if r.namespaced {
			args = []reflect.Value{reflect.ValueOf(namespace)}
		}
		return group.MethodByName(r.accessor).Call(args)[0]
	}
	call := func(ctx context.Context, method string, opts metav1.ListOptions) (any, error) {
		if tweak != nil {
			tweak(&opts)
		}
		out := resourceClient().MethodByName(method).Call([]reflect.Value{reflect.ValueOf(ctx), reflect.ValueOf(opts)})
		if err, _ := out[1].Interface().(error); err != nil {
			return nil, err
		}
		return out[0].Interface(), nil
	}
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			obj, err := call(ctx, "List", opts)
			if err != nil {
				return nil, err
			}
			return obj.(runtime.Object), nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := call(ctx, "Watch", opts)
			if err != nil {
				return nil, err
			}
			return w.(watch.Interface), nil
		},
	}
	// As client-go's factories do: fake clients cannot stream lists.
	return toolscache.ToListWatcherWithWatchListSemantics(lw, client)
}
