package cache_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshtest"
)

// WhenFresh is the non-blocking form of EnsureFresh, for queues other than
// client-go's workqueue (package requeue builds on it): f runs once the
// caches hold the owner's writes, on the informer's goroutine.
func ExampleReadYourWrites_WhenFresh() {
	ctx, cancel := context.WithCancel(context.Background())
	client := freshtest.NewClientset()
	factory := cache.NewSharedInformerFactory(client, 0)
	lister := factory.Core().V1().ConfigMaps().Lister()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	factory.WaitForCacheSync(ctx.Done())
	ryw := cache.NewReadYourWrites(factory, 5*time.Second)

	parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "parent", UID: "p1"}}
	owner := cache.OwnerOf(parent)
	child, err := client.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "child"}}, metav1.CreateOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := ryw.Record(owner, schema.GroupResource{Resource: "configmaps"}, child); err != nil {
		fmt.Println(err)
		return
	}

	fresh := make(chan error, 1)
	stop := ryw.WhenFresh(owner, func(err error) { fresh <- err }) // quick, never blocks
	defer stop()                                                   // calls it off if we give up first
	fmt.Println("fresh:", <-fresh)
	cached, _ := lister.ConfigMaps("ns").Get("child")
	fmt.Println("cached at the write's version:", cached.ResourceVersion == child.ResourceVersion)
	// Output:
	// fresh: <nil>
	// cached at the write's version: true
}
