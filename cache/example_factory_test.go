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
