package consistency_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/consistency"
	"github.com/freshinformer/freshinformer/freshtest"
)

var rsGR = schema.GroupResource{Group: "apps", Resource: "replicasets"}

func newRS(name string, replicas int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: appsv1.ReplicaSetSpec{Replicas: &replicas}}
}

// An owner created while the controller runs, and changed by its creator
// before the lagging watch delivered the change: with WithOwnerResource
// its first sync waits for the cache to hold the copy the server has, not
// the created one (kcm-bench: the driver scales each ReplicaSet right
// after creating it; on the created copy, the ReplicaSet controller's
// first status write was refused with 409 Conflict, every time under 200
// ms of lag). An owner from the initial list is not read.
func TestCreatedOwnerFirstSyncSeesTheServersCopy(t *testing.T) {
	client := freshtest.NewClientset()
	if _, err := client.AppsV1().ReplicaSets("ns").Create(context.Background(), newRS("old", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lag := freshtest.NewLag()
	lag.Fake(&client.Fake)
	f := cache.NewSharedInformerFactory(client, 0)
	rsInf := f.Apps().V1().ReplicaSets()
	rsInf.Informer()
	s := consistency.NewStore(f, consistency.WithMaxWait(5*time.Second), consistency.WithOwnerResource(rsGR))
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	t.Cleanup(func() { lag.Release(); cancel(); f.Shutdown() })
	f.WaitForCacheSync(ctx.Done())
	lists := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "list" && a.GetResource().Resource == "replicasets" {
				n++
			}
		}
		return n
	}
	initial := lists()

	if err := s.EnsureReady(types.NamespacedName{Namespace: "ns", Name: "old"}); err != nil {
		t.Fatal(err)
	}
	if n := lists() - initial; n != 0 {
		t.Errorf("an owner of the initial list was read from the server (%d lists)", n)
	}

	created, err := client.AppsV1().ReplicaSets("ns").Create(context.Background(), newRS("rs", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the created owner in the cache", func() bool { _, err := rsInf.Lister().ReplicaSets("ns").Get("rs"); return err == nil })
	time.Sleep(50 * time.Millisecond) // the Store's handler heard of it too
	lag.Hold()
	scaled := created.DeepCopy()
	scaled.Spec.Replicas = new(int32(3))
	if _, err := client.AppsV1().ReplicaSets("ns").Update(context.Background(), scaled, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		lag.Release()
	}()
	if err := s.EnsureReady(types.NamespacedName{Namespace: "ns", Name: "rs"}); err != nil {
		t.Fatalf("EnsureReady = %v", err)
	}
	got, err := rsInf.Lister().ReplicaSets("ns").Get("rs")
	if err != nil || *got.Spec.Replicas != 3 {
		t.Fatalf("the created owner's first sync would read %v (%v), want the copy scaled to 3", got.Spec.Replicas, err)
	}
	if n := lists() - initial; n != 1 {
		t.Errorf("%d lists of replicasets for one created owner, want 1", n)
	}
	// Read once: its next sync reads nothing more.
	if err := s.EnsureReady(types.NamespacedName{Namespace: "ns", Name: "rs"}); err != nil {
		t.Fatal(err)
	}
	if n := lists() - initial; n != 1 {
		t.Errorf("%d lists after a second sync, want 1", n)
	}
}

// Upstream's controllers hand a skipped sync to their rate-limited queue,
// whose backoff grows with every skip, and queue an owner on every update
// event of it. With WithOwnerResource, a skipped owner is told again to
// its informer's handlers (cache.FreshInformer.ResyncKey) the moment its
// caches hold its writes, so the controller syncs it then.
func TestSkippedOwnerIsResyncedWhenTheCacheCatchesUp(t *testing.T) {
	client := freshtest.NewClientset()
	if _, err := client.AppsV1().ReplicaSets("ns").Create(context.Background(), newRS("rs", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lag := freshtest.NewLag()
	lag.Fake(&client.Fake)
	f := cache.NewSharedInformerFactory(client, 0)
	f.Core().V1().Pods().Informer()
	resynced := make(chan string, 4)
	if _, err := f.Apps().V1().ReplicaSets().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { resynced <- obj.(*appsv1.ReplicaSet).Name },
	}); err != nil {
		t.Fatal(err)
	}
	s := consistency.NewStore(f, consistency.WithMaxWait(time.Millisecond), consistency.WithOwnerResource(rsGR))
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	t.Cleanup(func() { lag.Release(); cancel(); f.Shutdown() })
	f.WaitForCacheSync(ctx.Done())
	owner := types.NamespacedName{Namespace: "ns", Name: "rs"}
	if err := s.EnsureReady(owner); err != nil {
		t.Fatal(err)
	}

	lag.Hold()
	p, err := client.CoreV1().Pods("ns").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.WroteAt(owner, "", schema.GroupResource{Resource: "pods"}, p.ResourceVersion)
	for range 2 { // a second skip keeps one callback
		if err := s.EnsureReady(owner); err == nil {
			t.Fatal("EnsureReady = nil with the write held back")
		}
	}
	select {
	case name := <-resynced:
		t.Fatalf("%s resynced before the cache caught up", name)
	case <-time.After(50 * time.Millisecond):
	}
	lag.Release()
	select {
	case name := <-resynced:
		if name != "rs" {
			t.Fatalf("resynced %s, want rs", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the skipped owner was not resynced after the cache caught up")
	}
	if err := s.EnsureReady(owner); err != nil {
		t.Fatalf("EnsureReady after the resync = %v", err)
	}
	select {
	case name := <-resynced:
		t.Fatalf("%s resynced twice", name)
	case <-time.After(20 * time.Millisecond):
	}
}
