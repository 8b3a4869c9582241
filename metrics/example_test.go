package metrics_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/metrics"
)

// One Provider per registry, shared by every informer of the process: two
// informers of one resource (one per namespace here) report under distinct
// labels. With controller-runtime, register on its metrics.Registry.
func ExampleNewProvider() {
	registry := prometheus.NewRegistry()
	provider, err := metrics.NewProvider(registry)
	if err != nil {
		fmt.Println(err)
		return
	}
	var lw toolscache.ListerWatcher = &toolscache.ListWatch{} // toolscache.NewListWatchFromClient(...) in production
	inA := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, nil,
		cache.WithMetrics(provider), cache.WithSelector(cache.Selector{Namespace: "a"}))
	inB := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, nil,
		cache.WithMetrics(provider), cache.WithSelector(cache.Selector{Namespace: "b"}))
	fmt.Printf("%q\n%q\n", provider.Identity(inA), provider.Identity(inB))
	_, err = registry.Gather()
	fmt.Println("scrape error:", err)
	// Output:
	// ["configmaps" "a" "" "" ""]
	// ["configmaps" "b" "" "" ""]
	// scrape error: <nil>
}

// An informer with metrics, and a write it is told about: the
// write-to-visible latency and the lag count from it.
func ExampleProvider() {
	registry := prometheus.NewRegistry()
	provider, err := metrics.NewProvider(registry) // any prometheus.Registerer; controller-runtime: ctrlmetrics.Registry
	if err != nil {
		fmt.Println(err)
		return
	}
	var lw toolscache.ListerWatcher = &toolscache.ListWatch{} // toolscache.NewListWatchFromClient(...) in production
	informer := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, nil, cache.WithMetrics(provider))
	updated := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: "42"}} // a write's answer
	err = informer.RecordWrittenObject(updated)                                                                // optional: feeds write-to-visible latency and lag
	fmt.Printf("%v %q\n", err, provider.Identity(informer))
	// Output: <nil> ["pods" "" "" "" ""]
}
