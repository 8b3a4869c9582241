package writes_test

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshtest"
	"github.com/freshinformer/freshinformer/internal/informertest"
	"github.com/freshinformer/freshinformer/metrics"
	"github.com/freshinformer/freshinformer/readyourwrites"
	"github.com/freshinformer/freshinformer/requeue"
	"github.com/freshinformer/freshinformer/writes"
)

// The README's controller that records its writes through the transport
// and parks a key whose owner's writes are not in the cache yet: it counts
// a child up one write per reconcile, each on what the lister shows, and
// never writes on a stale read (a stale one would conflict).
func ExampleWithOwner() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := "default"
	parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "parent", UID: "p1"}}
	server := freshtest.NewClientset(parent, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "child"}})
	cfg, closeServer := informertest.ServeConfigMaps(server) // a real API server's rest.Config in production
	defer closeServer()
	factory := cache.NewSharedInformerFactory(server, 0)
	lister := factory.Core().V1().ConfigMaps().Lister()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	factory.WaitForCacheSync(ctx.Done())
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	requeueMetrics, err := metrics.NewRequeueMetrics(prometheus.NewRegistry(), "example")
	if err != nil {
		fmt.Println(err)
		return
	}

	ryw := readyourwrites.New(factory, 10*time.Second)
	client := kubernetes.NewForConfigOrDie(writes.WrapConfig(cfg, ryw)) // its writes are recorded
	rq := requeue.New(queue, ryw, requeue.WithMetrics(requeueMetrics))  // queue: TypedRateLimitingInterface[T]
	defer rq.ShutDown()

	parkedNow := false
	reconcile := func(ctx context.Context, key string) (err error) {
		// In reconcile(key), once the owner is known:
		owner := readyourwrites.OwnerOf(parent)
		ctx = writes.WithOwner(ctx, owner)                                      // the one line for writes
		if parked, err := rq.ParkUntilFresh(key, owner); parked || err != nil { // or ryw.EnsureFresh(ctx, owner)
			parkedNow = parked
			return err // parked: the key comes back when the cache holds owner's writes
		}
		parkedNow = false
		// ... read from listers, decide, and write with plain client calls:
		cached, err := lister.ConfigMaps(ns).Get("child")
		if err != nil {
			return err
		}
		child := cached.DeepCopy()
		n, _ := strconv.Atoi(child.Data["count"])
		child.Data = map[string]string{"count": strconv.Itoa(n + 1)}
		_, err = client.CoreV1().ConfigMaps(ns).Update(ctx, child, metav1.UpdateOptions{})
		return err
	}

	queue.Add("default/parent")
	for done := 0; done < 3; {
		key, _ := queue.Get()
		err := reconcile(ctx, key)
		queue.Done(key)
		if err != nil {
			fmt.Println(err) // a stale read would end here, with a conflict
			return
		}
		if !parkedNow {
			done++
			queue.Add(key) // count on
		}
	}
	child, err := server.CoreV1().ConfigMaps(ns).Get(ctx, "child", metav1.GetOptions{})
	fmt.Println(child.Data["count"], err)
	// Output: 3 <nil>
}
