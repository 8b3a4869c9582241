package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/integration/controlplane"
	"github.com/freshinformer/freshinformer/integration/testenv"
)

// Guarantee 5 on the real apiserver: waits on a quiet informer, Sync, and a
// resource served without a watch cache. The figures these tests log are
// the ones in docs/benchmarks.md ("Quiet resources").

// writeElsewhere updates a ConfigMap in ns and returns the write's RV: a
// resource version the server has committed, from another resource.
func writeElsewhere(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string, i int) string {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: ns},
		Data:       map[string]string{"i": fmt.Sprint(i)},
	}, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("writing elsewhere: %v", err)
	}
	return cm.ResourceVersion
}

func createElsewhere(ctx context.Context, t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	ns := testenv.Namespace(t)
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// timedWait returns how long WaitForFreshness(rv) took; it fails the test
// if the wait does not succeed within bound.
func timedWait(ctx context.Context, t *testing.T, inf *cache.FreshInformer, rv string, bound time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	if err := inf.WaitForFreshness(wctx, rv); err != nil {
		t.Fatalf("wait for %s: %v", rv, err)
	}
	return time.Since(start)
}

type durations []time.Duration

func (d durations) pct(p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func (d durations) String() string {
	return fmt.Sprintf("n=%d p50=%v p90=%v p99=%v max=%v", len(d), d.pct(0.5).Round(time.Millisecond),
		d.pct(0.9).Round(time.Millisecond), d.pct(0.99).Round(time.Millisecond), d.pct(1).Round(time.Millisecond))
}

// probeRoute is one of the quiet-resource probe's routes (cache/doc.go,
// "Quiet resources"): the snapshot (a consistent list compared key by key,
// for small informers) or the bookmark (an auxiliary watch, or a relist
// where the resource has no watch cache).
type probeRoute struct {
	name string
	opts []cache.Option
}

var probeRoutes = []probeRoute{
	{"snapshot", nil},
	{"bookmark", []cache.Option{cache.WithSnapshotProbeLimit(-1)}},
}

// checkRoute fails the test unless the informer's probes took route r.
func checkRoute(t *testing.T, r probeRoute, st cache.ProbeStats) {
	t.Helper()
	if r.name == "snapshot" && st.SnapshotMatches == 0 {
		t.Errorf("snapshot route: no snapshot matched: %+v", st)
	}
	if r.name == "bookmark" && st.Snapshots != 0 {
		t.Errorf("bookmark route: %d snapshots taken: %+v", st.Snapshots, st)
	}
}

// bound is far below the minute a quiet wait took before probing, and far
// above the ~1-2 s it takes, so a loaded machine does not flake it.
const bound = 15 * time.Second

// TestQuietWaitIsBounded: an informer on Secrets in a namespace nothing
// writes, asked for the RV of a write to a ConfigMap, returns in about a
// second instead of at the next bookmark (about a minute).
func TestQuietWaitIsBounded(t *testing.T) {
	for _, route := range probeRoutes {
		t.Run(route.name, func(t *testing.T) {
			cs := testenv.Clientset(t)
			ctx := testenv.Context(t, 5*time.Minute)
			quietNS := testenv.Namespace(t)
			other := createElsewhere(ctx, t, cs)
			inf := startInformer(t, cs, "secrets", &corev1.Secret{}, quietNS, streamPaths[0], route.opts...)

			const n = 40
			var waits durations
			before := inf.ProbeStats()
			for i := range n {
				rv := writeElsewhere(ctx, t, cs, other, i)
				waits = append(waits, timedWait(ctx, t, inf, rv, bound))
				if !atLeast(t, inf.LastObservedResourceVersion(), rv) {
					t.Fatalf("returned at %s below %s", inf.LastObservedResourceVersion(), rv)
				}
			}
			after := inf.ProbeStats()
			t.Logf("quiet WaitForFreshness: %v", waits)
			t.Logf("per wait: %.2f probes, %.2f requests (lists + aux watches), %.2f relists",
				float64(after.Probes-before.Probes)/n, float64(after.Requests-before.Requests)/n, float64(after.Relists-before.Relists)/n)
			if after.Relists != before.Relists {
				t.Errorf("a cached resource was relisted %d times", after.Relists-before.Relists)
			}
			checkRoute(t, route, after)
		})
	}
}

// TestSyncBusyAndQuiet: Sync on a resource written to all the time and on
// a quiet one; both return with the cache at least at the server's RV when
// Sync was called.
func TestSyncBusyAndQuiet(t *testing.T) {
	cs := testenv.Clientset(t)
	ctx := testenv.Context(t, 5*time.Minute)
	busyNS := createElsewhere(ctx, t, cs)
	quietNS := testenv.Namespace(t)
	busy := startInformer(t, cs, "configmaps", &corev1.ConfigMap{}, busyNS, streamPaths[0])
	quiet := startInformer(t, cs, "secrets", &corev1.Secret{}, quietNS, streamPaths[0])

	// A writer keeps the busy namespace busy (one update every ~5 ms).
	wctx, stopWriter := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; wctx.Err() == nil; i++ {
			_, _ = cs.CoreV1().ConfigMaps(busyNS).Update(wctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: busyNS},
				Data:       map[string]string{"i": fmt.Sprint(i)},
			}, metav1.UpdateOptions{})
			time.Sleep(5 * time.Millisecond)
		}
	})
	defer func() { stopWriter(); wg.Wait() }()

	for _, c := range []struct {
		name string
		inf  *cache.FreshInformer
	}{{"busy", busy}, {"quiet", quiet}} {
		const n = 30
		var took durations
		before := c.inf.ProbeStats()
		for range n {
			server := consistentRV(ctx, t, cs, busyNS) // what the server had committed before Sync
			start := time.Now()
			sctx, cancel := context.WithTimeout(ctx, bound)
			err := c.inf.Sync(sctx)
			cancel()
			if err != nil {
				t.Fatalf("%s Sync: %v", c.name, err)
			}
			took = append(took, time.Since(start))
			if !atLeast(t, c.inf.LastObservedResourceVersion(), server) {
				t.Fatalf("%s Sync returned at %s, below %s committed before the call", c.name, c.inf.LastObservedResourceVersion(), server)
			}
		}
		after := c.inf.ProbeStats()
		t.Logf("Sync on a %s resource: %v; per Sync: %.2f requests, %.2f probes", c.name, took,
			float64(after.Requests-before.Requests)/n, float64(after.Probes-before.Probes)/n)
	}
}

// TestProbesNeverReturnEarly writes to the informer's own resource in
// bursts with quiet gaps (so probes run while writes land) and waits for RVs
// of writes to another resource and to its own. Every wait that returns
// must find every write with an RV at or below its target in the indexer.
func TestProbesNeverReturnEarly(t *testing.T) {
	for _, route := range probeRoutes {
		t.Run(route.name, func(t *testing.T) { testProbesNeverReturnEarly(t, route) })
	}
}

func testProbesNeverReturnEarly(t *testing.T, route probeRoute) {
	cs := testenv.Clientset(t)
	ctx := testenv.Context(t, 5*time.Minute)
	ns := testenv.Namespace(t)
	other := createElsewhere(ctx, t, cs)
	inf := startInformer(t, cs, "configmaps", &corev1.ConfigMap{}, ns, streamPaths[0], route.opts...)

	const keys = 4
	for k := range keys {
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("k", k)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	type write struct{ name, rv string }
	var (
		mu  sync.Mutex
		log []write
	)
	wctx, stopWriter := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for i := 0; wctx.Err() == nil; i++ {
			name := fmt.Sprint("k", rng.IntN(keys))
			cm, err := cs.CoreV1().ConfigMaps(ns).Update(wctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Data:       map[string]string{"i": fmt.Sprint(i)},
			}, metav1.UpdateOptions{})
			if err == nil {
				mu.Lock()
				log = append(log, write{name, cm.ResourceVersion})
				mu.Unlock()
			}
			// Keys created and deleted again: a snapshot after both shows
			// neither, while their events are still on the stream.
			if rng.IntN(4) == 0 {
				tmp := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("tmp-", i), Namespace: ns}}
				if _, err := cs.CoreV1().ConfigMaps(ns).Create(wctx, tmp, metav1.CreateOptions{}); err == nil {
					_ = cs.CoreV1().ConfigMaps(ns).Delete(wctx, tmp.Name, metav1.DeleteOptions{})
				}
			}
			// Bursts, then quiet spells long enough for probes to prove gaps.
			if rng.IntN(3) == 0 {
				time.Sleep(time.Duration(1500+rng.IntN(2000)) * time.Millisecond)
			}
		}
	})

	type check struct {
		target string
		seen   map[string]string // name -> cached RV when the wait returned
	}
	var checks []check
	deadline := time.Now().Add(25 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		var target string
		if i%2 == 0 {
			target = writeElsewhere(ctx, t, cs, other, i)
		} else {
			target = consistentRV(ctx, t, cs, ns)
		}
		wctx, cancel := context.WithTimeout(ctx, bound)
		err := inf.WaitForFreshness(wctx, target)
		seen := map[string]string{}
		for k := range keys {
			seen[fmt.Sprint("k", k)] = cachedRV(inf, ns, fmt.Sprint("k", k))
		}
		cancel()
		if err != nil {
			t.Fatalf("wait for %s: %v", target, err)
		}
		checks = append(checks, check{target, seen})
		time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
	}
	stopWriter()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	violations := 0
	for _, c := range checks {
		for _, w := range log {
			if atLeast(t, c.target, w.rv) && !atLeast(t, c.seen[w.name], w.rv) {
				violations++
				t.Errorf("wait for %s returned with %s at %s, but it was written at %s", c.target, w.name, c.seen[w.name], w.rv)
			}
		}
	}
	st := inf.ProbeStats()
	t.Logf("%d waits against %d writes; %+v", len(checks), len(log), st)
	if st.Probes == 0 {
		t.Errorf("no probe ran (%+v): the test did not exercise probes", st)
	}
	checkRoute(t, route, st)
	// Events behind a snapshot are no fault.
	if n := inf.Stats().OutOfOrderRejected; n != 0 {
		t.Errorf("%d events rejected as out of order on a healthy server", n)
	}
}

// TestQuietWaitWithoutWatchCache: PodTemplates are served without a watch
// cache and never get bookmarks; the probe relists the informer instead.
func TestQuietWaitWithoutWatchCache(t *testing.T) {
	for _, route := range probeRoutes {
		t.Run(route.name, func(t *testing.T) { testQuietWaitWithoutWatchCache(t, route) })
	}
}

func testQuietWaitWithoutWatchCache(t *testing.T, route probeRoute) {
	cs := testenv.Clientset(t)
	ctx := testenv.Context(t, 5*time.Minute)
	ns := testenv.Namespace(t)
	other := createElsewhere(ctx, t, cs)
	inf := startInformer(t, cs, controlplane.UncachedResource, &corev1.PodTemplate{}, ns, streamPaths[0], route.opts...)
	if _, err := cs.CoreV1().PodTemplates(ns).Create(ctx, &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "pt"},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// On the bookmark route each probe here is a relist, whose pace the
	// relist backoff of client-go's Reflector sets (0.8-1.6 s, doubling
	// while relists come within 2 minutes of each other); on the snapshot
	// route it is one consistent list.
	n := 3
	if route.name == "snapshot" {
		n = 20
	}
	var waits durations
	for i := range n {
		rv := writeElsewhere(ctx, t, cs, other, i)
		waits = append(waits, timedWait(ctx, t, inf, rv, bound))
		if cachedRV(inf, ns, "pt") == "" {
			t.Fatal("the pod template is not cached after the wait")
		}
	}
	_ = writeElsewhere(ctx, t, cs, other, n)
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 2*bound)
	err := inf.Sync(sctx)
	cancel()
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	t.Logf("no watch cache: WaitForFreshness in a row: %v; then Sync: %v", waits, time.Since(start).Round(time.Millisecond))
	st := inf.ProbeStats()
	t.Logf("%+v", st)
	if route.name == "bookmark" && st.Relists == 0 {
		t.Errorf("no relist on a resource without bookmarks: %+v", st)
	}
	if route.name == "snapshot" && st.Relists != 0 {
		t.Errorf("the snapshot route relisted: %+v", st)
	}
	checkRoute(t, route, st)
}

// TestIdleWaitersCPU: 1000 waits pending for a resource version the server
// will not reach soon cost about the same CPU with probing as without (the
// probes back off to one every 5 s).
func TestIdleWaitersCPU(t *testing.T) {
	cs := testenv.Clientset(t)
	ctx := testenv.Context(t, 5*time.Minute)
	for _, c := range []struct {
		name  string
		delay time.Duration
	}{{"probing off", -1}, {"probing on", 0}} {
		ns := testenv.Namespace(t)
		inf := startInformerWith(t, cs, ns, cache.WithQuietProbeDelay(c.delay))
		target := fmt.Sprint(mustUint(t, inf.LastObservedResourceVersion()) + 1_000_000)
		wctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for range 1000 {
			wg.Go(func() { _ = inf.WaitForFreshness(wctx, target) })
		}
		time.Sleep(2 * time.Second) // let them settle
		cpu0, t0 := cpuTime(t), time.Now()
		time.Sleep(10 * time.Second)
		cpu := cpuTime(t) - cpu0
		wall := time.Since(t0)
		cancel()
		wg.Wait()
		t.Logf("1000 idle waiters, %s: %v CPU in %v (%.2f%% of one core); %+v", c.name, cpu.Round(time.Millisecond), wall.Round(time.Millisecond),
			100*cpu.Seconds()/wall.Seconds(), inf.ProbeStats())
	}
}

func startInformerWith(t *testing.T, cs kubernetes.Interface, ns string, opts ...cache.Option) *cache.FreshInformer {
	t.Helper()
	factory := cache.NewSharedInformerFactory(cs, 0, cache.WithNamespace(ns), cache.WithInformerOptions(opts...))
	inf, ok := cache.FreshInformerOf(factory.Core().V1().Secrets().Informer())
	if !ok {
		t.Fatal("the factory's Secret informer is not a FreshInformer")
	}
	fctx, cancel := context.WithCancel(context.Background())
	factory.StartWithContext(fctx)
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	sctx := testenv.Context(t, time.Minute)
	if !toolsWaitSynced(sctx, inf) {
		t.Fatal("informer did not sync")
	}
	return inf
}

func toolsWaitSynced(ctx context.Context, inf *cache.FreshInformer) bool {
	for !inf.HasSynced() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
	return true
}

func mustUint(t *testing.T, s string) uint64 {
	t.Helper()
	var n uint64
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatalf("resource version %q: %v", s, err)
	}
	return n
}

// cpuTime is this process's user+system CPU time.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
