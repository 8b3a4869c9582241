package freshctrl

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/readyourwrites"
)

// TestRequeuerRequeuesWhenFresh: a reconcile that finds the cache behind
// returns at once; its request is added to the queue when the informer
// applies the write, in order of resource version, by one goroutine that
// ends when nothing is pending.
func TestRequeuerRequeuesWhenFresh(t *testing.T) {
	obj := cm("a", "x", "", nil)
	c0 := fake.NewClientBuilder().WithObjects(obj.DeepCopy()).Build()
	var seeded corev1.ConfigMap
	if err := c0.Get(context.Background(), client.ObjectKeyFromObject(obj), &seeded); err != nil {
		t.Fatal(err)
	}
	inf := startInformer(t, Scope{Namespace: "a"}, seeded.ResourceVersion, seeded)
	// y starts far ahead of x, so its write's resource version is higher.
	c := newTestClient(t, 0, []*testInformer{inf}, obj, cm("a", "y", "5000", nil))

	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer queue.ShutDown()
	ctx, cancel := context.WithCancel(context.Background())
	r := NewRequeuer()
	if err := r.Start(ctx, queue); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); r.wg.Wait() }()

	first := update(t, c, "a", "x")
	second := update(t, c, "a", "y")
	reqX := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "a", Name: "parent-x"}}
	reqY := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "a", Name: "parent-y"}}
	for _, step := range []struct {
		req reconcile.Request
		key client.ObjectKey
	}{{reqY, client.ObjectKeyFromObject(second)}, {reqX, client.ObjectKeyFromObject(first)}} {
		err := c.Get(context.Background(), step.key, &corev1.ConfigMap{}, FailIfNotFresh)
		if !errors.Is(err, freshness.ErrNotFresh) {
			t.Fatalf("Get %s: got %v, want freshness.ErrNotFresh", step.key, err)
		}
		res, ok := r.WhenFresh(step.req, err)
		if !ok || res != (reconcile.Result{}) {
			t.Fatalf("WhenFresh = %+v, %v", res, ok)
		}
	}
	if _, ok := r.WhenFresh(reqX, errors.New("other")); ok {
		t.Error("WhenFresh took an unrelated error")
	}
	if r.Pending() != 2 || queue.Len() != 0 {
		t.Fatalf("pending %d, queued %d", r.Pending(), queue.Len())
	}
	if cmp, _ := freshness.Compare(second.ResourceVersion, first.ResourceVersion); cmp <= 0 {
		t.Fatalf("test setup: writes at %s then %s", first.ResourceVersion, second.ResourceVersion)
	}
	inf.lw.w.Modify(first.DeepCopy())
	if got, _ := queue.Get(); got != reqX {
		t.Fatalf("queued %v first, want %v", got, reqX)
	}
	queue.Done(reqX)
	inf.lw.w.Modify(second.DeepCopy())
	if got, _ := queue.Get(); got != reqY {
		t.Fatalf("queued %v, want %v", got, reqY)
	}
	queue.Done(reqY)
	// Pending counts a request until its queue Add has returned, which
	// may be just after the queue hands it out.
	for deadline := time.Now().Add(5 * time.Second); r.Pending() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Pending = %d after both were queued", r.Pending())
		}
	}
}

// TestRequeuerDelete: a request waiting for a delete is re-queued once the
// cache is past the server's resource version after the delete (one probe
// for all such requests), not by a guessed backoff.
func TestRequeuerDelete(t *testing.T) {
	obj := cm("a", "x", "", nil)
	c0 := fake.NewClientBuilder().WithObjects(obj.DeepCopy()).Build()
	var seeded corev1.ConfigMap
	if err := c0.Get(context.Background(), client.ObjectKeyFromObject(obj), &seeded); err != nil {
		t.Fatal(err)
	}
	inf := startInformer(t, Scope{Namespace: "a"}, seeded.ResourceVersion, seeded)
	c := newTestClient(t, 0, []*testInformer{inf}, obj)
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer queue.ShutDown()
	ctx, cancel := context.WithCancel(context.Background())
	r := NewRequeuer()
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "a", Name: "parent"}}
	if _, ok := r.WhenFresh(req, &readyourwrites.NotFreshError{Informer: inf.si.Informer, Written: "5"}); ok {
		t.Fatal("WhenFresh took a request before Start")
	}
	if err := r.Start(ctx, queue); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); r.wg.Wait() }()

	if err := c.Delete(context.Background(), seeded.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	inf.lw.setRV("3000") // the server is past the delete
	err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), &corev1.ConfigMap{}, FailIfNotFresh)
	if res, ok := r.WhenFresh(req, err); !ok || res != (reconcile.Result{}) {
		t.Fatalf("WhenFresh(%v) = %+v, %v", err, res, ok)
	}
	if n := r.Pending(); n != 1 {
		t.Fatalf("Pending = %d, want the delete's request waiting", n)
	}
	if queue.Len() != 0 {
		t.Fatal("queued before the cache saw the delete")
	}
	before := seeded.DeepCopy() // an unrelated step below the server's 3000
	before.Name, before.ResourceVersion = "other", "2999"
	inf.lw.w.Add(before)
	eventually(t, "the step to 2999", func() bool { return inf.si.Informer.LastObservedResourceVersion() == "2999" })
	if queue.Len() != 0 {
		t.Fatal("queued before the cache reached the server's resource version after the delete")
	}
	gone := seeded.DeepCopy()
	gone.ResourceVersion = "3000"
	inf.lw.w.Delete(gone)
	if got, _ := queue.Get(); got != req {
		t.Fatalf("queued %v, want %v", got, req)
	}
	queue.Done(req)
}
