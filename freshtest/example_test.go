package freshtest_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshtest"
	"github.com/freshinformer/freshinformer/readyourwrites"
)

// A controller's unit test on a fake clientset, with read-your-writes on:
// freshtest.NewClientset in place of fake.NewClientset is the only change.
func ExampleNewClientset() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := freshtest.NewClientset() // was: fake.NewClientset()
	factory := cache.NewSharedInformerFactory(client, 0)
	lister := factory.Core().V1().ConfigMaps().Lister()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }() // stop the informers, then wait for them
	factory.WaitForCacheSync(ctx.Done())

	ryw := readyourwrites.New(factory, 5*time.Second)
	parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "parent", UID: "p1"}}
	owner := readyourwrites.OwnerOf(parent)

	child, err := client.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "child"},
	}, metav1.CreateOptions{})
	if err := ryw.Wrote(owner, child, err); err != nil {
		fmt.Println(err)
		return
	}
	if err := ryw.EnsureFresh(ctx, owner); err != nil {
		fmt.Println(err)
		return
	}
	cached, err := lister.ConfigMaps("ns").Get("child")
	fmt.Println(cached.ResourceVersion == child.ResourceVersion, err)
	// Output: true <nil>
}
