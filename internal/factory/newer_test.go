package factory

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

// The rule that finds a resource's kind in the scheme (schemeObjectOf)
// gives every resource of the table its own type.
func TestSchemeObjectOfFollowsTheTable(t *testing.T) {
	for _, res := range allTypedResources() {
		obj, ok := schemeObjectOf(res.gvr)
		if !ok || reflect.TypeOf(obj) != res.key() {
			t.Errorf("schemeObjectOf(%v) = %T, %v; the table says %T", res.gvr, obj, ok, res.object)
		}
	}
	for _, gvr := range []schema.GroupVersionResource{
		{Version: "v1", Resource: "nosuchthings"},
		{Group: "no.such.group", Version: "v1", Resource: "pods"},
		{Version: "v1", Resource: "listoptions"},
	} {
		if obj, ok := schemeObjectOf(gvr); ok {
			t.Errorf("schemeObjectOf(%v) = %T", gvr, obj)
		}
	}
}

// A table resource described from the scheme, as resources outside the
// table are, sends what the typed client sends, over a REST client of its
// group version made by client-go's rest package, and on the fake
// clientset lists the same.
func TestSchemeResourceMatchesTheTable(t *testing.T) {
	client, requests := recordingServer(t)
	ctx := context.Background()
	opts := metav1.ListOptions{LabelSelector: "a=b", ResourceVersion: "5", Limit: 7}
	fakeClient := fake.NewClientset() // one: each takes a while to make
	for _, res := range allTypedResources() {
		ours, ok := schemeResource(res.gvr, res.kind, res.namespaced)
		if !ok {
			t.Errorf("%v: not described from the scheme", res.gvr)
			continue
		}
		if !reachable(client, ours) || !reachable(fakeClient, ours) {
			t.Fatalf("%v: not reachable", res.gvr)
		}
		ns := ""
		if res.namespaced {
			ns = "ns"
		}
		list, watch := res.clientFor(client, ns)
		_, _ = list(ctx, opts)
		_, _ = watch(ctx, opts)
		want := requests()
		list, watch = ours.clientFor(client, ns)
		_, _ = list(ctx, opts)
		_, _ = watch(ctx, opts)
		if got := requests(); len(want) != 2 || !reflect.DeepEqual(got, want) {
			t.Errorf("%v: sent %+v, the table's client %+v", res.gvr, got, want)
		}
		list, _ = ours.clientFor(fakeClient, ns)
		if got, err := list(ctx, metav1.ListOptions{}); err != nil || reflect.TypeOf(got) != reflect.TypeOf(res.newList()) {
			t.Errorf("%v: listed %T, %v on the fake", res.gvr, got, err)
		}
	}
}

// A clientset of one's own without a core REST client cannot be reached:
// the factory keeps newFunc's plain informer.
func TestSchemeResourceNeedsACoreRESTClient(t *testing.T) {
	res, _ := schemeResource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "Pod", true)
	if reachable(noREST{}, res) {
		t.Fatal("reachable without a REST client")
	}
}

// noREST is a clientset of one's own without a core group client.
type noREST struct{ kubernetes.Interface }

func (noREST) CoreV1() corev1client.CoreV1Interface { return nil }

// outsideTable names every resource the linked client-go's clientset
// lists and watches outside the table, with its scope: the typed client's
// accessor takes a namespace exactly when the resource is namespaced.
func TestOutsideTableMatchesTheClientset(t *testing.T) {
	for i := range reflect.TypeFor[kubernetes.Interface]().NumMethod() {
		gm := reflect.TypeFor[kubernetes.Interface]().Method(i)
		if gm.Type.NumIn() != 0 || gm.Type.NumOut() != 1 || gm.Type.Out(0).Kind() != reflect.Interface {
			continue
		}
		group := gm.Type.Out(0)
		for j := range group.NumMethod() {
			acc := group.Method(j)
			namespaced := acc.Type.NumIn() == 1 && acc.Type.In(0).Kind() == reflect.String
			if acc.Type.NumOut() != 1 || (acc.Type.NumIn() != 0 && !namespaced) {
				continue
			}
			list, ok := acc.Type.Out(0).MethodByName("List")
			if _, watches := acc.Type.Out(0).MethodByName("Watch"); !ok || !watches || list.Type.NumIn() != 2 || list.Type.In(0) != reflect.TypeFor[context.Context]() {
				continue
			}
			items, ok := list.Type.Out(0).Elem().FieldByName("Items")
			if !ok {
				continue
			}
			obj := reflect.New(items.Type.Elem()).Interface().(runtime.Object)
			if _, inTable := typedResourceOf(obj); inTable {
				continue
			}
			gvks, _, err := scheme.Scheme.ObjectKinds(obj)
			if err != nil {
				t.Fatal(err)
			}
			gvr, _ := meta.UnsafeGuessKindToResource(gvks[0])
			if want, ok := outsideTable()[gvr]; !ok || want != namespaced {
				t.Errorf("%s().%s(): outsideTable[%v] = %v, %v; the clientset says namespaced=%v", gm.Name, acc.Name, gvr, want, ok, namespaced)
			}
		}
	}
}

// A resource's group version client is client-go's REST client of that
// group version, on the core client's server (path prefix included) and
// sharing its rate limiter.
func TestGroupVersionClientIsARESTClientOfTheGroupVersion(t *testing.T) {
	for _, host := range []string{"https://example.invalid", "https://example.invalid/prefix/"} {
		client, err := kubernetes.NewForConfig(&rest.Config{Host: host, QPS: 7, Burst: 3})
		if err != nil {
			t.Fatal(err)
		}
		for _, gv := range []schema.GroupVersion{{Group: "lifecycle.k8s.io", Version: "v1alpha1"}, {Version: "v1"}} {
			rc, ok := groupVersionClient(client, gv).(*rest.RESTClient)
			if !ok {
				t.Fatalf("%s %v: %T, not a *rest.RESTClient", host, gv, rc)
			}
			want := strings.TrimSuffix(host, "/") + rest.DefaultVersionedAPIPath(map[bool]string{true: "/api", false: "/apis"}[gv.Group == ""], gv) + "/namespaces/ns/things"
			if got := rc.Get().Namespace("ns").Resource("things").URL().String(); got != want || rc.APIVersion() != gv {
				t.Errorf("%s %v: %s at %v; want %s", host, gv, got, rc.APIVersion(), want)
			}
			if rc.GetRateLimiter() != client.CoreV1().RESTClient().GetRateLimiter() {
				t.Errorf("%s %v: its own rate limiter", host, gv)
			}
		}
	}
}
