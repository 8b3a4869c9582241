package cache_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/freshtest"
)

// A reconciler writes through the API server, then reads its cache. It
// waits until the cache has applied its own write before reading, instead
// of acting on the stale object. In a real controller lw comes from
// toolscache.NewListWatchFromClient and the write's resource version from
// the object the client returned.
func ExampleFreshInformer_WaitForFreshness() {
	server := watch.NewFake() // stands in for the API server's watch stream
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "100"}}, nil
		},
		WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if o.SendInitialEvents != nil && *o.SendInitialEvents {
				// client-go streams the initial list (watch-list); a real
				// server ends it with this bookmark.
				go server.Action(watch.Bookmark, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
					ResourceVersion: "100",
					Annotations:     map[string]string{metav1.InitialEventsAnnotationKey: "true"},
				}})
			}
			return server, nil
		},
	}
	// This fake's list always says 100, whatever it has sent since; a real
	// server's consistent list, which the informer sends to prove a quiet
	// cache fresh, shows its newest write. Probing the fake would show its
	// history going back, so nothing probes it.
	informer := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{}, cache.WithQuietProbeDelay(-1))
	lister := corelisters.NewConfigMapLister(informer.GetIndexer())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go informer.RunWithContext(ctx)
	toolscache.WaitForCacheSync(ctx.Done(), informer.HasSynced)

	// The reconciler's write returned resourceVersion 105; the watch event
	// for it reaches the informer a little later.
	writtenRV := "105"
	go func() {
		time.Sleep(10 * time.Millisecond)
		server.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: "default", Name: "settings", ResourceVersion: writtenRV,
		}})
	}()

	waitCtx, done := context.WithTimeout(ctx, 5*time.Second)
	defer done()
	if err := informer.WaitForFreshness(waitCtx, writtenRV); err != nil {
		fmt.Println("cache not fresh:", err) // requeue instead of acting on stale state
		return
	}
	cm, err := lister.ConfigMaps("default").Get("settings")
	fmt.Println(cm.ResourceVersion, err, informer.LastObservedResourceVersion())
	// Output: 105 <nil> 105
}

// A busy controller need not block a worker while its cache catches up:
// CheckFreshness says at once what WaitForFreshness would, and
// AfterFreshness calls back when the cache gets there (a workqueue re-adds
// the key then).
func ExampleFreshInformer_CheckFreshness() {
	client := freshtest.NewClientset()
	factory := cache.NewSharedInformerFactory(client, 0)
	informer, _ := cache.FreshInformerOf(factory.Core().V1().ConfigMaps().Informer())
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); factory.Shutdown() }()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	err := informer.CheckFreshness("1000000") // a write this cache has not seen
	fmt.Println(errors.Is(err, freshness.ErrNotFresh))

	cm, _ := client.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{})
	fresh := make(chan error, 1)
	informer.AfterFreshness(cm.ResourceVersion, func(err error) { fresh <- err }) // queue.Add(key) in a controller
	fmt.Println(<-fresh, informer.CheckFreshness(cm.ResourceVersion))
	// Output:
	// true
	// <nil> <nil>
}
