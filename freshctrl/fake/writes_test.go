package fake_test

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/freshinformer/freshinformer/freshctrl"
	"github.com/freshinformer/freshinformer/freshctrl/fake"
	"github.com/freshinformer/freshinformer/freshness"
)

// TestApply: server-side apply works as on controller-runtime's fake
// (owners' fields merge), and a cached read after it reflects it.
func TestApply(t *testing.T) {
	ctx := waitCtx(t)
	c := newClient(t, fake.NewClientBuilder())
	key := client.ObjectKey{Namespace: "ns", Name: "x"}
	first := corev1ac.ConfigMap(key.Name, key.Namespace).WithData(map[string]string{"a": "1"})
	if err := c.Apply(ctx, first, client.FieldOwner("one")); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, key, &corev1.ConfigMap{}); err != nil { // the informer runs
		t.Fatal(err)
	}
	c.PauseInformers()
	second := corev1ac.ConfigMap(key.Name, key.Namespace).WithData(map[string]string{"b": "2"})
	if err := c.Apply(ctx, second, client.FieldOwner("two")); err != nil {
		t.Fatal(err)
	}
	if *second.ResourceVersion == *first.ResourceVersion {
		t.Fatalf("the second apply kept resource version %s", *second.ResourceVersion)
	}
	if err := c.Get(ctx, key, &corev1.ConfigMap{}, freshctrl.FailIfNotFresh); !errors.Is(err, freshness.ErrNotFresh) {
		t.Fatalf("FailIfNotFresh after an apply with the cache paused: %v", err)
	}
	c.ResumeInformers()
	var got corev1.ConfigMap
	if err := c.Get(ctx, key, &got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != *second.ResourceVersion || got.Data["a"] != "1" || got.Data["b"] != "2" {
		t.Fatalf("after two applies: rv %q (applied %q) data %v", got.ResourceVersion, *second.ResourceVersion, got.Data)
	}
}

// TestUnstructuredWrites: an unstructured object of a typed kind comes back
// from Create, Update and Status().Update with the resource version the
// server stored, so it can be written again; unstructured reads, from the
// server or (client.CacheOptions.Unstructured) from the cache, reflect the
// writes.
func TestUnstructuredWrites(t *testing.T) {
	for _, cached := range []bool{false, true} {
		ctx := waitCtx(t)
		c := newClient(t, fake.NewClientBuilder().
			WithStatusSubresource(&corev1.Pod{}).
			WithClientCacheOptions(client.CacheOptions{Unstructured: cached}))
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
		u.SetNamespace("ns")
		u.SetName("p")
		check := func(step string) {
			t.Helper()
			var stored corev1.Pod
			if err := c.Server().Get(ctx, client.ObjectKeyFromObject(u), &stored); err != nil {
				t.Fatal(err)
			}
			if u.GetResourceVersion() != stored.ResourceVersion || u.GetUID() != stored.UID {
				t.Fatalf("cached=%v: after %s the object says rv %q uid %q, the server %q %q", cached, step, u.GetResourceVersion(), u.GetUID(), stored.ResourceVersion, stored.UID)
			}
			read := &unstructured.Unstructured{}
			read.SetGroupVersionKind(u.GroupVersionKind())
			if err := c.Get(ctx, client.ObjectKeyFromObject(u), read); err != nil {
				t.Fatal(err)
			}
			if read.GetResourceVersion() != stored.ResourceVersion {
				t.Fatalf("cached=%v: after %s an unstructured read has rv %q, want %q", cached, step, read.GetResourceVersion(), stored.ResourceVersion)
			}
		}
		if err := c.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
		check("Create")
		u.SetLabels(map[string]string{"a": "b"})
		if err := c.Update(ctx, u); err != nil {
			t.Fatalf("cached=%v: Update after Create: %v", cached, err)
		}
		check("Update")
		if err := unstructured.SetNestedField(u.Object, "Running", "status", "phase"); err != nil {
			t.Fatal(err)
		}
		if err := c.Status().Update(ctx, u); err != nil {
			t.Fatalf("cached=%v: Status().Update after Update: %v", cached, err)
		}
		check("Status().Update")
		if phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); phase != "Running" {
			t.Fatalf("cached=%v: status phase %q", cached, phase)
		}
	}
}

// TestIndexAndInterceptors: WithIndex serves cached Lists by field, and
// they reflect the client's writes; WithInterceptorFuncs sees the writes.
func TestIndexAndInterceptors(t *testing.T) {
	ctx := waitCtx(t)
	var creates int
	c := newClient(t, fake.NewClientBuilder().
		WithIndex(&corev1.ConfigMap{}, "owner", func(o client.Object) []string { return []string{o.GetLabels()["owner"]} }).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			creates++
			return cl.Create(ctx, obj, opts...)
		}}))
	for _, owner := range []string{"a", "b", "a"} {
		cm := configMap("ns", "", map[string]string{"owner": owner})
		cm.GenerateName = "cm-"
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, client.MatchingFields{"owner": "a"}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Fatalf("cached List by index: %d items, want 2", len(list.Items))
	}
	if creates != 3 {
		t.Fatalf("the interceptor saw %d creates, want 3", creates)
	}
}
