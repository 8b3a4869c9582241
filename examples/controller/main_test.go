package main

import (
	"context"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The controller's unit test on a fake clientset, read-your-writes on: the
// fake (freshtest) stamps resource versions and answers stale updates with
// 409 Conflict as a server does, so a reconcile that read a stale child
// would show up as a conflict. With read-your-writes there is none, in
// both styles.
func TestControllerOnFakeClientset(t *testing.T) {
	for _, requeueStyle := range []bool{false, true} {
		t.Run("requeue="+strconv.FormatBool(requeueStyle), func(t *testing.T) {
			const target = 30
			client := freshtest.NewClientset(&corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "parent", Labels: map[string]string{"role": "parent"}},
				Data:       map[string]string{"target": strconv.Itoa(target)},
			})
			factory := cache.NewSharedInformerFactory(client, 0, cache.WithNamespace("ns"))
			c, err := newController(client, factory, true)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer func() { cancel(); factory.Shutdown() }()
			factory.Start(ctx.Done())
			if err := factory.WaitForCacheSyncWithContext(ctx).AsError(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				for c.next(ctx, requeueStyle) {
				}
			}()
			for {
				child, err := client.CoreV1().ConfigMaps("ns").Get(ctx, "parent-child", metav1.GetOptions{})
				if err == nil && child.Data["count"] == strconv.Itoa(target) {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("the child did not reach %d: %v %v", target, child, err)
				}
				time.Sleep(5 * time.Millisecond)
			}
			c.queue.ShutDown()
			<-done
			if n := c.conflicts.Load(); n != 0 {
				t.Fatalf("%d conflicts (stale reads) with read-your-writes on", n)
			}
			if n := c.writes.Load(); n != target+1 {
				t.Fatalf("%d writes, want %d", n, target+1)
			}
		})
	}
}
