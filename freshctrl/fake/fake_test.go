package fake_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/freshinformer/freshinformer/freshctrl"
	"github.com/freshinformer/freshinformer/freshctrl/fake"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/readyourwrites"
)

// waitCtx bounds a test's waits generously: it is a failure bound, never
// what a test measures.
func waitCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newClient(t *testing.T, b *fake.ClientBuilder) *fake.Client {
	t.Helper()
	c := b.Build()
	t.Cleanup(c.Stop)
	return c
}

func configMap(ns, name string, lbls map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}}
}

func rvOf(t *testing.T, obj client.Object) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	if err != nil || n == 0 {
		t.Fatalf("%s has resource version %q, want a server's", obj.GetName(), obj.GetResourceVersion())
	}
	return n
}

// configMapInformer returns the cache's (one, cluster-wide) typed
// ConfigMap informer.
func configMapInformer(t *testing.T, c *fake.Client) freshctrl.ScopedInformer {
	t.Helper()
	if c.Cache() == nil {
		t.Fatal("the fake has no freshctrl cache")
	}
	for _, si := range c.Cache().FreshInformers() {
		if si.Resource.Resource == "configmaps" && si.Representation == freshctrl.Typed {
			return si
		}
	}
	t.Fatal("no ConfigMap informer")
	return freshctrl.ScopedInformer{}
}

// notReturned checks that ch has nothing yet. It can only miss a defect
// (a result that would come later), never flag a correct run.
func notReturned(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s returned (%v) while the cache was paused behind the write", what, err)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestReadsComeFromTheCache: cached reads are the informers', not the
// server's: a write by someone else (Server) while the informers are
// paused is not seen, and is once they resume.
func TestReadsComeFromTheCache(t *testing.T) {
	ctx := waitCtx(t)
	seed := configMap("ns", "a", nil)
	c := newClient(t, fake.NewClientBuilder().WithObjects(seed))
	key := client.ObjectKeyFromObject(seed)
	var before corev1.ConfigMap
	if err := c.Get(ctx, key, &before); err != nil {
		t.Fatal(err)
	}
	c.PauseInformers()
	other := before.DeepCopy()
	other.Data = map[string]string{"by": "someone else"}
	if err := c.Server().Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	var during corev1.ConfigMap
	if err := c.Get(ctx, key, &during); err != nil {
		t.Fatal(err)
	}
	if during.ResourceVersion != before.ResourceVersion || during.Data != nil {
		t.Fatalf("paused cache served %q %v, want the old %q: reads are not the cache's", during.ResourceVersion, during.Data, before.ResourceVersion)
	}
	c.ResumeInformers()
	if err := configMapInformer(t, c).Informer.WaitForFreshness(ctx, other.ResourceVersion); err != nil {
		t.Fatal(err)
	}
	var after corev1.ConfigMap
	if err := c.Get(ctx, key, &after); err != nil {
		t.Fatal(err)
	}
	if after.Data["by"] != "someone else" {
		t.Fatalf("resumed cache serves %v", after.Data)
	}
}

// TestReadYourWrites: a cached read after a write through the client
// reflects it, whatever the informer's pace: a read that starts while the
// informers are paused waits until they resume.
func TestReadYourWrites(t *testing.T) {
	ctx := waitCtx(t)
	c := newClient(t, fake.NewClientBuilder())
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, client.InNamespace("ns")); err != nil { // the informer runs
		t.Fatal(err)
	}
	created := configMap("ns", "a", nil)
	if err := c.Create(ctx, created); err != nil {
		t.Fatal(err)
	}
	rvOf(t, created)
	var got corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKeyFromObject(created), &got); err != nil {
		t.Fatalf("Get after Create: %v", err)
	}
	if got.ResourceVersion != created.ResourceVersion || got.UID != created.UID || got.UID == "" {
		t.Fatalf("Get after Create: rv %q uid %q, want %q %q", got.ResourceVersion, got.UID, created.ResourceVersion, created.UID)
	}

	c.PauseInformers()
	got.Data = map[string]string{"k": "v"}
	if err := c.Update(ctx, &got); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var read corev1.ConfigMap
	go func() { done <- c.Get(ctx, client.ObjectKeyFromObject(created), &read) }()
	notReturned(t, done, "Get after Update")
	c.ResumeInformers()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if read.ResourceVersion != got.ResourceVersion || read.Data["k"] != "v" {
		t.Fatalf("Get after Update read rv %q data %v, want rv %q", read.ResourceVersion, read.Data, got.ResourceVersion)
	}
	if err := c.List(ctx, &list, client.InNamespace("ns")); err != nil || len(list.Items) != 1 || list.Items[0].ResourceVersion != got.ResourceVersion {
		t.Fatalf("List after Update: %v %+v", err, list.Items)
	}
}

// TestFailIfNotFresh: while the cache is behind the client's write, a
// FailIfNotFresh read fails at once with a *NotFreshError naming the
// write; after the informers resume, it succeeds.
func TestFailIfNotFresh(t *testing.T) {
	ctx := waitCtx(t)
	seed := configMap("ns", "a", nil)
	c := newClient(t, fake.NewClientBuilder().WithObjects(seed))
	key := client.ObjectKeyFromObject(seed)
	var obj corev1.ConfigMap
	if err := c.Get(ctx, key, &obj, freshctrl.FailIfNotFresh); err != nil {
		t.Fatalf("nothing written yet: %v", err)
	}
	c.PauseInformers()
	obj.Data = map[string]string{"k": "v"}
	if err := c.Update(ctx, &obj); err != nil {
		t.Fatal(err)
	}
	err := c.Get(ctx, key, &corev1.ConfigMap{}, freshctrl.FailIfNotFresh)
	var nf *readyourwrites.NotFreshError
	if !errors.Is(err, freshness.ErrNotFresh) || !errors.As(err, &nf) {
		t.Fatalf("FailIfNotFresh Get with the cache behind: got %v, want a *NotFreshError", err)
	}
	if nf.Written != obj.ResourceVersion || nf.Key != key {
		t.Errorf("NotFreshError names %s at %q, want %s at %q", nf.Key, nf.Written, key, obj.ResourceVersion)
	}
	if err := c.List(ctx, &corev1.ConfigMapList{}, freshctrl.FailIfNotFresh); !errors.Is(err, freshness.ErrNotFresh) {
		t.Fatalf("FailIfNotFresh List with the cache behind: got %v", err)
	}
	c.ResumeInformers()
	var got corev1.ConfigMap
	if err := c.Get(ctx, key, &got); err != nil || got.ResourceVersion != obj.ResourceVersion {
		t.Fatalf("after resume: %v, rv %q want %q", err, got.ResourceVersion, obj.ResourceVersion)
	}
	if err := c.Get(ctx, key, &got, freshctrl.FailIfNotFresh); err != nil {
		t.Fatalf("FailIfNotFresh once caught up: %v", err)
	}
}

// TestWhenFresh: a Requeuer takes the FailIfNotFresh error, and the
// request comes back through the queue once the informers resume and
// apply the write, not before.
func TestWhenFresh(t *testing.T) {
	ctx := waitCtx(t)
	seed := configMap("ns", "a", nil)
	c := newClient(t, fake.NewClientBuilder().WithObjects(seed))
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer queue.ShutDown()
	rctx, stop := context.WithCancel(context.Background())
	defer stop()
	requeuer := freshctrl.NewRequeuer()
	if err := requeuer.Start(rctx, queue); err != nil {
		t.Fatal(err)
	}

	c.PauseInformers()
	var obj corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKeyFromObject(seed), &obj); err != nil {
		t.Fatal(err)
	}
	obj.Data = map[string]string{"k": "v"}
	if err := c.Update(ctx, &obj); err != nil {
		t.Fatal(err)
	}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "parent"}}
	err := c.Get(ctx, client.ObjectKeyFromObject(seed), &corev1.ConfigMap{}, freshctrl.FailIfNotFresh)
	res, ok := requeuer.WhenFresh(req, err)
	if !ok || res != (reconcile.Result{}) {
		t.Fatalf("WhenFresh(%v) = %+v, %v; want the request parked", err, res, ok)
	}
	if n := queue.Len(); n != 0 || requeuer.Pending() != 1 {
		t.Fatalf("queue holds %d, %d pending, before the cache caught up", n, requeuer.Pending())
	}
	c.ResumeInformers()
	got := make(chan reconcile.Request, 1)
	go func() {
		r, shutdown := queue.Get()
		if !shutdown {
			queue.Done(r)
			got <- r
		}
	}()
	select {
	case r := <-got:
		if r != req {
			t.Fatalf("queue gave %v, want %v", r, req)
		}
	case <-ctx.Done():
		t.Fatal("the request never came back")
	}
	var read corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKeyFromObject(seed), &read, freshctrl.FailIfNotFresh); err != nil || read.ResourceVersion != obj.ResourceVersion {
		t.Fatalf("the requeued reconcile reads %q, %v; want %q", read.ResourceVersion, err, obj.ResourceVersion)
	}
}

// TestOtherKindsWritesReachEveryInformer: resource versions are one
// counter for every kind, as on a server, and an informer of a kind nobody
// writes reaches the newest one anyway (the fake sends watch bookmarks),
// so waits for the server's resource version (deletes, DeleteAllOf) end.
func TestOtherKindsWritesReachEveryInformer(t *testing.T) {
	ctx := waitCtx(t)
	c := newClient(t, fake.NewClientBuilder().WithObjects(configMap("ns", "a", nil), configMap("ns", "b", nil)))
	if err := c.List(ctx, &corev1.ConfigMapList{}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if err := configMapInformer(t, c).Informer.WaitForFreshness(ctx, secret.ResourceVersion); err != nil {
		t.Fatalf("the ConfigMap informer never reached the Secret's resource version: %v", err)
	}

	// A delete, a write of another kind, then a read: the read waits for
	// the server's resource version, which only a bookmark can show.
	c.PauseInformers()
	if err := c.Delete(ctx, configMap("ns", "a", nil)); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var list corev1.ConfigMapList
	go func() { done <- c.List(ctx, &list, client.InNamespace("ns")) }()
	notReturned(t, done, "List after Delete")
	c.ResumeInformers()
	if err := <-done; err != nil {
		t.Fatalf("List after Delete: %v", err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "b" {
		t.Fatalf("List after Delete: %d items, want only b", len(list.Items))
	}

	if err := c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, &list, client.InNamespace("ns")); err != nil || len(list.Items) != 0 {
		t.Fatalf("List after DeleteAllOf: %v, %d items", err, len(list.Items))
	}
}

// TestSeededObjects: objects given to the builder carry the resource
// version and UID the fake server gave them, so a test can write them
// back; a stale resource version conflicts, as on a server.
func TestSeededObjects(t *testing.T) {
	ctx := waitCtx(t)
	seed := configMap("ns", "a", nil)
	c := newClient(t, fake.NewClientBuilder().WithObjects(seed))
	rvOf(t, seed)
	var stored corev1.ConfigMap
	if err := c.Server().Get(ctx, client.ObjectKeyFromObject(seed), &stored); err != nil {
		t.Fatal(err)
	}
	if stored.ResourceVersion != seed.ResourceVersion || stored.UID != seed.UID {
		t.Fatalf("seeded object says rv %q uid %q, server %q %q", seed.ResourceVersion, seed.UID, stored.ResourceVersion, stored.UID)
	}
	stale := seed.DeepCopy()
	seed.Data = map[string]string{"k": "v"}
	if err := c.Update(ctx, seed); err != nil {
		t.Fatalf("Update of the seeded object: %v", err)
	}
	if err := c.Update(ctx, stale); !apierrors.IsConflict(err) {
		t.Fatalf("Update with a stale resource version: %v, want a conflict", err)
	}
}

// TestFinalizers: deleting an object with a finalizer leaves it
// terminating; removing the finalizer deletes it, and a read after that
// no longer finds it.
func TestFinalizers(t *testing.T) {
	ctx := waitCtx(t)
	obj := configMap("ns", "a", nil)
	obj.Finalizers = []string{"example.com/keep"}
	c := newClient(t, fake.NewClientBuilder().WithObjects(obj))
	if err := c.Delete(ctx, obj); err != nil {
		t.Fatal(err)
	}
	var got corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), &got); err != nil || got.DeletionTimestamp == nil {
		t.Fatalf("after Delete: %v, deletionTimestamp %v", err, got.DeletionTimestamp)
	}
	got.Finalizers = nil
	if err := c.Update(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), &got); !apierrors.IsNotFound(err) {
		t.Fatalf("after the last finalizer went: %v, want NotFound", err)
	}
	if err := c.Server().Get(ctx, client.ObjectKeyFromObject(obj), &got); !apierrors.IsNotFound(err) {
		t.Fatalf("the server still has it: %v", err)
	}
}

// TestScopedCache: the cache's options apply (namespaces, ByObject label
// selectors): the informers list and watch only their scope, and reads
// through every representation reflect the client's writes.
func TestScopedCache(t *testing.T) {
	ctx := waitCtx(t)
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	c := newClient(t, fake.NewClientBuilder().
		WithObjects(configMap("a", "seed", nil), configMap("b", "elsewhere", nil)).
		WithCacheOptions(crcache.Options{
			DefaultNamespaces: map[string]crcache.Config{"a": {}},
			ByObject:          map[client.Object]crcache.ByObject{&corev1.Secret{}: {Label: web}},
		}))
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web", Labels: map[string]string{"app": "web"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "db", Labels: map[string]string{"app": "db"}}},
	} {
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	var secrets corev1.SecretList
	if err := c.List(ctx, &secrets, client.InNamespace("a")); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 1 || secrets.Items[0].Name != "web" {
		t.Fatalf("cached Secrets: %d items, want only the one the selector admits", len(secrets.Items))
	}

	created := configMap("a", "new", nil)
	if err := c.Create(ctx, created); err != nil {
		t.Fatal(err)
	}
	meta := &metav1.PartialObjectMetadataList{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := c.List(ctx, meta, client.InNamespace("a")); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, m := range meta.Items {
		names[m.Name] = m.ResourceVersion
	}
	if len(names) != 2 || names["new"] != created.ResourceVersion || names["seed"] == "" {
		t.Fatalf("metadata-only List of namespace a: %v, want seed and new at %s", names, created.ResourceVersion)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "b", Name: "elsewhere"}, &corev1.ConfigMap{}); err == nil {
		t.Fatal("a read outside the cache's namespaces succeeded")
	}
}

// TestStatusAndPatch: status updates (WithStatusSubresource) and patches
// are writes like any other: a cached read after them reflects them.
func TestStatusAndPatch(t *testing.T) {
	ctx := waitCtx(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	c := newClient(t, fake.NewClientBuilder().WithObjects(pod).WithStatusSubresource(&corev1.Pod{}))
	var got corev1.Pod
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
		t.Fatal(err)
	}
	c.PauseInformers()
	got.Status.Phase = corev1.PodRunning
	if err := c.Status().Update(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}, freshctrl.FailIfNotFresh); !errors.Is(err, freshness.ErrNotFresh) {
		t.Fatalf("FailIfNotFresh after a status update with the cache paused: %v", err)
	}
	c.ResumeInformers()
	var read corev1.Pod
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), &read); err != nil || read.Status.Phase != corev1.PodRunning {
		t.Fatalf("after the status update: %v, phase %q", err, read.Status.Phase)
	}
	patched := read.DeepCopy()
	patched.Labels = map[string]string{"patched": "yes"}
	if err := c.Patch(ctx, patched, client.MergeFrom(&read)); err != nil {
		t.Fatal(err)
	}
	if rvOf(t, patched) <= rvOf(t, &read) {
		t.Fatalf("patch returned rv %s, not past %s", patched.ResourceVersion, read.ResourceVersion)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), &read); err != nil || read.Labels["patched"] != "yes" || read.ResourceVersion != patched.ResourceVersion {
		t.Fatalf("after the patch: %v, labels %v rv %q", err, read.Labels, read.ResourceVersion)
	}
}
