package cache_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	informers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshtest"
)

// The factory is a drop-in for client-go's: code written for
// informers.SharedInformerFactory takes it unchanged (on client-go 0.37,
// whose interface adds Lifecycle(), see the factory's doc), and a write's
// resource version can be waited for with one call.
func ExampleNewSharedInformerFactory() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := freshtest.NewClientset() // a real clientset in production
	factory := cache.NewSharedInformerFactory(client, 0)
	cms := factory.Core().V1().ConfigMaps()
	informer, lister := cms.Informer(), cms.Lister()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }() // stop the informers, then wait for them
	factory.WaitForCacheSync(ctx.Done())

	cm, _ := client.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}}, metav1.CreateOptions{})
	if err := cache.WaitForFreshness(ctx, informer, cm.ResourceVersion); err != nil {
		fmt.Println(err)
		return
	}
	got, err := lister.ConfigMaps("ns").Get("settings")
	fmt.Println(got.Name, err)
	// Output: settings <nil>
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
	ryw := cache.NewReadYourWrites(factory, 10*time.Second)

	reconcile := func(ctx context.Context, parent *corev1.ConfigMap) error {
		owner := cache.OwnerOf(parent)
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
	ryw := cache.NewReadYourWrites(factory, 0)

	owner := cache.OwnerOf(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"}})
	child, err := client.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
	if err := ryw.Wrote(owner, child, err); err != nil {
		fmt.Println(err)
		return
	}
	// In a controller: if errors.Is(err, cache.ErrNotFresh) { queue.AddRateLimited(key) }.
	for {
		err := ryw.CheckFresh(owner)
		if err == nil {
			break
		}
		if !errors.Is(err, cache.ErrNotFresh) {
			fmt.Println(err)
			return
		}
		time.Sleep(time.Millisecond) // the requeue's delay
	}
	_, cached, _ := informer.GetIndexer().GetByKey("ns/c")
	fmt.Println("cached:", cached)
	// Output: cached: true
}

// Wrap adds WaitForFreshness to an informer built elsewhere (here client-go's
// own factory, over client-go's plain fake: the objects carry resource
// versions given by the test).
func ExampleWrap() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	plain := factory.Core().V1().ConfigMaps().Informer()
	wrapped, err := cache.Wrap(ctx, plain)
	if err != nil {
		fmt.Println(err)
		return
	}
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }() // stop the informers, then wait for them
	toolscache.WaitForCacheSync(ctx.Done(), plain.HasSynced)

	_, _ = client.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", ResourceVersion: "42"}}, metav1.CreateOptions{})
	waitCtx, done := context.WithTimeout(ctx, 10*time.Second)
	defer done()
	fmt.Println(wrapped.WaitForFreshness(waitCtx, "42"), wrapped.LastObservedResourceVersion())
	// Output: <nil> 42
}
