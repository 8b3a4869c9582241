package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/integration/testenv"
	"github.com/freshinformer/freshinformer/metrics"
	"github.com/freshinformer/freshinformer/readyourwrites"
)

// TestSeveralInformersOfOneResource: two namespaced informers of
// ConfigMaps and two cluster-wide ones (two factories alike), sharing one
// metrics provider, on the real server. The scrape succeeds with
// controller-runtime's error handling (HTTPErrorOnError), each scope has
// its own series (the two alike cluster-wide informers share theirs), and read-your-writes routes each write to the
// informers that see it: a write in namespace b is waited for on b's and
// the cluster-wide informers, never on a's; a delete held back by a
// finalizer is fresh once the cache holds the object terminating.
func TestSeveralInformersOfOneResource(t *testing.T) {
	cs := testenv.Clientset(t)
	nsA, nsB, nsC := testenv.Namespace(t), testenv.Namespace(t), testenv.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	registry := prometheus.NewRegistry()
	provider, err := metrics.NewProvider(registry)
	if err != nil {
		t.Fatal(err)
	}
	withMetrics := cache.WithInformerOptions(cache.WithMetrics(provider))
	factories := []*cache.SharedInformerFactory{
		cache.NewSharedInformerFactory(cs, 0, cache.WithNamespace(nsA), withMetrics),
		cache.NewSharedInformerFactory(cs, 0, cache.WithNamespace(nsB), withMetrics),
		cache.NewSharedInformerFactory(cs, 0, withMetrics),
		cache.NewSharedInformerFactory(cs, 0, withMetrics), // alike: a second library's factory
	}
	informers := make([]*cache.FreshInformer, len(factories))
	sources := cache.Sources{}
	for i, f := range factories {
		informers[i], _ = cache.FreshInformerOf(f.Core().V1().ConfigMaps().Informer())
		f.Start(ctx.Done())
		sources = append(sources, f)
	}
	defer func() {
		cancel()
		for _, f := range factories {
			f.Shutdown()
		}
	}()
	for _, f := range factories {
		if err := f.WaitForCacheSyncWithContext(ctx).AsError(); err != nil {
			t.Fatal(err)
		}
	}
	ryw := readyourwrites.New(sources, 30*time.Second)
	parent, err := cs.CoreV1().ConfigMaps(nsA).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "parent"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := readyourwrites.OwnerOf(parent)

	// holds reports whether inf caches ns/name at rv or newer.
	holds := func(inf *cache.FreshInformer, ns, name, rv string) bool {
		obj, ok, _ := inf.GetIndexer().GetByKey(ns + "/" + name)
		if !ok {
			return false
		}
		c, err := freshness.Compare(obj.(*corev1.ConfigMap).ResourceVersion, rv)
		return err == nil && c >= 0
	}
	for i := range 40 {
		ns := []string{nsA, nsB, nsC}[i%3]
		name := fmt.Sprintf("child-%d", i)
		written, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err := ryw.Wrote(owner, written, err); err != nil {
			t.Fatal(err)
		}
		if err := ryw.EnsureFresh(ctx, owner); err != nil {
			t.Fatal(err)
		}
		for j, inf := range informers {
			sees := inf.Selector().Namespace == "" || inf.Selector().Namespace == ns
			if sees && !holds(inf, ns, name, written.ResourceVersion) {
				t.Fatalf("write %d in %s: fresh, but informer %d (%s) does not hold it", i, ns, j, inf.Selector())
			}
		}
	}

	// Only the namespaced informers: a write in c is refused at once.
	namespacedOnly := readyourwrites.New(cache.Sources{factories[0], factories[1]}, 30*time.Second)
	outside, err := cs.CoreV1().ConfigMaps(nsC).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "outside"}}, metav1.CreateOptions{})
	if err := namespacedOnly.Wrote(owner, outside, err); !errors.Is(err, cache.ErrNotWatched) {
		t.Fatalf("a write no informer sees: %v", err)
	}

	// A delete held back by a finalizer: the cache holds the object
	// terminating, which proves the delete.
	held, err := cs.CoreV1().ConfigMaps(nsB).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/hold"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps(nsB).Delete(ctx, held.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	terminating, err := cs.CoreV1().ConfigMaps(nsB).Get(ctx, held.Name, metav1.GetOptions{})
	if err != nil || terminating.DeletionTimestamp == nil {
		t.Fatalf("after deleting an object with a finalizer: %v %v", terminating, err)
	}
	if err := ryw.RecordDelete(owner, schema.GroupResource{Resource: "configmaps"}, terminating); err != nil {
		t.Fatal(err)
	}
	if err := ryw.EnsureFresh(ctx, owner); err != nil {
		t.Fatalf("a delete held back by a finalizer: %v", err)
	}
	terminating.Finalizers = nil
	if _, err := cs.CoreV1().ConfigMaps(nsB).Update(ctx, terminating, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The scrape: one provider, four informers of one resource.
	srv := httptest.NewServer(promhttp.HandlerFor(registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape answered %d: %s", resp.StatusCode, body)
	}
	for _, want := range []string{
		fmt.Sprintf(`freshinformer_pending_waiters{field_selector="",informer_namespace=%q,label_selector="",name="",resource="configmaps"}`, nsA),
		fmt.Sprintf(`freshinformer_pending_waiters{field_selector="",informer_namespace=%q,label_selector="",name="",resource="configmaps"}`, nsB),
		// The two cluster-wide informers are alike in every label: they
		// report together, under one stable identity.
		`freshinformer_pending_waiters{field_selector="",informer_namespace="",label_selector="",name="",resource="configmaps"}`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the scrape has no %s", want)
		}
	}
}
