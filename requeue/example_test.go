package requeue_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshtest"
	"github.com/freshinformer/freshinformer/readyourwrites"
	"github.com/freshinformer/freshinformer/requeue"
)

// A worker loop of client-go shape: a reconcile whose owner's writes are
// not yet in the cache parks its key instead of blocking the worker, and
// gets it back the moment the informer applies them.
func ExampleRequeuer_ParkUntilFresh() {
	ctx, cancel := context.WithCancel(context.Background())
	client := freshtest.NewClientset()
	factory := cache.NewSharedInformerFactory(client, 0)
	lister := factory.Core().V1().ConfigMaps().Lister()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	factory.WaitForCacheSync(ctx.Done())
	ryw := readyourwrites.New(factory, 5*time.Second)

	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName]())
	defer queue.ShutDown()
	rq := requeue.New(queue, ryw, requeue.WithMaxPark(10*time.Second))
	defer rq.ShutDown()

	parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "parent", UID: "p1"}}
	owner := readyourwrites.OwnerOf(parent)
	child, err := client.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "child"}}, metav1.CreateOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	// With the writes transport this happens by itself.
	if err := ryw.Record(owner, schema.GroupResource{Resource: "configmaps"}, child); err != nil {
		fmt.Println(err)
		return
	}

	queue.Add(types.NamespacedName{Namespace: "ns", Name: "parent"})
	for {
		key, _ := queue.Get()
		parked, err := rq.ParkUntilFresh(key, owner)
		queue.Done(key)
		if err != nil {
			fmt.Println(err)
			return
		}
		if parked {
			continue // the key comes back when the cache holds the child
		}
		cached, err := lister.ConfigMaps("ns").Get("child")
		fmt.Println("reconcile reads its own write:", err == nil && cached.ResourceVersion == child.ResourceVersion)
		return
	}
	// Output: reconcile reads its own write: true
}
