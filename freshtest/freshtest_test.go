package freshtest

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/readyourwrites"
)

func rvOf(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("resource version %q: %v", s, err)
	}
	return n
}

func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev := <-w.ResultChan():
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
		return watch.Event{}
	}
}

func TestClientsetStampsLikeAServer(t *testing.T) {
	ctx := context.Background()
	seed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "seed"}}
	c := NewClientset(seed)
	if seed.ResourceVersion != "" {
		t.Fatal("the caller's object was modified")
	}
	cms := c.CoreV1().ConfigMaps("ns")
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.Items[0].ResourceVersion == "" || list.ResourceVersion != list.Items[0].ResourceVersion {
		t.Fatalf("list after seeding: %+v, %v", list, err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	created, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"k": "v"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rvOf(t, created.ResourceVersion) <= rvOf(t, list.ResourceVersion) || created.UID == "" {
		t.Fatalf("create returned rv %q uid %q after list %q", created.ResourceVersion, created.UID, list.ResourceVersion)
	}
	if ev := next(t, w); ev.Type != watch.Added || ev.Object.(*corev1.ConfigMap).ResourceVersion != created.ResourceVersion {
		t.Fatalf("create event %v %v", ev.Type, ev.Object)
	}

	upd := created.DeepCopy()
	upd.Data = map[string]string{"x": "1"}
	updated, err := cms.Update(ctx, upd, metav1.UpdateOptions{})
	if err != nil || rvOf(t, updated.ResourceVersion) <= rvOf(t, created.ResourceVersion) || updated.UID != created.UID {
		t.Fatalf("update: %+v %v", updated, err)
	}
	if ev := next(t, w); ev.Type != watch.Modified || ev.Object.(*corev1.ConfigMap).ResourceVersion != updated.ResourceVersion {
		t.Fatalf("update event %v %v", ev.Type, ev.Object)
	}
	if _, err := cms.Update(ctx, upd, metav1.UpdateOptions{}); !apierrors.IsConflict(err) { // upd carries the old RV
		t.Fatalf("stale update: %v", err)
	}

	patched, err := cms.Patch(ctx, "a", types.MergePatchType, []byte(`{"data":{"x":"2"}}`), metav1.PatchOptions{})
	if err != nil || rvOf(t, patched.ResourceVersion) <= rvOf(t, updated.ResourceVersion) {
		t.Fatalf("patch: %+v %v", patched, err)
	}
	next(t, w)

	if err := cms.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := next(t, w)
	if ev.Type != watch.Deleted || rvOf(t, ev.Object.(*corev1.ConfigMap).ResourceVersion) <= rvOf(t, patched.ResourceVersion) {
		t.Fatalf("delete event %v %v: not stamped with the deletion's RV", ev.Type, ev.Object)
	}

	// A watch from an older RV replays what came after it.
	replay, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: created.ResourceVersion, LabelSelector: "k=v"})
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Stop()
	for _, want := range []watch.EventType{watch.Modified, watch.Modified, watch.Deleted} {
		if ev := next(t, replay); ev.Type != want {
			t.Fatalf("replayed %v, want %v", ev.Type, want)
		}
	}
}

func TestFinalizersHoldBackDeletes(t *testing.T) {
	ctx := context.Background()
	c := NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "f", Finalizers: []string{"example.com/keep"}}})
	cms := c.CoreV1().ConfigMaps("ns")
	if err := cms.Delete(ctx, "f", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := cms.Get(ctx, "f", metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp == nil {
		t.Fatalf("after deleting an object with finalizers: %+v %v", got, err)
	}
	got.Finalizers = nil
	if _, err := cms.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "f", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("removing the last finalizer did not delete: %v", err)
	}
}

// The point of the package: read-your-writes runs unchanged over a fake.
func TestReadYourWritesOverTheFake(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c := NewClientset()
	f := cache.NewSharedInformerFactory(c, 0)
	cmInformer := f.Core().V1().ConfigMaps().Informer()
	defer func() { cancel(); f.Shutdown() }()
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	ryw := readyourwrites.New(f, 10*time.Second)
	owner := readyourwrites.Owner{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}, UID: "u"}
	for i := range 20 {
		cm, err := c.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: strconv.Itoa(i)}}, metav1.CreateOptions{})
		if err := ryw.Wrote(owner, cm, err); err != nil {
			t.Fatal(err)
		}
		if err := ryw.EnsureFresh(ctx, owner); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := cmInformer.GetIndexer().GetByKey("ns/" + strconv.Itoa(i)); !ok {
			t.Fatalf("fresh without write %d", i)
		}
		err = c.CoreV1().ConfigMaps("ns").Delete(ctx, cm.Name, metav1.DeleteOptions{})
		if err := ryw.Deleted(owner, cm, err); err != nil {
			t.Fatal(err)
		}
		if err := ryw.EnsureFresh(ctx, owner); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := cmInformer.GetIndexer().GetByKey("ns/" + strconv.Itoa(i)); ok {
			t.Fatalf("fresh with delete %d still cached", i)
		}
	}
}

func TestDynamicClient(t *testing.T) {
	ctx := context.Background()
	gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	w := &unstructured.Unstructured{}
	w.SetAPIVersion("example.com/v1")
	w.SetKind("Widget")
	w.SetNamespace("ns")
	w.SetName("w")
	c := NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "WidgetList"}, w)
	list, err := c.Resource(gvr).Namespace("ns").List(ctx, metav1.ListOptions{})
	if err != nil || list.GetResourceVersion() == "" || len(list.Items) != 1 || list.Items[0].GetResourceVersion() == "" {
		t.Fatalf("dynamic list: %+v %v", list, err)
	}
	w2 := w.DeepCopy()
	w2.SetName("w2")
	got, err := c.Resource(gvr).Namespace("ns").Create(ctx, w2, metav1.CreateOptions{})
	if err != nil || rvOf(t, got.GetResourceVersion()) <= rvOf(t, list.GetResourceVersion()) {
		t.Fatalf("dynamic create: %v %v", got, err)
	}
}

// NewSimpleDynamicClient takes typed seed objects, and unstructured ones of
// kinds the scheme does not know, as client-go's dynamic fake does.
func TestDynamicClientTypedSeeds(t *testing.T) {
	ctx := context.Background()
	w := &unstructured.Unstructured{}
	w.SetAPIVersion("example.com/v1")
	w.SetKind("Widget")
	w.SetNamespace("ns")
	w.SetName("w")
	c := NewSimpleDynamicClient(scheme.Scheme, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}, w)
	for gvr, name := range map[schema.GroupVersionResource]string{
		{Version: "v1", Resource: "configmaps"}:                    "c",
		{Group: "example.com", Version: "v1", Resource: "widgets"}: "w",
	} {
		list, err := c.Resource(gvr).Namespace("ns").List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 || list.Items[0].GetName() != name || list.Items[0].GetResourceVersion() == "" || list.GetResourceVersion() == "" {
			t.Fatalf("%v: %+v, %v", gvr, list, err)
		}
	}
}
