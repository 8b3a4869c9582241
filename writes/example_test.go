package writes_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/freshinformer/freshinformer/metrics"
	"github.com/freshinformer/freshinformer/readyourwrites"
	"github.com/freshinformer/freshinformer/stalereads"
	"github.com/freshinformer/freshinformer/writes"
)

// printRecorder prints what the transport records; a controller passes its
// *readyourwrites.ReadYourWrites instead.
type printRecorder struct{}

func (printRecorder) Record(owner readyourwrites.Owner, gr schema.GroupResource, o metav1.Object) error {
	fmt.Printf("recorded %s %s/%s at %s for %s\n", gr, o.GetNamespace(), o.GetName(), o.GetResourceVersion(), owner)
	return nil
}

func (printRecorder) RecordDelete(owner readyourwrites.Owner, gr schema.GroupResource, o metav1.Object) error {
	fmt.Printf("recorded the delete of %s %s/%s for %s\n", gr, o.GetNamespace(), o.GetName(), owner)
	return nil
}

// The setup change and the one line per reconcile: clients made from the
// wrapped config record the writes made under an owner's context, and the
// write calls stay as they are.
func ExampleWrapConfig() {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"namespace":"ns","name":"child","uid":"c1","resourceVersion":"42"}}`)
	}))
	defer server.Close()

	cfg := writes.WrapConfig(&rest.Config{Host: server.URL}, printRecorder{}) // ryw in a controller
	client := kubernetes.NewForConfigOrDie(cfg)

	// In reconcile:
	parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "parent", UID: "p1"}}
	ctx := writes.WithOwner(context.Background(), readyourwrites.OwnerOf(parent))
	child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "child"}}
	if _, err := client.CoreV1().ConfigMaps("ns").Update(ctx, child, metav1.UpdateOptions{}); err != nil {
		fmt.Println(err)
	}
	// A read, and a write without an owner, are not recorded.
	_, _ = client.CoreV1().ConfigMaps("ns").Get(ctx, "child", metav1.GetOptions{})
	_, _ = client.CoreV1().ConfigMaps("ns").Update(context.Background(), child, metav1.UpdateOptions{})
	// Output: recorded configmaps ns/child at 42 for ConfigMap ns/parent
}

// The stale-write detector: an Update built on a read older than this
// process's own last write of the object is reported (and sent on: the
// server answers it with a conflict).
func ExampleWithStaleWriteDetection() {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"namespace":"ns","name":"child","uid":"c1","resourceVersion":"42"}}`)
	}))
	defer server.Close()

	report := func(r stalereads.Report) {
		fmt.Printf("%s of %s %s at resourceVersion %s; this process wrote %s\n", r.Op, r.Resource, r.Key, r.ResourceVersion, r.WrittenResourceVersion)
	}
	cfg := writes.WrapConfig(&rest.Config{Host: server.URL}, printRecorder{}, writes.WithStaleWriteDetection(report))
	client := kubernetes.NewForConfigOrDie(cfg)
	parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "parent", UID: "p1"}}
	ctx := writes.WithOwner(context.Background(), readyourwrites.OwnerOf(parent))

	child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "child", ResourceVersion: "41"}}
	if _, err := client.CoreV1().ConfigMaps("ns").Update(ctx, child, metav1.UpdateOptions{}); err != nil { // recorded at 42
		fmt.Println(err)
	}
	// The same object, read from a cache that had not caught up:
	if _, err := client.CoreV1().ConfigMaps("ns").Update(ctx, child, metav1.UpdateOptions{}); err != nil {
		fmt.Println(err)
	}
	// Output:
	// recorded configmaps ns/child at 42 for ConfigMap ns/parent
	// update of configmaps ns/child at resourceVersion 41; this process wrote 42
	// recorded configmaps ns/child at 42 for ConfigMap ns/parent
}

// The transport's stale writes counted on the metrics.Provider of the
// controller's informers: freshinformer_stale_writes_total{resource}, from
// 0 at the first write of the resource.
func ExampleWithStaleWriteCounter() {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"namespace":"ns","name":"child","uid":"c1","resourceVersion":"42"}}`)
	}))
	defer server.Close()

	registry := prometheus.NewRegistry()
	provider, err := metrics.NewProvider(registry) // the one the informers use (cache.WithMetrics)
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg := writes.WrapConfig(&rest.Config{Host: server.URL}, printRecorder{},
		writes.WithStaleWriteDetection(func(stalereads.Report) {}), // a handler: reports are not logged
		writes.WithStaleWriteCounter(provider))
	client := kubernetes.NewForConfigOrDie(cfg)
	parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "parent", UID: "p1"}}
	ctx := writes.WithOwner(context.Background(), readyourwrites.OwnerOf(parent))
	child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "child", ResourceVersion: "41"}}
	for range 2 { // the second update is stale: 41, after this process wrote 42
		if _, err := client.CoreV1().ConfigMaps("ns").Update(ctx, child, metav1.UpdateOptions{}); err != nil {
			fmt.Println(err)
		}
	}
	mfs, err := registry.Gather()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, mf := range mfs {
		if mf.GetName() == "freshinformer_stale_writes_total" {
			for _, m := range mf.GetMetric() {
				fmt.Printf("%s{resource=%q} %v\n", mf.GetName(), m.GetLabel()[0].GetValue(), m.GetCounter().GetValue())
			}
		}
	}
	// Output:
	// recorded configmaps ns/child at 42 for ConfigMap ns/parent
	// recorded configmaps ns/child at 42 for ConfigMap ns/parent
	// freshinformer_stale_writes_total{resource="configmaps"} 1
}
