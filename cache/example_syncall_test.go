package cache_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshtest"
)

// Sync is a read barrier, for one informer, every informer of a factory,
// or some resources of any source (cache.Sources joins several).
func ExampleSyncAll() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := freshtest.NewClientset()
	factory := cache.NewSharedInformerFactory(client, 0)
	podsInformer := factory.Core().V1().Pods().Informer()
	factory.Core().V1().Secrets().Informer()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }() // stop the informers, then wait for them
	factory.WaitForCacheSync(ctx.Done())
	informer, _ := cache.FreshInformerOf(podsInformer)
	podsGR, secretsGR := corev1.Resource("pods"), corev1.Resource("secrets")

	// Another actor's write; its watch event may still be on its way.
	if _, err := client.CoreV1().Secrets("ns").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token"}}, metav1.CreateOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	sync := func(ctx context.Context) error {
		if err := informer.Sync(ctx); err != nil { // read barrier: everything committed before the call is cached
			return err
		}
		err := factory.Sync(ctx) // every started informer of a factory, in parallel
		if err != nil {
			return err
		}
		err = cache.SyncAll(ctx, factory, podsGR, secretsGR)
		return err
	}
	fmt.Println(sync(ctx))
	_, err := factory.Core().V1().Secrets().Lister().Secrets("ns").Get("token")
	fmt.Println(err)
	// Output:
	// <nil>
	// <nil>
}
