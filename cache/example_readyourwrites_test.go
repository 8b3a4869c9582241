package cache_test

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshtest"
	"github.com/freshinformer/freshinformer/metrics"
	"github.com/freshinformer/freshinformer/readyourwrites"
)

// The README's drop-in factory: client-go's factory swapped for this one,
// with metrics, and a reconcile that reads its own pod writes through
// read-your-writes.
func ExampleNewSharedInformerFactory_readYourWrites() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := "default"
	parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", UID: "u1"}}
	client := freshtest.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-old"}})
	registry := prometheus.NewRegistry()

	provider, err := metrics.NewProvider(registry) // any prometheus.Registerer
	if err != nil {
		fmt.Println(err)
		return
	}
	factory := cache.NewSharedInformerFactory(client, 0, cache.WithNamespace(ns),
		cache.WithInformerOptions(cache.WithMetrics(provider)))
	podLister := factory.Core().V1().Pods().Lister() // client-go's accessors
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }() // stop the informers, then wait for them
	factory.WaitForCacheSync(ctx.Done())

	ryw := readyourwrites.New(factory, 10*time.Second)

	reconcile := func(ctx context.Context, parent *corev1.ConfigMap, desired, old *corev1.Pod) error {
		// In Reconcile(parent):
		owner := readyourwrites.OwnerOf(parent)
		if err := ryw.EnsureFresh(ctx, owner); err != nil {
			return err
		}
		// ... read from listers, decide, write:
		pod, err := client.CoreV1().Pods(ns).Create(ctx, desired, metav1.CreateOptions{})
		if err := ryw.Wrote(owner, pod, err); err != nil {
			return err
		}
		err = client.CoreV1().Pods(ns).Delete(ctx, old.Name, metav1.DeleteOptions{})
		if err := ryw.Deleted(owner, old, err); err != nil {
			return err
		}
		return nil
	}

	old, err := podLister.Pods(ns).Get("web-old")
	if err != nil {
		fmt.Println(err)
		return
	}
	desired := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-new"}}
	if err := reconcile(ctx, parent, desired, old); err != nil {
		fmt.Println(err)
		return
	}
	// The next reconcile of parent, once EnsureFresh returns, lists both writes.
	if err := ryw.EnsureFresh(ctx, readyourwrites.OwnerOf(parent)); err != nil {
		fmt.Println(err)
		return
	}
	pods, err := podLister.Pods(ns).List(labels.Everything())
	for _, p := range pods {
		fmt.Println(p.Name)
	}
	fmt.Println(err)
	// Output:
	// web-new
	// <nil>
}
