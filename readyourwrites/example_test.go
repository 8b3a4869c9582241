package readyourwrites_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/freshtest"
	"github.com/freshinformer/freshinformer/readyourwrites"
)

// WhenFresh is the non-blocking form of EnsureFresh, for queues other than
// client-go's workqueue (package requeue builds on it): f runs once the
// caches hold the owner's writes, on the informer's goroutine.
func ExampleReadYourWrites_WhenFresh() {
	ctx, cancel := context.WithCancel(context.Background())
	client := freshtest.NewClientset()
	factory := cache.NewSharedInformerFactory(client, 0)
	lister := factory.Core().V1().ConfigMaps().Lister()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	factory.WaitForCacheSync(ctx.Done())
	ryw := readyourwrites.New(factory, 5*time.Second)

	parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "parent", UID: "p1"}}
	owner := readyourwrites.OwnerOf(parent)
	child, err := client.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "child"}}, metav1.CreateOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := ryw.Record(owner, schema.GroupResource{Resource: "configmaps"}, child); err != nil {
		fmt.Println(err)
		return
	}

	fresh := make(chan error, 1)
	stop := ryw.WhenFresh(owner, func(err error) { fresh <- err }) // quick, never blocks
	defer stop()                                                   // calls it off if we give up first
	fmt.Println("fresh:", <-fresh)
	cached, _ := lister.ConfigMaps("ns").Get("child")
	fmt.Println("cached at the write's version:", cached.ResourceVersion == child.ResourceVersion)
	// Output:
	// fresh: <nil>
	// cached at the write's version: true
}

// A reconciler that blocks until the caches hold its own writes before
// reading them (EnsureFresh). The written object names its resource:
// Wrote needs no resource argument.
func ExampleReadYourWrites_EnsureFresh() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := freshtest.NewClientset()
	factory := cache.NewSharedInformerFactory(client, 0)
	lister := factory.Core().V1().ConfigMaps().Lister()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }() // stop the informers, then wait for them
	factory.WaitForCacheSync(ctx.Done())
	ryw := readyourwrites.New(factory, 10*time.Second)

	reconcile := func(ctx context.Context, parent *corev1.ConfigMap) error {
		owner := readyourwrites.OwnerOf(parent)
		if err := ryw.EnsureFresh(ctx, owner); err != nil { // the cache holds this owner's earlier writes
			return err
		}
		children, err := lister.ConfigMaps(parent.Namespace).List(labels.SelectorFromSet(labels.Set{"parent": parent.Name}))
		if err != nil || len(children) > 0 {
			return err // a stale cache would create a second child here
		}
		child, err := client.CoreV1().ConfigMaps(parent.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: parent.Name + "-child", Labels: map[string]string{"parent": parent.Name}}}, metav1.CreateOptions{})
		return ryw.Wrote(owner, child, err)
	}

	parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"}}
	for range 3 { // reconciled again at once, as after its own write's event
		if err := reconcile(ctx, parent); err != nil {
			fmt.Println(err)
		}
	}
	all, _ := client.CoreV1().ConfigMaps("ns").List(ctx, metav1.ListOptions{})
	fmt.Println(len(all.Items), "child")
	// Output: 1 child
}

// A workqueue controller that does not block: CheckFresh says whether the
// caches hold the owner's writes, and the controller requeues if not.
func ExampleReadYourWrites_CheckFresh() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := freshtest.NewClientset()
	factory := cache.NewSharedInformerFactory(client, 0)
	informer := factory.Core().V1().ConfigMaps().Informer()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }() // stop the informers, then wait for them
	factory.WaitForCacheSync(ctx.Done())
	ryw := readyourwrites.New(factory, 0)

	owner := readyourwrites.OwnerOf(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"}})
	child, err := client.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
	if err := ryw.Wrote(owner, child, err); err != nil {
		fmt.Println(err)
		return
	}
	// In a controller: if errors.Is(err, freshness.ErrNotFresh) { queue.AddRateLimited(key) }.
	for {
		err := ryw.CheckFresh(owner)
		if err == nil {
			break
		}
		if !errors.Is(err, freshness.ErrNotFresh) {
			fmt.Println(err)
			return
		}
		time.Sleep(time.Millisecond) // the requeue's delay
	}
	_, cached, _ := informer.GetIndexer().GetByKey("ns/c")
	fmt.Println("cached:", cached)
	// Output: cached: true
}
