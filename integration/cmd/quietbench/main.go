// Command quietbench measures a FreshInformer on quiet resources (issue 21)
// on a real kube-apiserver and etcd, and prints Markdown tables (for
// docs/benchmarks.md, "Quiet resources").
//
// A quiet informer watches objects nothing writes; it is asked
// WaitForFreshness(rv) for the resource version of a write to a ConfigMap in
// another namespace, so only its freshness probe can answer. For each
// -kinds (cached: Secrets, served from the apiserver's watch cache;
// uncached: PodTemplates, which the control plane serves without one,
// controlplane.UncachedResource) and each -sizes N, it creates N small
// objects in a namespace of their own, then for each -routes (snapshot: the
// default options; bookmark: cache.WithSnapshotProbeLimit(-1)) starts
// -rounds informers one after the other, alternating which route goes
// first in each round so that drift on a shared machine hits both alike,
// and measures on each:
//
//   - -warmup WaitForFreshness calls, reported apart (an informer's first
//     probe can differ: on the bookmark route it is the one that finds that
//     an uncached resource gets no bookmarks);
//   - WaitForFreshness latency, sequential, each for the RV of a fresh
//     write elsewhere: -k calls per route in all (-k-uncached for the
//     uncached kind), split between the rounds: p50, p90, p99, max;
//   - Sync latency: a write elsewhere (untimed), then Sync; -sync-k calls
//     (-sync-k-uncached): p50, p99;
//   - cost, for the waits and the Syncs apart: ProbeStats deltas (probes,
//     requests, snapshots, snapshot matches, behind-snapshot events,
//     relists, advances) and the HTTP requests and response bytes of the
//     informer's own client, counted by a RoundTripper around its
//     rest.Config's transport (transport.go). The informer's own watch is
//     quiet, so that traffic is the probes' and Sync's (plus a bookmark on
//     the informer's watch now and then, and on a relist the informer's new
//     list and watch, which are that probe's cost).
//
// -mode curve measures what one snapshot costs, for choosing
// cache.DefaultSnapshotProbeLimit: in one namespace grown through
// -curve-sizes, through an informer-like client (a ListWatch on a counting
// transport), consistent lists (resourceVersion "") of all N objects:
// without a limit, with limit N+1 (as the snapshot route asks), and, for
// reference, with limit 1 (the bookmark route's first request); time p50 /
// p99 over -curve-reps and response bytes.
//
// Timings are reported, never asserted. It starts its own control plane
// (binaries from `make bins`) unless -cluster (a kubeconfig path) is given;
// the namespaces it creates are left behind there. `make quiet-bench` runs
// it; QUIETBENCH_ARGS passes flags (-help lists them all), for example:
//
//	make quiet-bench                                   # all sizes, kinds, routes
//	make quiet-bench QUIETBENCH_ARGS='-sizes 10,100 -k 10 -sync-k 10'
//	make quiet-bench QUIETBENCH_ARGS='-kinds cached -routes snapshot'
//	make quiet-bench QUIETBENCH_ARGS='-mode curve'     # snapshot cost, to 10000
//	make quiet-bench QUIETBENCH_ARGS='-mode curve -curve-kinds cached,uncached'
//
// Run time on 2 cores at the defaults: a bookmark-route call costs about a
// second on the cached kind and, on the uncached kind, a relist paced by the
// Reflector's backoff (its informers take 20-30 s each), so the bookmark
// half alone is about 7 minutes. While the library has no snapshot route
// both routes behave alike and the whole run took 16 minutes; with the
// route, expect about 9. -mode curve at its defaults takes under a minute.
//
// The tables go to stdout, with the command line, Go and server versions,
// the library's commit and the machine's load average; progress goes to
// stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/freshinformer/freshinformer/integration/internal/runinfo"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/integration/controlplane"
)

var (
	kubeconfig    = flag.String("cluster", "", "run against this cluster (kubeconfig path) instead of starting a control plane; the namespaces made are left behind")
	modeFlag      = flag.String("mode", "quiet", "what to measure: quiet (waits and Sync per size, kind and route), curve (the cost of one snapshot per size), or quiet,curve")
	sizesFlag     = flag.String("sizes", "10,100,1000,3000", "quiet mode: objects per informer")
	kindsFlag     = flag.String("kinds", "cached,uncached", "quiet mode: cached (Secrets, watch cache) and/or uncached (PodTemplates, no watch cache)")
	routesFlag    = flag.String("routes", "snapshot,bookmark", "quiet mode: snapshot (default options) and/or bookmark (WithSnapshotProbeLimit(-1))")
	rounds        = flag.Int("rounds", 2, "quiet mode: informers per size, kind and route, one after the other, routes alternating which goes first; the calls below are split between them")
	kCached       = flag.Int("k", 40, "quiet mode: WaitForFreshness calls per size and route, cached kind (in all, over -rounds)")
	kUncached     = flag.Int("k-uncached", 4, "quiet mode: WaitForFreshness calls per size and route, uncached kind (few: on the bookmark route each is a relist, paced by the Reflector's growing backoff)")
	syncCached    = flag.Int("sync-k", 20, "quiet mode: Sync calls per size and route, cached kind")
	syncUncached  = flag.Int("sync-k-uncached", 2, "quiet mode: Sync calls per size and route, uncached kind")
	warmup        = flag.Int("warmup", 1, "quiet mode: WaitForFreshness calls per informer before measuring, reported apart")
	curveSizes    = flag.String("curve-sizes", "10,100,300,1000,2000,3000,5000,10000", "curve mode: objects in the namespace, ascending (one namespace, grown)")
	curveKinds    = flag.String("curve-kinds", "cached", "curve mode: kinds to list (cached, uncached)")
	curveReps     = flag.Int("curve-reps", 10, "curve mode: lists of each variant per size (p50, p99 of these)")
	payloadBytes  = flag.Int("object-bytes", 64, "payload per object (a Secret's data, a PodTemplate's annotation)")
	createWorkers = flag.Int("create-parallel", 16, "concurrent creates when populating")
	clientLogs    = flag.Bool("client-logs", false, "show client-go's informational logs (on the uncached kind every relist logs a warning that its watch ended); errors show either way")
	pause         = flag.Duration("pause", 0, "quiet mode: a random pause of up to this long before each call's write elsewhere (0: calls back to back; the apiserver paces consistent reads from its watch cache by its 100 ms progress-request period, which back-to-back calls meet every time)")
	callTimeout   = flag.Duration("call-timeout", 2*time.Minute, "bound on each WaitForFreshness and Sync call (a call that hits it counts as an error)")
)

func main() {
	klog.InitFlags(nil)
	flag.Parse()
	if !*clientLogs {
		_ = flag.Set("logtostderr", "false")
		_ = flag.Set("alsologtostderr", "false")
		_ = flag.Set("stderrthreshold", "ERROR")
		klog.SetOutput(io.Discard)
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "quietbench:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[quietbench %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// kind is one resource the informers watch.
type kind struct {
	name     string // cached, uncached
	resource string
	example  kruntime.Object
	create   func(ctx context.Context, cs kubernetes.Interface, ns, name string) error
}

var kinds = map[string]kind{
	"cached": {"cached", "secrets", &corev1.Secret{}, func(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
		_, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Data:       map[string][]byte{"v": []byte(payload())},
		}, metav1.CreateOptions{})
		return err
	}},
	"uncached": {"uncached", controlplane.UncachedResource, &corev1.PodTemplate{}, func(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
		_, err := cs.CoreV1().PodTemplates(ns).Create(ctx, &corev1.PodTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"v": payload()}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			}},
		}, metav1.CreateOptions{})
		return err
	}},
}

func payload() string { return strings.Repeat("x", max(0, *payloadBytes)) }

func run() error {
	ctx := context.Background()
	modes := splitList(*modeFlag)
	for _, m := range modes {
		if m != "quiet" && m != "curve" {
			return fmt.Errorf("-mode: unknown %q", m)
		}
	}
	sizes, err := intList("-sizes", *sizesFlag)
	if err != nil {
		return err
	}
	cSizes, err := intList("-curve-sizes", *curveSizes)
	if err != nil {
		return err
	}
	slices.Sort(cSizes)
	qKinds, err := kindList("-kinds", *kindsFlag)
	if err != nil {
		return err
	}
	cKinds, err := kindList("-curve-kinds", *curveKinds)
	if err != nil {
		return err
	}
	routes := splitList(*routesFlag)
	for _, r := range routes {
		if r != "snapshot" && r != "bookmark" {
			return fmt.Errorf("-routes: unknown %q", r)
		}
	}
	if *rounds < 1 {
		return fmt.Errorf("-rounds must be at least 1")
	}

	var cfg *rest.Config
	if *kubeconfig != "" {
		if cfg, err = clientcmd.BuildConfigFromFlags("", *kubeconfig); err != nil {
			return err
		}
	} else {
		logf("starting a control plane")
		cp, err := controlplane.Start(ctx, controlplane.Options{})
		if err != nil {
			return err
		}
		defer cp.Stop()
		cfg = cp.Config()
		logf("%s", cp.Describe())
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	serverVersion := "unknown"
	if v, err := cs.Discovery().ServerVersion(); err == nil {
		serverVersion = v.GitVersion
	}

	b := &bench{cfg: cfg, cs: cs, prefix: "qb-" + strconv.FormatInt(time.Now().Unix()%1e6, 36)}
	if err := b.setupElsewhere(ctx); err != nil {
		return err
	}
	began, loadStart, rev := time.Now(), runinfo.LoadAvg(), runinfo.Revision()
	var results []*result
	var curve []curveRow
	if slices.Contains(modes, "quiet") {
		for _, k := range qKinds {
			for _, n := range sizes {
				rs, err := b.quiet(ctx, k, n, routes)
				if err != nil {
					return err
				}
				results = append(results, rs...)
			}
		}
	}
	if slices.Contains(modes, "curve") {
		for _, k := range cKinds {
			rows, err := b.curve(ctx, k, cSizes)
			if err != nil {
				return err
			}
			curve = append(curve, rows...)
		}
	}

	fmt.Printf("\n`%s`\n\n", commandLine())
	fmt.Printf("%s, GOMAXPROCS %d, kube-apiserver %s, %s to %s, library at %s\n", runtime.Version(), runtime.GOMAXPROCS(0), serverVersion,
		began.UTC().Format(time.RFC3339), time.Now().UTC().Format(time.RFC3339), rev)
	fmt.Printf("load average (1, 5, 15 min) at start: %s; at end: %s\n", loadStart, runinfo.LoadAvg())
	fmt.Printf("objects: cached = Secrets (watch cache), uncached = %s (no watch cache), %d-byte payload each; response content types: %s\n",
		controlplane.UncachedResource, *payloadBytes, strings.Join(b.contentTypes(), ", "))
	if len(results) > 0 {
		fmt.Printf("routes: snapshot = default options (cache.DefaultSnapshotProbeLimit %d objects, DefaultSnapshotProbeDelay %v, DefaultQuietProbeDelay %v), bookmark = cache.WithSnapshotProbeLimit(-1)\n",
			cache.DefaultSnapshotProbeLimit, cache.DefaultSnapshotProbeDelay, cache.DefaultQuietProbeDelay)
		printQuiet(results)
		printNotes(results)
	}
	if len(curve) > 0 {
		printCurve(curve)
	}
	return nil
}

type bench struct {
	cfg    *rest.Config
	cs     kubernetes.Interface
	prefix string // namespace prefix, unique per run

	elsewhere string
	writes    atomic.Int64

	mu       sync.Mutex
	counters []*counter
}

// setupElsewhere makes the namespace and ConfigMap whose writes give the
// resource versions the quiet informers wait for.
func (b *bench) setupElsewhere(ctx context.Context) error {
	b.elsewhere = b.prefix + "-elsewhere"
	if err := b.namespace(ctx, b.elsewhere); err != nil {
		return err
	}
	_, err := b.cs.CoreV1().ConfigMaps(b.elsewhere).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}}, metav1.CreateOptions{})
	return err
}

// pauseBeforeCall sleeps a random time up to -pause.
func pauseBeforeCall() {
	if *pause > 0 {
		time.Sleep(rand.N(*pause))
	}
}

// writeElsewhere updates the ConfigMap elsewhere and returns the write's
// resource version.
func (b *bench) writeElsewhere(ctx context.Context) (string, error) {
	i := b.writes.Add(1)
	cm, err := b.cs.CoreV1().ConfigMaps(b.elsewhere).Update(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: b.elsewhere},
		Data:       map[string]string{"i": strconv.FormatInt(i, 10)},
	}, metav1.UpdateOptions{})
	if err != nil {
		return "", fmt.Errorf("writing elsewhere: %w", err)
	}
	return cm.ResourceVersion, nil
}

func (b *bench) namespace(ctx context.Context, ns string) error {
	_, err := b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// populate creates objects obj-<from> .. obj-<to-1> of k in ns, in
// parallel.
func (b *bench) populate(ctx context.Context, k kind, ns string, from, to int) error {
	if to <= from {
		return nil
	}
	logf("creating %d %s in %s", to-from, k.resource, ns)
	start := time.Now()
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	for range max(1, *createWorkers) {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(to) {
					return
				}
				if err := k.create(ctx, b.cs, ns, fmt.Sprintf("obj-%06d", i)); err != nil && !apierrors.IsAlreadyExists(err) {
					errOnce.Do(func() { firstErr = err })
					next.Store(int64(to))
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return fmt.Errorf("creating %s in %s: %w", k.resource, ns, firstErr)
	}
	logf("created in %v", time.Since(start).Round(time.Millisecond))
	return nil
}

// client is a ListWatch for k in ns on a transport that counts.
func (b *bench) client(k kind, ns string) (*toolscache.ListWatch, *counter, error) {
	ctr := newCounter()
	c := rest.CopyConfig(b.cfg)
	c.Wrap(ctr.wrap)
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, nil, err
	}
	b.mu.Lock()
	b.counters = append(b.counters, ctr)
	b.mu.Unlock()
	return toolscache.NewListWatchFromClient(cs.CoreV1().RESTClient(), k.resource, ns, fields.Everything()), ctr, nil
}

func (b *bench) contentTypes() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	seen := map[string]bool{}
	for _, c := range b.counters {
		for _, ct := range c.contentTypesSeen() {
			seen[ct] = true
		}
	}
	out := slices.Sorted(func(yield func(string) bool) {
		for ct := range seen {
			if !yield(ct) {
				return
			}
		}
	})
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}

// phase is what one kind of call cost, summed over informers.
type phase struct {
	calls   int
	took    []time.Duration
	errs    int
	probes  cache.ProbeStats // deltas
	traffic traffic
}

// result is one kind, size and route.
type result struct {
	kind       string
	n          int
	route      string
	first      []time.Duration // warm-up waits, one list per informer
	synced     []time.Duration // informer start to synced
	wait, sync phase
	order      []string // per informer, its calls' latencies in call order
}

func (b *bench) quiet(ctx context.Context, k kind, n int, routes []string) ([]*result, error) {
	ns := fmt.Sprintf("%s-%s-%d", b.prefix, k.name, n)
	if err := b.namespace(ctx, ns); err != nil {
		return nil, err
	}
	if err := b.populate(ctx, k, ns, 0, n); err != nil {
		return nil, err
	}
	waits, syncs := *kCached, *syncCached
	if k.name == "uncached" {
		waits, syncs = *kUncached, *syncUncached
	}
	byRoute := map[string]*result{}
	var out []*result
	for _, r := range routes {
		byRoute[r] = &result{kind: k.name, n: n, route: r}
		out = append(out, byRoute[r])
	}
	for round := range *rounds {
		order := slices.Clone(routes)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, route := range order {
			res := byRoute[route]
			w, s := share(waits, round), share(syncs, round)
			if err := b.measure(ctx, k, ns, n, route, w, s, res); err != nil {
				return nil, fmt.Errorf("%s %d %s round %d: %w", k.name, n, route, round, err)
			}
		}
	}
	for _, r := range out {
		logf("%s N=%d %s: waits %s; Syncs %s; per wait %s probes, %s HTTP requests, %s",
			r.kind, r.n, r.route, durs(r.wait.took), durs(r.sync.took), num(perCall(r.wait.probes.Probes, r.wait.calls)),
			r.wait.traffic.breakdown(float64(max(1, r.wait.calls))), kib(float64(r.wait.traffic.totalBytes())/float64(max(1, r.wait.calls))))
	}
	return out, nil
}

// share is round's part of total calls split over -rounds.
func share(total, round int) int {
	s := total / *rounds
	if round < total%*rounds {
		s++
	}
	return s
}

// measure starts one informer on ns for route and runs the warm-up waits,
// waits waits and syncs Syncs on it, adding to res.
func (b *bench) measure(ctx context.Context, k kind, ns string, n int, route string, waits, syncs int, res *result) error {
	lw, ctr, err := b.client(k, ns)
	if err != nil {
		return err
	}
	opts := []cache.Option{
		cache.WithName(fmt.Sprintf("quietbench-%s-%d-%s", k.name, n, route)),
		cache.WithResource(schema.GroupResource{Resource: k.resource}),
	}
	if route == "bookmark" {
		opts = append(opts, cache.WithSnapshotProbeLimit(-1))
	}
	inf := cache.NewSharedIndexInformer(lw, k.example, 0, toolscache.Indexers{}, opts...)
	ictx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	start := time.Now()
	go func() { defer close(done); inf.RunWithContext(ictx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-inf.HasSyncedChecker().Done():
	case <-time.After(5 * time.Minute):
		return errors.New("informer did not sync")
	}
	res.synced = append(res.synced, time.Since(start))
	var seq []string // this informer's calls in order
	defer func() { res.order = append(res.order, strings.Join(seq, " ")) }()
	if got := len(inf.GetStore().ListKeys()); got != n {
		return fmt.Errorf("synced with %d objects, want %d", got, n)
	}

	wait := func() (time.Duration, error) {
		pauseBeforeCall()
		rv, err := b.writeElsewhere(ctx)
		if err != nil {
			return 0, err
		}
		wctx, cancel := context.WithTimeout(ctx, *callTimeout)
		defer cancel()
		t0 := time.Now()
		err = inf.WaitForFreshness(wctx, rv)
		took := time.Since(t0)
		if err != nil {
			return took, fmt.Errorf("WaitForFreshness(%s): %w", rv, err)
		}
		return took, atOrPast(inf, rv)
	}
	for range *warmup {
		took, err := wait()
		if err != nil {
			logf("warm-up wait: %v", err)
			continue
		}
		res.first = append(res.first, took)
		seq = append(seq, "w:"+msf(took))
	}
	settle()

	p0, t0 := inf.ProbeStats(), ctr.snapshot()
	for range waits {
		took, err := wait()
		res.wait.calls++
		if err != nil {
			res.wait.errs++
			logf("%s %d %s: %v", k.name, n, route, err)
			continue
		}
		res.wait.took = append(res.wait.took, took)
		seq = append(seq, msf(took))
	}
	settle()
	p1, t1 := inf.ProbeStats(), ctr.snapshot()
	res.wait.probes = addStats(res.wait.probes, subStats(p1, p0))
	res.wait.traffic = res.wait.traffic.add(t1.sub(t0))

	for range syncs {
		res.sync.calls++
		// A write elsewhere first, so that the server is past the cache and
		// Sync has something to prove.
		pauseBeforeCall()
		rv, err := b.writeElsewhere(ctx)
		if err != nil {
			return err
		}
		sctx, cancel := context.WithTimeout(ctx, *callTimeout)
		s0 := time.Now()
		err = inf.Sync(sctx)
		took := time.Since(s0)
		cancel()
		if err == nil {
			err = atOrPast(inf, rv)
		}
		if err != nil {
			res.sync.errs++
			logf("%s %d %s: Sync: %v", k.name, n, route, err)
			continue
		}
		res.sync.took = append(res.sync.took, took)
		seq = append(seq, "S:"+msf(took))
	}
	settle()
	p2, t2 := inf.ProbeStats(), ctr.snapshot()
	res.sync.probes = addStats(res.sync.probes, subStats(p2, p1))
	res.sync.traffic = res.sync.traffic.add(t2.sub(t1))
	return nil
}

// settle lets the requests of a finished probe end (an auxiliary watch
// cancelled, a relisted informer's new watch started) before counting.
func settle() { time.Sleep(300 * time.Millisecond) }

// atOrPast checks that the informer's applied resource version is at least
// rv once a wait for it returned.
func atOrPast(inf *cache.FreshInformer, rv string) error {
	got := inf.LastObservedResourceVersion()
	c, err := freshness.Compare(got, rv)
	if err != nil {
		return fmt.Errorf("comparing %q with %q: %w", got, rv, err)
	}
	if c < 0 {
		return fmt.Errorf("returned at %s, below %s", got, rv)
	}
	return nil
}

func subStats(a, b cache.ProbeStats) cache.ProbeStats {
	return cache.ProbeStats{
		Probes: a.Probes - b.Probes, Requests: a.Requests - b.Requests, Advances: a.Advances - b.Advances, Relists: a.Relists - b.Relists,
		Snapshots: a.Snapshots - b.Snapshots, SnapshotMatches: a.SnapshotMatches - b.SnapshotMatches, BehindSnapshot: a.BehindSnapshot - b.BehindSnapshot,
	}
}

func addStats(a, b cache.ProbeStats) cache.ProbeStats {
	return cache.ProbeStats{
		Probes: a.Probes + b.Probes, Requests: a.Requests + b.Requests, Advances: a.Advances + b.Advances, Relists: a.Relists + b.Relists,
		Snapshots: a.Snapshots + b.Snapshots, SnapshotMatches: a.SnapshotMatches + b.SnapshotMatches, BehindSnapshot: a.BehindSnapshot + b.BehindSnapshot,
	}
}

// curveRow is one kind and size of the snapshot cost curve.
type curveRow struct {
	kind            string
	n               int
	full, limitN1   []time.Duration
	list1           []time.Duration
	fullBytes       uint64 // per list
	limitN1Bytes    uint64
	list1Bytes      uint64
	fullReqs, reqs1 uint64
}

// curve grows one namespace of k through sizes and times consistent lists
// of it at each size.
func (b *bench) curve(ctx context.Context, k kind, sizes []int) ([]curveRow, error) {
	ns := fmt.Sprintf("%s-curve-%s", b.prefix, k.name)
	if err := b.namespace(ctx, ns); err != nil {
		return nil, err
	}
	lw, ctr, err := b.client(k, ns)
	if err != nil {
		return nil, err
	}
	var rows []curveRow
	have := 0
	for _, n := range sizes {
		if err := b.populate(ctx, k, ns, have, n); err != nil {
			return nil, err
		}
		have = max(have, n)
		row := curveRow{kind: k.name, n: n}
		variants := []struct {
			opts  metav1.ListOptions
			into  *[]time.Duration
			bytes *uint64
			want  int
		}{
			{metav1.ListOptions{}, &row.full, &row.fullBytes, n},
			{metav1.ListOptions{Limit: int64(n) + 1}, &row.limitN1, &row.limitN1Bytes, n},
			{metav1.ListOptions{Limit: 1}, &row.list1, &row.list1Bytes, min(1, n)},
		}
		// One unmeasured list of each first (connection, decoder warm).
		for _, v := range variants {
			if _, err := lw.ListWithContext(ctx, v.opts); err != nil {
				return nil, err
			}
		}
		for rep := range *curveReps {
			for i := range variants {
				v := variants[(i+rep)%len(variants)] // rotate which goes first
				before := ctr.snapshot()
				t0 := time.Now()
				obj, err := lw.ListWithContext(ctx, v.opts)
				took := time.Since(t0)
				if err != nil {
					return nil, err
				}
				if got := meta.LenList(obj); got != v.want {
					return nil, fmt.Errorf("curve %s %d: list (limit %d) returned %d objects, want %d", k.name, n, v.opts.Limit, got, v.want)
				}
				*v.into = append(*v.into, took)
				*v.bytes = ctr.snapshot().sub(before).totalBytes() // the same every time
			}
		}
		logf("curve %s N=%d: full list %s (%s); limit N+1 %s; limit 1 %s", k.name, n, durs(row.full), kib(float64(row.fullBytes)), durs(row.limitN1), durs(row.list1))
		rows = append(rows, row)
	}
	return rows, nil
}

func printQuiet(results []*result) {
	fmt.Println()
	fmt.Println("Quiet informer: WaitForFreshness for the RV of a write to a ConfigMap in another namespace (sequential calls); Sync after a write elsewhere (the write not timed). Latencies in ms; quantiles are nearest-rank, so with fewer than 100 calls p99 is the max.")
	fmt.Println()
	fmt.Println("| kind | N | route | informers (synced in, median) | first wait per informer | waits | wait p50 | p90 | p99 | max | Syncs | Sync p50 | p99 | errors |")
	fmt.Println("| --- | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range results {
		var first []string
		for _, d := range r.first {
			first = append(first, msf(d))
		}
		fmt.Printf("| %s | %d | %s | %d (%s ms) | %s | %d | %s | %s | %s | %s | %d | %s | %s | %d |\n",
			r.kind, r.n, r.route, len(r.synced), msf(quantile(r.synced, 0.5)), strings.Join(first, ", "),
			len(r.wait.took), msf(quantile(r.wait.took, 0.5)), msf(quantile(r.wait.took, 0.9)), msf(quantile(r.wait.took, 0.99)), msf(quantile(r.wait.took, 1)),
			len(r.sync.took), msf(quantile(r.sync.took, 0.5)), msf(quantile(r.sync.took, 0.99)), r.wait.errs+r.sync.errs)
	}
	if slices.ContainsFunc(results, func(r *result) bool { return r.kind == "uncached" }) {
		printOrder(results)
	}
	fmt.Println()
	fmt.Println("Cost per call and per probe, over the measured calls (warm-up excluded). ProbeStats are the informer's counter deltas (Requests counts probes' and Sync's own requests). HTTP requests and bytes are everything the informer's client sent and received meanwhile, counted by a RoundTripper on its rest.Config: response body bytes as client-go read them (after any gzip decoding), watches counted as they stream. The informer's own watch is quiet, so this is the probes' and Sync's traffic, plus any bookmark on that watch, plus, after a relist, the informer's new list and watch (that probe's cost).")
	fmt.Println()
	fmt.Println("| kind | N | route | calls | probes / call | ProbeStats requests / call | HTTP requests / call | KiB / call | HTTP requests / probe | KiB / probe | Snapshots | SnapshotMatches | BehindSnapshot | Relists | Advances |")
	fmt.Println("| --- | ---: | --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range results {
		for _, p := range []struct {
			name string
			ph   phase
		}{{"waits", r.wait}, {"Syncs", r.sync}} {
			calls := float64(max(1, p.ph.calls))
			probes := float64(p.ph.probes.Probes)
			perProbe := func(v float64) string {
				if probes == 0 {
					return "—"
				}
				return num(v / probes)
			}
			st := p.ph.probes
			fmt.Printf("| %s | %d | %s | %d %s | %s | %s | %s | %s | %s | %s | %d | %d | %d | %d | %d |\n",
				r.kind, r.n, r.route, p.ph.calls, p.name, num(probes/calls), num(float64(st.Requests)/calls),
				p.ph.traffic.breakdown(calls), num(float64(p.ph.traffic.totalBytes())/1024/calls),
				perProbe(float64(p.ph.traffic.totalRequests())), perProbe(float64(p.ph.traffic.totalBytes())/1024),
				st.Snapshots, st.SnapshotMatches, st.BehindSnapshot, st.Relists, st.Advances)
		}
	}
}

// printOrder lists each uncached-kind informer's calls in order: there the
// bookmark route's latency depends on how many relists came before.
func printOrder(results []*result) {
	fmt.Println()
	fmt.Println("Calls in order, per informer, uncached kind (ms; w: warm-up, then waits, S: Syncs). A bookmark-route probe there is a relist, paced by client-go's Reflector relist backoff (0.8 s, doubling up to 30 s while relists follow each other within 2 minutes), so back-to-back calls grow slower; an informer's first probe also spends the auxiliary watch's 3 s finding that no bookmark comes.")
	fmt.Println()
	fmt.Println("| kind | N | route | informer | calls |")
	fmt.Println("| --- | ---: | --- | ---: | --- |")
	for _, r := range results {
		if r.kind != "uncached" {
			continue
		}
		for i, o := range r.order {
			fmt.Printf("| %s | %d | %s | %d | %s |\n", r.kind, r.n, r.route, i+1, o)
		}
	}
}

// printNotes says where the counters contradict the route a row claims:
// a snapshot-route row at or under the limit with no snapshot taken (a
// library without the route, or a route that fell back), a bookmark-route
// row with snapshots.
func printNotes(results []*result) {
	var notes []string
	for _, r := range results {
		snaps := r.wait.probes.Snapshots + r.sync.probes.Snapshots
		switch {
		case r.route == "snapshot" && r.n <= cache.DefaultSnapshotProbeLimit && snaps == 0:
			notes = append(notes, fmt.Sprintf("%s %d snapshot: no snapshot taken (ProbeStats.Snapshots 0): these figures are the bookmark route's", r.kind, r.n))
		case r.route == "bookmark" && snaps > 0:
			notes = append(notes, fmt.Sprintf("%s %d bookmark: %d snapshots taken with the snapshot route off", r.kind, r.n, snaps))
		}
	}
	if len(notes) == 0 {
		return
	}
	fmt.Println()
	fmt.Println("Notes:")
	fmt.Println()
	for _, n := range notes {
		fmt.Println("- " + n)
	}
}

func printCurve(rows []curveRow) {
	fmt.Println()
	fmt.Println("Snapshot cost curve: consistent lists (resourceVersion \"\") of one namespace's N objects through an informer's ListWatch on a counting transport; ms, p50 / p99 over the reps (each variant's order rotated per rep); KiB of response body per list. Limit N+1 is what the snapshot route asks; limit 1 is the bookmark route's first request, whose second (the auxiliary watch's bookmark) takes about a second.")
	fmt.Println()
	fmt.Println("| kind | N | full list p50 / p99 | KiB | limit N+1 p50 / p99 | KiB | limit 1 p50 / p99 | KiB |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range rows {
		pp := func(d []time.Duration) string {
			return fmt.Sprintf("%s / %s", msf(quantile(d, 0.5)), msf(quantile(d, 0.99)))
		}
		fmt.Printf("| %s | %d | %s | %s | %s | %s | %s | %s |\n", r.kind, r.n, pp(r.full), num(float64(r.fullBytes)/1024),
			pp(r.limitN1), num(float64(r.limitN1Bytes)/1024), pp(r.list1), num(float64(r.list1Bytes)/1024))
	}
}

// quantile is the nearest-rank q-quantile of d (0 when empty).
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s))*q+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

func msf(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms < 10:
		return fmt.Sprintf("%.2f", ms)
	case ms < 100:
		return fmt.Sprintf("%.1f", ms)
	default:
		return fmt.Sprintf("%.0f", ms)
	}
}

func durs(d []time.Duration) string {
	return fmt.Sprintf("n=%d p50=%sms p90=%sms p99=%sms max=%sms", len(d), msf(quantile(d, 0.5)), msf(quantile(d, 0.9)), msf(quantile(d, 0.99)), msf(quantile(d, 1)))
}

func num(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case v < 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
}

func kib(b float64) string { return num(b/1024) + " KiB" }

func perCall(n uint64, calls int) float64 { return float64(n) / float64(max(1, calls)) }

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func intList(name, s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s: %q is not a size", name, f)
		}
		out = append(out, n)
	}
	return out, nil
}

func kindList(name, s string) ([]kind, error) {
	var out []kind
	for _, f := range splitList(s) {
		k, ok := kinds[f]
		if !ok {
			return nil, fmt.Errorf("%s: unknown kind %q (cached, uncached)", name, f)
		}
		out = append(out, k)
	}
	return out, nil
}

// commandLine is how this run was started, flags as given.
func commandLine() string {
	args := []string{"quietbench"}
	for _, a := range os.Args[1:] {
		if strings.ContainsAny(a, " \t'\"$") {
			a = strconv.Quote(a)
		}
		args = append(args, a)
	}
	return strings.Join(args, " ")
}
