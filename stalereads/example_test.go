package stalereads_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshtest"
	"github.com/freshinformer/freshinformer/readyourwrites"
	"github.com/freshinformer/freshinformer/stalereads"
)

// A controller reads an object right after its own Update, from a cache
// that has not applied it yet (a freshtest.Lag holds the informer behind):
// the detector reports the read, with both resource versions.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := freshtest.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "child"}})
	lag := freshtest.NewLag()
	lag.Fake(&client.Fake)
	defer lag.Release()

	report := func(r stalereads.Report) {
		fmt.Printf("%s: %s of %s %s returned %s, written at %s\n", r.Kind, r.Op, r.Resource, r.Key, r.ResourceVersion, r.WrittenResourceVersion)
	}
	factory := cache.NewSharedInformerFactory(client, 0, cache.WithInformerOptions(cache.WithStaleReadDetection(report)))
	lister := factory.Core().V1().ConfigMaps().Lister()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	factory.WaitForCacheSync(ctx.Done())
	ryw := readyourwrites.New(factory, 5*time.Second) // records the controller's writes
	owner := readyourwrites.OwnerOf(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "parent", UID: "p1"}})

	lag.Hold() // the informer falls behind
	child, _ := lister.ConfigMaps("ns").Get("child")
	child = child.DeepCopy()
	child.Data = map[string]string{"count": "1"}
	updated, err := client.CoreV1().ConfigMaps("ns").Update(ctx, child, metav1.UpdateOptions{})
	if err := ryw.Wrote(owner, updated, err); err != nil {
		fmt.Println(err)
		return
	}
	_, _ = lister.ConfigMaps("ns").Get("child") // the naive read: stale

	lag.Release()
	if err := ryw.EnsureFresh(ctx, owner); err != nil { // the careful one waits first
		fmt.Println(err)
		return
	}
	fresh, _ := lister.ConfigMaps("ns").Get("child")
	fmt.Println("after waiting:", fresh.Data["count"])
	// Output:
	// stale read (older than this process's write): GetByKey of configmaps ns/child returned 2, written at 3
	// after waiting: 1
}
