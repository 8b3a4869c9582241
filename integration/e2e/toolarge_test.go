package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/integration/testenv"
)

// A wait for a resource version beyond the server fails with
// freshness.ErrTooLargeResourceVersion in under 5 s, with a bounded number
// of requests, on the drop-in factory's ConfigMap informer: whether the
// resource is quiet or busy, and on both probe routes (snapshot: a small
// informer; bookmark: snapshots off, as for a large one).

// countingTransport counts the requests for ConfigMaps it carries.
type countingTransport struct {
	next     http.RoundTripper
	requests atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.Contains(r.URL.Path, "/configmaps") {
		c.requests.Add(1)
	}
	return c.next.RoundTrip(r)
}

// tooLargeRoutes are the probe routes a wait beyond the server can take.
var tooLargeRoutes = []struct {
	name string
	opts []cache.Option
}{{"snapshot", nil}, {"bookmark", []cache.Option{cache.WithSnapshotProbeLimit(-1)}}}

// startCountedConfigMaps starts the drop-in factory's ConfigMap informer
// over ns through a transport that counts its requests.
func startCountedConfigMaps(t *testing.T, ns string, opts ...cache.Option) (*cache.FreshInformer, *countingTransport) {
	t.Helper()
	counter := &countingTransport{}
	cfg := testenv.Config(t)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	factory := cache.NewSharedInformerFactory(cs, 0, cache.WithNamespace(ns), cache.WithInformerOptions(opts...))
	inf, ok := cache.FreshInformerOf(factory.Core().V1().ConfigMaps().Informer())
	if !ok {
		t.Fatal("the factory's ConfigMap informer is not a FreshInformer")
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.StartWithContext(ctx)
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	if !toolsWaitSynced(testenv.Context(t, time.Minute), inf) {
		t.Fatal("informer did not sync")
	}
	return inf, counter
}

// createConfigMaps creates n ConfigMaps in ns.
func createConfigMaps(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string, n int) {
	t.Helper()
	for i := range n {
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitBeyond waits for 987654321 through cache.WaitForFreshness, as a new
// user would, and checks the error, the time and the requests it cost.
func waitBeyond(t *testing.T, inf *cache.FreshInformer, counter *countingTransport, maxRequests int64) {
	t.Helper()
	before := counter.requests.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err := cache.WaitForFreshness(ctx, inf, "987654321")
	took := time.Since(start)
	requests := counter.requests.Load() - before
	t.Logf("WaitForFreshness(987654321): %v after %v, %d requests; %+v", err, took.Round(time.Millisecond), requests, inf.ProbeStats())
	if !errors.Is(err, freshness.ErrTooLargeResourceVersion) {
		t.Fatalf("WaitForFreshness(987654321) = %v, want an error matching ErrTooLargeResourceVersion", err)
	}
	if took >= 5*time.Second {
		t.Fatalf("WaitForFreshness(987654321) failed after %v, want under 5s", took)
	}
	if requests > maxRequests {
		t.Fatalf("WaitForFreshness(987654321) sent %d requests, want at most %d", requests, maxRequests)
	}
}

func TestWaitBeyondTheServerFailsFastWhenQuiet(t *testing.T) {
	cs := testenv.Clientset(t)
	for _, route := range tooLargeRoutes {
		t.Run(route.name, func(t *testing.T) {
			ctx := testenv.Context(t, 2*time.Minute)
			ns := testenv.Namespace(t)
			createConfigMaps(ctx, t, cs, ns, 3)
			inf, counter := startCountedConfigMaps(t, ns, route.opts...)
			waitBeyond(t, inf, counter, 2)
		})
	}
}

func TestWaitBeyondTheServerFailsFastWhenBusy(t *testing.T) {
	cs := testenv.Clientset(t)
	for _, route := range tooLargeRoutes {
		t.Run(route.name, func(t *testing.T) {
			ctx := testenv.Context(t, 2*time.Minute)
			ns := testenv.Namespace(t)
			createConfigMaps(ctx, t, cs, ns, 3)
			inf, counter := startCountedConfigMaps(t, ns, route.opts...)
			wctx, stopWrites := context.WithCancel(ctx)
			var wg sync.WaitGroup
			wg.Go(func() { // writes to the informer's own objects, one every 20 ms
				for i := 0; wctx.Err() == nil; i++ {
					_, err := cs.CoreV1().ConfigMaps(ns).Update(wctx, &corev1.ConfigMap{
						ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i%3), Namespace: ns},
						Data:       map[string]string{"i": fmt.Sprint(i)},
					}, metav1.UpdateOptions{})
					if err != nil && wctx.Err() == nil {
						t.Errorf("writing: %v", err)
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			})
			defer func() { stopWrites(); wg.Wait() }()
			time.Sleep(300 * time.Millisecond) // the stream is busy
			waitBeyond(t, inf, counter, 4)
		})
	}
}
