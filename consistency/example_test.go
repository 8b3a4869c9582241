package consistency_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/consistency"
	"github.com/freshinformer/freshinformer/freshtest"
)

// The swap for a controller built on kube-controller-manager's
// ConsistencyStore: our factory, and NewStore over it in place of
// consistency.NewConsistencyStore(map[...]LastSyncRVGetter{...}). The
// controller's calls stay as they are.
func ExampleNewStore() {
	ctx, cancel := context.WithCancel(context.Background())
	client := freshtest.NewClientset()
	factory := cache.NewSharedInformerFactory(client, 0) // was: informers.NewSharedInformerFactory
	factory.Core().V1().Pods().Informer()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	factory.WaitForCacheSync(ctx.Done())

	store := consistency.NewStore(factory, consistency.WithMaxWait(5*time.Second))

	rs := types.NamespacedName{Namespace: "ns", Name: "web"}
	pod, err := client.CoreV1().Pods("ns").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1"}}, metav1.CreateOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	// PodControl's OnWrite, as NewReplicaSetController sets it up:
	store.WroteAt(rs, "uid-1", podsGR, pod.ResourceVersion)

	// The next sync: it waits (at most WithMaxWait) until the pod cache
	// holds the write, instead of failing and being requeued.
	if err := store.EnsureReady(rs); err != nil {
		var ce *consistency.ConsistencyError
		if errors.As(err, &ce) {
			fmt.Println("skipped:", ce.GroupResource, "cache behind")
		}
		return
	}
	fmt.Println("ready")
	// Output: ready
}
