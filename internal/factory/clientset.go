package factory

import (
	"context"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
)

// typedResource is one resource of client-go's typed clientset, as data:
// typed_generated.go has a function per resource returning it.
//
// The factory lists and watches a resource the way its typed client does,
// without calling the typed client: over the group version's REST client
// with client-go's generic client (gentype, which every typed client of
// the clientset is), or, on client-go's fake clientset, with the actions
// its fake typed clients send. A table of closures calling each typed
// client (client.CoreV1().Pods(ns).List) would make the linker keep every
// typed client and its apply configurations, several megabytes, in every
// program; this keeps only the data and one REST client accessor per group
// version.
type typedResource struct {
	gvr        schema.GroupVersionResource
	kind       string // the object's kind: Pod
	namespaced bool
	object     runtime.Object        // an empty object; its type keys the informer
	newList    func() runtime.Object // an empty list: *corev1.PodList
	restClient func(kubernetes.Interface) rest.Interface
}

// key returns what the factory keys the resource's informer by: the
// object's type, as client-go's factory does.
func (r *typedResource) key() reflect.Type { return reflect.TypeOf(r.object) }

// metaObject is what client-go's generic client lists.
type metaObject interface {
	runtime.Object
	metav1.Object
}

// fakeClientset is client-go's fake clientset (k8s.io/client-go/kubernetes/fake),
// known by the methods its fake typed clients call.
type fakeClientset interface {
	Invokes(action k8stesting.Action, defaultReturnObj runtime.Object) (runtime.Object, error)
	InvokesWatch(action k8stesting.Action) (watch.Interface, error)
}

// listerWatcher lists and watches the resource through client, in
// namespace (all if empty), applying tweak to every request.
func (r *typedResource) listerWatcher(client kubernetes.Interface, namespace string, tweak func(*metav1.ListOptions)) toolscache.ListerWatcher {
	if !r.namespaced {
		namespace = ""
	}
	list, watchFn := r.clientFor(client, namespace)
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			if tweak != nil {
				tweak(&opts)
			}
			return list(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			if tweak != nil {
				tweak(&opts)
			}
			return watchFn(ctx, opts)
		},
	}
	// As client-go's factories do: fake clients cannot stream lists.
	return toolscache.ToListWatcherWithWatchListSemantics(lw, client)
}

type (
	listFunc  func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watchFunc func(context.Context, metav1.ListOptions) (watch.Interface, error)
)

// clientFor returns the resource's List and Watch in namespace.
func (r *typedResource) clientFor(client kubernetes.Interface, namespace string) (listFunc, watchFunc) {
	if fake, ok := client.(fakeClientset); ok {
		return r.fakeList(fake, namespace), r.fakeWatch(fake, namespace)
	}
	rc := r.restClient(client)
	if isNil(rc) {
		err := fmt.Errorf("the clientset %T has no REST client for %s", client, r.gvr.GroupVersion())
		return func(context.Context, metav1.ListOptions) (runtime.Object, error) { return nil, err },
			func(context.Context, metav1.ListOptions) (watch.Interface, error) { return nil, err }
	}
	// What the typed client is: gentype.NewClientWithListAndApply over
	// the same REST client, codec and protobuf preference.
	c := gentype.NewClientWithList[metaObject, runtime.Object](r.gvr.Resource, rc, scheme.ParameterCodec, namespace,
		func() metaObject { return r.object.DeepCopyObject().(metaObject) }, r.newList, gentype.PrefersProtobuf[metaObject]())
	list := func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		l, err := c.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		return l, nil
	}
	return list, c.Watch
}

// isNil reports whether v is nil or a nil pointer in an interface, as a
// group client without a REST client returns (*rest.RESTClient)(nil).
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return rv.IsNil()
	}
	return false
}

// fakeList lists as client-go's fake typed clients do: one list action
// answered by the fake's reactors, then the label selector applied.
func (r *typedResource) fakeList(fake fakeClientset, namespace string) listFunc {
	gvk := r.gvr.GroupVersion().WithKind(r.kind)
	return func(_ context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		empty := r.newList()
		obj, err := fake.Invokes(k8stesting.NewListActionWithOptions(r.gvr, gvk, namespace, opts), empty)
		if obj == nil {
			return empty, err
		}
		label, _, _ := k8stesting.ExtractFromListOptions(opts)
		if label == nil {
			return obj, nil
		}
		return filterList(obj, r.newList(), label), err
	}
}

// filterList returns into, with from's list metadata and the items of from
// that label matches.
func filterList(from, into runtime.Object, label labels.Selector) runtime.Object {
	src, err1 := meta.ListAccessor(from)
	dst, err2 := meta.ListAccessor(into)
	items, err3 := meta.ExtractList(from)
	if err1 != nil || err2 != nil || err3 != nil {
		return from
	}
	dst.SetResourceVersion(src.GetResourceVersion())
	dst.SetContinue(src.GetContinue())
	dst.SetRemainingItemCount(src.GetRemainingItemCount())
	dst.SetSelfLink(src.GetSelfLink())
	var kept []runtime.Object
	for _, item := range items {
		m, err := meta.Accessor(item)
		if err != nil {
			continue // no ObjectMeta: nothing can match
		}
		if label.Matches(labels.Set(m.GetLabels())) {
			kept = append(kept, item)
		}
	}
	if err := meta.SetList(into, kept); err != nil {
		return from
	}
	return into
}

// fakeWatch watches as client-go's fake typed clients do.
func (r *typedResource) fakeWatch(fake fakeClientset, namespace string) watchFunc {
	return func(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		opts.Watch = true
		return fake.InvokesWatch(k8stesting.NewWatchActionWithOptions(r.gvr, namespace, opts))
	}
}
