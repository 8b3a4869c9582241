package factory

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

// recordedRequest is what a test server saw of one request.
type recordedRequest struct {
	method, path, query, accept string
}

// recordingServer answers every request with an error after recording it.
func recordingServer(t *testing.T) (kubernetes.Interface, func() []recordedRequest) {
	t.Helper()
	var mu sync.Mutex
	var seen []recordedRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, recordedRequest{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Accept")})
		mu.Unlock()
		http.Error(w, "recorded", http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	// No client-side rate limit: the tests send hundreds of requests.
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	return client, func() []recordedRequest {
		mu.Lock()
		defer mu.Unlock()
		out := seen
		seen = nil
		return out
	}
}

// The factory's List and Watch send what the typed client sends: same
// method, path, parameters and content negotiation.
func TestRequestsMatchTheTypedClient(t *testing.T) {
	client, requests := recordingServer(t)
	ctx := context.Background()
	opts := metav1.ListOptions{LabelSelector: "a=b", FieldSelector: "metadata.name=x", ResourceVersion: "5", Limit: 7}
	for _, tc := range []struct {
		obj       runtime.Object
		namespace string
		typed     func()
	}{
		{&corev1.Pod{}, "ns", func() {
			_, _ = client.CoreV1().Pods("ns").List(ctx, opts)
			_, _ = client.CoreV1().Pods("ns").Watch(ctx, opts)
		}},
		{&corev1.ConfigMap{}, "", func() {
			_, _ = client.CoreV1().ConfigMaps("").List(ctx, opts)
			_, _ = client.CoreV1().ConfigMaps("").Watch(ctx, opts)
		}},
		{&rbacv1.ClusterRole{}, "", func() {
			_, _ = client.RbacV1().ClusterRoles().List(ctx, opts)
			_, _ = client.RbacV1().ClusterRoles().Watch(ctx, opts)
		}},
	} {
		res, ok := typedResourceOf(tc.obj)
		if !ok {
			t.Fatalf("%T is not in the table", tc.obj)
		}
		tc.typed()
		want := requests()
		list, watch := res.clientFor(client, tc.namespace)
		_, _ = list(ctx, opts)
		_, _ = watch(ctx, opts)
		if got := requests(); len(want) != 2 || !reflect.DeepEqual(got, want) {
			t.Errorf("%T: the factory sent %+v, the typed client %+v", tc.obj, got, want)
		}
	}
}

// Every resource of the table is reached at its path, with protobuf
// preferred as the typed clients do, and its facts agree with the scheme.
func TestEveryTypedResourceIsReachable(t *testing.T) {
	client, requests := recordingServer(t)
	ctx := context.Background()
	for _, res := range allTypedResources() {
		gvks, _, err := scheme.Scheme.ObjectKinds(res.object)
		if err != nil || gvks[0].GroupVersion() != res.gvr.GroupVersion() || gvks[0].Kind != res.kind {
			t.Errorf("%v: scheme says %v, %v", res.gvr, gvks, err)
		}
		if got, ok := objectTypeOf(res.gvr); !ok || got != res.key() {
			t.Errorf("objectTypeOf(%v) = %v", res.gvr, got)
		}
		if got, ok := resourceOfType(res.object); !ok || got != res.gvr {
			t.Errorf("resourceOfType(%T) = %v", res.object, got)
		}
		ns := ""
		if res.namespaced {
			ns = "ns"
		}
		list, _ := res.clientFor(client, ns)
		_, _ = list(ctx, metav1.ListOptions{})
		want := "/apis/" + res.gvr.Group + "/" + res.gvr.Version
		if res.gvr.Group == "" {
			want = "/api/" + res.gvr.Version
		}
		if ns != "" {
			want += "/namespaces/" + ns
		}
		want += "/" + res.gvr.Resource
		got := requests()
		if len(got) != 1 || got[0].path != want || got[0].method != http.MethodGet || !strings.Contains(got[0].accept, "protobuf") {
			t.Errorf("%v: requests %+v, want GET %s preferring protobuf", res.gvr, got, want)
		}
	}
}

// On client-go's fake clientset the factory sends the actions the fake
// typed clients send, and filters by label as they do.
func TestFakeActionsMatchTheTypedClient(t *testing.T) {
	ctx := context.Background()
	labelled := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "in", Labels: map[string]string{"a": "b"}}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "out"}}
	opts := metav1.ListOptions{LabelSelector: "a=b"}

	typed := fake.NewClientset(labelled, other)
	want, err := typed.CoreV1().Pods("ns").List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	w, err := typed.CoreV1().Pods("ns").Watch(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()

	ours := fake.NewClientset(labelled, other)
	res, _ := typedResourceOf(&corev1.Pod{})
	list, watch := res.clientFor(ours, "ns")
	got, err := list(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("listed %+v, the typed fake %+v", got, want)
	}
	w, err = watch(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	if a, b := actionsOf(typed), actionsOf(ours); !reflect.DeepEqual(a, b) {
		t.Fatalf("actions %+v, the typed fake's %+v", b, a)
	}

	for _, res := range allTypedResources() {
		ns := ""
		if res.namespaced {
			ns = "ns"
		}
		list, _ := res.clientFor(fake.NewClientset(), ns)
		got, err := list(ctx, metav1.ListOptions{})
		if err != nil || reflect.TypeOf(got) != reflect.TypeOf(res.newList()) {
			t.Errorf("%v: listed %T, %v", res.gvr, got, err)
		}
	}
}

// actionsOf returns the fake's actions as comparable values.
func actionsOf(c *fake.Clientset) []k8stesting.Action {
	var out []k8stesting.Action
	for _, a := range c.Actions() {
		out = append(out, a.DeepCopy())
	}
	return out
}
