package freshtest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/freshtest"
)

// A Lag holds an informer behind the server on demand: the write is on
// the server, not in the cache, until Release.
func ExampleLag() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := freshtest.NewClientset()
	lag := freshtest.NewLag()
	lag.Fake(&client.Fake) // or lag.ListerWatcher(lw), lag.WrapConfig(cfg) on a real server
	factory := cache.NewSharedInformerFactory(client, 0)
	informer, _ := cache.FreshInformerOf(factory.Core().V1().ConfigMaps().Informer())
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	factory.WaitForCacheSync(ctx.Done())

	lag.Hold()
	cm, _ := client.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{})
	fmt.Println("held:", errors.Is(informer.CheckFreshness(cm.ResourceVersion), freshness.ErrNotFresh))
	lag.Release()
	fmt.Println("released:", informer.WaitForFreshness(ctx, cm.ResourceVersion))
	// Output:
	// held: true
	// released: <nil>
}

// A controller's unit test that fails on each read older than the
// controller's own write: the factory's informers detect stale reads.
func ExampleFailOnStaleReads() {
	var t *testing.T // the test's
	client := freshtest.NewClientset()
	factory := cache.NewSharedInformerFactory(client, 0, cache.WithInformerOptions(freshtest.FailOnStaleReads(t)))
	_ = factory // run the controller on factory and client; record its writes (writes, readyourwrites)
}
