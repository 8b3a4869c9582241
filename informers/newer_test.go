package informers

import (
	"context"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
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
// table are, sends what the typed client sends, over the core group's REST
// client, and on the fake clientset lists the same.
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

func TestVersionOf(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/pods":                                     "v1",
		"/api/v1/namespaces/ns/pods":                       "v1",
		"/apis/apps/v1/deployments":                        "v1",
		"/prefix/apis/lifecycle.k8s.io/v1alpha1/evictions": "v1alpha1",
		"/apis/apps":                                       "",
		"/api":                                             "",
		"/version":                                         "",
	} {
		if got := versionOf(path); got != want {
			t.Errorf("versionOf(%q) = %q, want %q", path, got, want)
		}
	}
}
