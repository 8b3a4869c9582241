package cache_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
)

// Sync is a read barrier: after it returns, the cache holds everything the
// server had committed when it was called, here a change another client
// made whose watch event is still on its way. In a real controller lw comes
// from toolscache.NewListWatchFromClient.
func ExampleFreshInformer_Sync() {
	server := watch.NewFake() // stands in for the API server's watch stream
	var state atomic.Pointer[corev1.ConfigMapList]
	var watching atomic.Bool
	state.Store(&corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "100"}})
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			// Sync's consistent list: the server's current state.
			return state.Load().DeepCopy(), nil
		},
		WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if !watching.CompareAndSwap(false, true) {
				return watch.NewFake(), nil // a freshness probe's own watch: silent here
			}
			if o.SendInitialEvents != nil && *o.SendInitialEvents {
				go server.Action(watch.Bookmark, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
					ResourceVersion: "100",
					Annotations:     map[string]string{metav1.InitialEventsAnnotationKey: "true"},
				}})
			}
			return server, nil
		},
	}
	informer := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go informer.RunWithContext(ctx)
	toolscache.WaitForCacheSync(ctx.Done(), informer.HasSynced)

	// Another client changed a ConfigMap at RV 105; its event arrives later.
	settings := corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings", ResourceVersion: "105"}}
	state.Store(&corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "105"}, Items: []corev1.ConfigMap{settings}})
	go func() {
		time.Sleep(10 * time.Millisecond)
		server.Add(settings.DeepCopy())
	}()

	syncCtx, done := context.WithTimeout(ctx, 5*time.Second)
	defer done()
	if err := informer.Sync(syncCtx); err != nil {
		fmt.Println("not synced:", err)
		return
	}
	_, cached, _ := informer.GetIndexer().GetByKey("default/settings")
	fmt.Println(cached, informer.LastObservedResourceVersion())
	// Output: true 105
}
