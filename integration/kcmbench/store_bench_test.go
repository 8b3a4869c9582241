package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
	consistencyutil "k8s.io/kubernetes/pkg/controller/util/consistency"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/consistency"
	"github.com/freshinformer/freshinformer/freshtest"
)

// BenchmarkStoreWriteThenReady is a controller's own cost of the store
// per sync, side by side: one pod write recorded (WroteAt) and the
// owner's next EnsureReady on caches that already hold it (the common
// case without lag), over 20 owners. K is upstream's RealConsistencyStore
// on client-go's factory, F ours on ours (no metrics, as K).
func BenchmarkStoreWriteThenReady(b *testing.B) {
	for _, name := range []string{"K", "F"} {
		b.Run(name, func(b *testing.B) {
			client := freshtest.NewClientset()
			ctx, cancel := context.WithCancel(context.Background())
			var store consistencyutil.ConsistencyStore
			switch name {
			case "K":
				f := informers.NewSharedInformerFactory(client, 0)
				pods, rs := f.Core().V1().Pods().Informer(), f.Apps().V1().ReplicaSets().Informer()
				f.Start(ctx.Done())
				defer func() { cancel(); f.Shutdown() }()
				toolscache.WaitForCacheSync(ctx.Done(), pods.HasSynced, rs.HasSynced)
				store = consistencyutil.NewConsistencyStore(map[schema.GroupResource]consistencyutil.LastSyncRVGetter{podsGR: pods.GetStore(), rsGR: rs.GetStore()})
			default:
				f := cache.NewSharedInformerFactory(client, 0)
				f.Core().V1().Pods().Informer()
				f.Apps().V1().ReplicaSets().Informer()
				f.Start(ctx.Done())
				defer func() { cancel(); f.Shutdown() }()
				f.WaitForCacheSync(ctx.Done())
				store = consistency.NewStore(f)
			}
			p, err := client.CoreV1().Pods("ns").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}, metav1.CreateOptions{})
			if err != nil {
				b.Fatal(err)
			}
			owners := make([]types.NamespacedName, 20)
			for i := range owners {
				owners[i] = types.NamespacedName{Namespace: "ns", Name: fmt.Sprint("rs", i)}
			}
			// The cache holds the pod before the loop: every EnsureReady is nil.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
				store.WroteAt(owners[0], "uid", podsGR, p.ResourceVersion)
				if store.EnsureReady(owners[0]) == nil {
					break
				}
				if time.Now().After(deadline) {
					b.Fatal("the caches never held the pod")
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				o := owners[i%len(owners)]
				store.WroteAt(o, "uid", podsGR, p.ResourceVersion)
				if err := store.EnsureReady(o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
