package cache_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// The factories of one process, here one per namespace, share the
// consistent reads by which their informers check the server after an
// apiserver of several behind a load balancer ends their watches (a
// rollout): one read per resource for all of them, not one per informer.
func ExampleWithServerReads() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := freshtest.NewClientset() // a real clientset in production
	reads := new(cache.ServerReads)
	var factories []*cache.SharedInformerFactory
	for _, ns := range []string{"team-a", "team-b"} {
		factory := cache.NewSharedInformerFactory(client, 0, cache.WithNamespace(ns),
			cache.WithInformerOptions(cache.WithServerReads(reads)))
		factory.Core().V1().ConfigMaps().Informer()
		factory.Start(ctx.Done())
		factories = append(factories, factory)
	}
	for _, factory := range factories {
		for typ, synced := range factory.WaitForCacheSync(ctx.Done()) {
			fmt.Println(typ, synced)
		}
	}
	cancel()
	for _, factory := range factories {
		factory.Shutdown()
	}
	// Output:
	// *v1.ConfigMap true
	// *v1.ConfigMap true
}
