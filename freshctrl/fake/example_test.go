package fake_test

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/freshinformer/freshinformer/freshctrl"
	"github.com/freshinformer/freshinformer/freshctrl/fake"
	"github.com/freshinformer/freshinformer/stalereads"
)

// childReconciler keeps one child ConfigMap per parent ConfigMap and
// writes into the parent how many children its cached List shows. Right
// after its own Create, a plain controller-runtime cache may not hold the
// child yet (the count would say 0, now and then); freshctrl's client
// waits until it does.
type childReconciler struct {
	client.Client
}

func (r *childReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var parent corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &parent); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: parent.Namespace,
		Name:      parent.Name + "-child",
		Labels:    map[string]string{"parent": parent.Name},
	}}
	if err := r.Create(ctx, child); err != nil && !apierrors.IsAlreadyExists(err) {
		return reconcile.Result{}, err
	}
	var children corev1.ConfigMapList // from the cache, right after the Create
	if err := r.List(ctx, &children, client.InNamespace(parent.Namespace), client.MatchingLabels{"parent": parent.Name}); err != nil {
		return reconcile.Result{}, err
	}
	parent.Data = map[string]string{"children": strconv.Itoa(len(children.Items))}
	return reconcile.Result{}, r.Update(ctx, &parent)
}

// A reconciler's unit test: the reconciler reads its own writes from the
// cache within one reconcile. fake.NewClientBuilder in place of
// controller-runtime's fake.NewClientBuilder is the change; the reconciler
// is the one a manager runs with freshctrl.NewCache and NewClient.
func Example() {
	ctx := context.Background()
	parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "parent"}}
	c := fake.NewClientBuilder().WithObjects(parent).Build()
	defer c.Stop()

	r := &childReconciler{Client: c}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(parent)}
	for range 2 { // a second reconcile changes nothing
		if _, err := r.Reconcile(ctx, req); err != nil {
			fmt.Println(err)
			return
		}
	}

	var got corev1.ConfigMap
	if err := c.Get(ctx, req.NamespacedName, &got); err != nil { // also reads its own write
		fmt.Println(err)
		return
	}
	fmt.Println("children:", got.Data["children"])
	// Output: children: 1
}

// labelReconciler never blocks a worker on a stale cache: it reads with
// FailIfNotFresh and, when the cache is behind its own write, hands the
// request to a Requeuer, which puts it back in the queue once the cache
// has caught up.
type labelReconciler struct {
	client.Client
	requeuer *freshctrl.Requeuer
}

func (r *labelReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var parent corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &parent, freshctrl.FailIfNotFresh); err != nil {
		if res, ok := r.requeuer.WhenFresh(req, err); ok {
			fmt.Println("the cache is behind our write: parked")
			return res, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if parent.Labels["seen"] == "yes" {
		fmt.Println("up to date: the cache has our label")
		return reconcile.Result{}, nil
	}
	parent.Labels = map[string]string{"seen": "yes"}
	if err := r.Update(ctx, &parent); err != nil {
		return reconcile.Result{}, err
	}
	fmt.Println("labelled the parent")
	return reconcile.Result{}, nil
}

// Testing the stale-cache path: with the informers paused, the reconcile
// after a write finds the cache behind and parks its request; the request
// comes back through the queue once the informers resume and apply the
// write.
func ExampleClient_PauseInformers() {
	ctx := context.Background()
	parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "parent"}}
	c := fake.NewClientBuilder().WithObjects(parent).Build()
	defer c.Stop()

	// What a controller gives its sources: a queue, and a context that
	// ends with the manager.
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer queue.ShutDown()
	sourceCtx, stop := context.WithCancel(ctx)
	defer stop()
	requeuer := freshctrl.NewRequeuer()
	if err := requeuer.Start(sourceCtx, queue); err != nil {
		fmt.Println(err)
		return
	}
	r := &labelReconciler{Client: c, requeuer: requeuer}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(parent)}

	// Informers are made on first use: read before pausing them.
	if err := c.Get(ctx, req.NamespacedName, &corev1.ConfigMap{}); err != nil {
		fmt.Println(err)
		return
	}
	c.PauseInformers()
	for range 2 {
		if _, err := r.Reconcile(ctx, req); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println("queued while behind:", queue.Len())

	c.ResumeInformers()
	back, _ := queue.Get() // added once the cache has the write
	queue.Done(back)
	fmt.Println("back in the queue:", back)
	if _, err := r.Reconcile(ctx, back); err != nil {
		fmt.Println(err)
	}
	// Output:
	// labelled the parent
	// the cache is behind our write: parked
	// queued while behind: 0
	// back in the queue: default/parent
	// up to date: the cache has our label
}

// With the stale-read detector on, a read through the cache itself (which
// never waits) while the informers lag behind the client's own write is
// reported; freshctrl's client waits for the write instead.
func ExampleClient_PauseInformersFor() {
	ctx := context.Background()
	report := func(r stalereads.Report) {
		fmt.Printf("%s: %s of %s returned %s, written at %s\n", r.Kind, r.Op, r.Key, r.ResourceVersion, r.WrittenResourceVersion)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cm"}}
	c := fake.NewClientBuilder().WithObjects(cm).WithOptions(freshctrl.Options{DisableMetrics: true, OnStaleRead: report}).Build()
	defer c.Stop()
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
		fmt.Println(err)
		return
	}

	c.PauseInformersFor(200 * time.Millisecond) // the cache lags
	cm.Data = map[string]string{"k": "v"}
	if err := c.Update(ctx, cm); err != nil {
		fmt.Println(err)
		return
	}
	var read corev1.ConfigMap
	_ = c.Cache().Get(ctx, client.ObjectKeyFromObject(cm), &read) // stale, reported
	_ = c.Get(ctx, client.ObjectKeyFromObject(cm), &read)         // waits until the cache has the write
	fmt.Println("through the client:", read.Data["k"])
	// Output:
	// stale read (older than this process's write): GetByKey of default/cm returned 2, written at 3
	// through the client: v
}

// ParentReconciler labels its parent ConfigMap, then runs again to check
// its own write. Its reads never block a worker: they use FailIfNotFresh,
// and a read the cache is not fresh enough for parks the request with its
// Requeuer, which gives it back once the cache has caught up.
type ParentReconciler struct {
	client.Client
	Requeuer *freshctrl.Requeuer
}

func (r *ParentReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var parent corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &parent, freshctrl.FailIfNotFresh); err != nil {
		if res, ok := r.Requeuer.WhenFresh(req, err); ok {
			fmt.Println("the cache is behind our write: parked")
			return res, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if parent.Labels["seen"] == "yes" {
		fmt.Println("up to date: the cache has our label")
		return reconcile.Result{}, nil
	}
	parent.Labels = map[string]string{"seen": "yes"}
	if err := r.Update(ctx, &parent); err != nil {
		return reconcile.Result{}, err
	}
	fmt.Println("labelled the parent")
	return reconcile.Result{RequeueAfter: time.Minute}, nil // check the write
}

// Reconcile runs a reconciler to completion as its controller would:
// RequeueAfter runs it again at once, and a request parked with the
// Client's Requeuer runs again when the cache has caught up. Here the
// informers lag behind every write for a while.
func ExampleClient_Reconcile() {
	ctx := context.Background()
	parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "parent"}}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(parent)}
	c := fake.NewClientBuilder().WithObjects(parent).Build() // was: sigs.k8s.io/controller-runtime/pkg/client/fake
	defer c.Stop()
	r := &ParentReconciler{Client: c, Requeuer: c.Requeuer()} // a started Requeuer: WhenFresh parks requests

	if err := c.Get(ctx, req.NamespacedName, &corev1.ConfigMap{}); err != nil { // informers are made on first use
		fmt.Println(err)
		return
	}
	c.PauseInformersFor(500 * time.Millisecond) // the cache lags behind the reconciler's write
	res, err := c.Reconcile(ctx, r, req)        // until it settles: requeues and parked requests run again
	fmt.Println("settled:", res.IsZero(), err)
	// Output:
	// labelled the parent
	// the cache is behind our write: parked
	// up to date: the cache has our label
	// settled: true <nil>
}
