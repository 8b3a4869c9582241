// Command scale measures a FreshInformer against client-go's plain
// SharedIndexInformer on a real kube-apiserver, in one run, and prints a
// Markdown table (for docs/benchmarks.md):
//
//   - initial sync of N ~1 KiB ConfigMaps: time to synced, heap after GC,
//     CPU seconds (one informer at a time, alternating, median of -reps);
//   - a sustained update stream (-stream long, written by a child process
//     so its CPU is not ours): events/s and CPU per 1000 events, one
//     informer at a time, -stream-rounds each; then both together while
//     this process makes sequential probe writes (-latency-rounds):
//     write -> WaitForFreshness return vs write -> the plain informer's
//     handler, and the FreshInformer's own handler, seeing the same
//     resource version;
//   - relist at -relist-objects: time and allocations (a 410 injected into
//     the watch makes the Reflector relist);
//   - -waiters pending WaitForFreshness calls idle for -idle: CPU seconds,
//     next to the plain informer idle.
//
// latency-shared is the latency measurement with both informers on one
// list and watch stream (teeLW), so that per write only the informers
// differ. -phases picks measurements (sync,relist,stream,latency,
// latency-shared,idle).
//
// -profile DIR writes a CPU profile of every initial sync and update
// stream, and a heap profile of the synced cache, per informer and
// repetition, so the two implementations can be compared entry by entry.
//
// It starts its own control plane (binaries from `make bins`) unless
// -cluster (a kubeconfig path) is given. `make scale` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/freshinformer/freshinformer/integration/internal/runinfo"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/integration/controlplane"
)

var (
	kubeconfig   = flag.String("cluster", "", "run against this cluster instead of starting a control plane")
	objects      = flag.String("objects", "10000,30000", "initial-sync sizes (ConfigMaps of ~1 KiB)")
	reps         = flag.Int("reps", 3, "repetitions of each sync and relist measurement (median reported)")
	stream       = flag.Duration("stream", 30*time.Second, "length of each sustained update stream")
	writers      = flag.Int("writers", 8, "concurrent writers of the update stream")
	relistN      = flag.Int("relist-objects", 10000, "objects for the relist, stream, latency and idle measurements (one of -objects; 0: none)")
	phases       = flag.String("phases", "sync,relist,stream,latency,latency-shared,idle", "measurements to run (all but sync at -relist-objects)")
	streamRounds = flag.Int("stream-rounds", 2, "update streams per informer (alternating which goes first), summed")
	latRounds    = flag.Int("latency-rounds", 2, "rounds of the under-load latency measurement (each -stream long), probes pooled")
	waiters      = flag.Int("waiters", 1000, "pending WaitForFreshness calls for the idle measurement")
	idle         = flag.Duration("idle", 20*time.Second, "idle measurement length")
	childStream  = flag.String("child-stream", "", "internal: namespace to write the update stream into, then exit")
	childN       = flag.Int("child-n", 0, "internal: objects in -child-stream's namespace")
	profileDir   = flag.String("profile", "", "write CPU profiles of each initial sync and update stream, and a heap profile once synced, into this directory (sync-N-IMPL-REP.{cpu,heap}.pprof, stream-N-IMPL-ROUND.cpu.pprof; merge one implementation's with `go tool pprof`)")
)

func main() {
	klog.InitFlags(nil)
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[scale %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run() error {
	ctx := context.Background()
	var cfg *rest.Config
	var err error
	if *kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", *kubeconfig)
		if err != nil {
			return err
		}
		cfg.QPS, cfg.Burst = 1000, 2000
	}
	if *childStream != "" {
		return writeStream(ctx, cfg, *childStream, *childN, *stream)
	}
	if cfg == nil {
		logf("starting a control plane")
		cp, err := controlplane.Start(ctx, controlplane.Options{})
		if err != nil {
			return err
		}
		defer cp.Stop()
		cfg = cp.Config()
		dir, err := os.MkdirTemp("", "freshinformer-scale-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*kubeconfig = filepath.Join(dir, "kubeconfig")
		if err := cp.WriteKubeConfig(*kubeconfig); err != nil {
			return err
		}
		logf("%s", cp.Describe())
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var sizes []int
	for _, s := range strings.Split(*objects, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("-objects: %w", err)
		}
		sizes = append(sizes, n)
	}

	began, loadStart, rev := time.Now(), runinfo.LoadAvg(), runinfo.Revision() // the tree as built, before any edit during the run
	var rows []string
	row := func(what, plain, fresh, ratio string) {
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s |", what, plain, fresh, ratio))
	}
	for _, n := range sizes {
		ns := fmt.Sprintf("scale-%d", n)
		if err := populate(ctx, cs, ns, n); err != nil {
			return err
		}
		steps := []struct {
			phase string
			run   func(context.Context, kubernetes.Interface, string, int, func(what, plain, fresh, ratio string)) error
		}{{"sync", syncRows}, {"relist", relistRows}, {"stream", streamRows}, {"latency", latencyRows}, {"latency-shared", sharedLatencyRows}, {"idle", idleRows}}
		for _, st := range steps {
			if !slices.Contains(strings.Split(*phases, ","), st.phase) || (st.phase != "sync" && n != *relistN) {
				continue
			}
			if err := st.run(ctx, cs, ns, n, row); err != nil {
				return err
			}
		}
	}

	fmt.Printf("\n%s, GOMAXPROCS %d, %s to %s, library at %s\n", runtime.Version(), runtime.GOMAXPROCS(0), began.UTC().Format(time.RFC3339), time.Now().UTC().Format(time.RFC3339), rev)
	fmt.Printf("load average (1, 5, 15 min) at start: %s; at end: %s\n\n", loadStart, runinfo.LoadAvg())
	fmt.Println("| measurement | client-go informer | FreshInformer | ratio / difference |")
	fmt.Println("| --- | --- | --- | --- |")
	for _, r := range rows {
		fmt.Println(r)
	}
	return nil
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
func ms(d time.Duration) float64 {
	return float64(d) / float64(time.Millisecond)
}
func dur(d time.Duration) string { return d.Round(time.Millisecond).String() }
func ratio(fresh, plain float64) string {
	if plain == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.3fx", fresh/plain)
}

// cpuTime is this process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// payload is ~1 KiB of data per ConfigMap.
var payload = strings.Repeat("x", 1000)

func populate(ctx context.Context, cs kubernetes.Interface, ns string, n int) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return err
	}
	have := 0
	if l.RemainingItemCount != nil {
		have = int(*l.RemainingItemCount) + len(l.Items)
	} else {
		have = len(l.Items)
	}
	if have >= n {
		return nil
	}
	logf("creating %d ConfigMaps in %s", n-have, ns)
	start := time.Now()
	var next atomic.Int64
	next.Store(int64(have))
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%06d", i)},
					Data:       map[string]string{"payload": payload, "seq": "0"},
				}, metav1.CreateOptions{})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					select {
					case errc <- err:
					default:
					}
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
	}
	logf("created in %v", time.Since(start).Round(time.Millisecond))
	return nil
}

// informer is what both kinds offer for these measurements.
type informer interface {
	toolscache.SharedIndexInformer
}

func newInformer(lw toolscache.ListerWatcher, fresh bool) (informer, *cache.FreshInformer) {
	if fresh {
		f := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{},
			cache.WithResource(schema.GroupResource{Resource: "configmaps"}))
		return f, f
	}
	return toolscache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{}), nil
}

func listWatch(cs kubernetes.Interface, ns string) *toolscache.ListWatch {
	return toolscache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "configmaps", ns, fields.Everything())
}

// started runs inf until the returned stop is called.
func started(inf informer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); inf.RunWithContext(ctx) }()
	return func() { cancel(); <-done }
}

type syncResult struct {
	took time.Duration
	heap uint64
	cpu  time.Duration
}

func measureSync(ctx context.Context, cs kubernetes.Interface, ns string, n int, fresh bool, rep int) (syncResult, error) {
	base := heapAfterGC()
	prof, err := startProfile("sync", n, fresh, rep)
	if err != nil {
		return syncResult{}, err
	}
	defer func() { _ = prof.stopCPU() }() // error paths; stopped below otherwise
	cpu0 := cpuTime()
	start := time.Now()
	inf, _ := newInformer(listWatch(cs, ns), fresh)
	stop := started(inf)
	defer stop()
	// The synced channel itself, not WaitForCacheSync (which polls every
	// 100 ms): both informers close it once the initial list is applied.
	select {
	case <-inf.HasSyncedChecker().Done():
	case <-time.After(5 * time.Minute):
		return syncResult{}, fmt.Errorf("sync of %d timed out", n)
	}
	r := syncResult{took: time.Since(start), cpu: cpuTime() - cpu0}
	if err := prof.stopCPU(); err != nil {
		return r, err
	}
	if got := len(inf.GetStore().ListKeys()); got < n {
		return r, fmt.Errorf("synced with %d objects, want %d", got, n)
	}
	h := heapAfterGC()
	if h > base {
		r.heap = h - base
	}
	if err := prof.writeHeap(); err != nil {
		return r, err
	}
	runtime.KeepAlive(inf)
	return r, nil
}

func rangeOf(rs []syncResult, f func(syncResult) float64) (lo, hi float64) {
	for i, r := range rs {
		v := f(r)
		if i == 0 || v < lo {
			lo = v
		}
		if i == 0 || v > hi {
			hi = v
		}
	}
	return lo, hi
}

func medianSync(rs []syncResult) syncResult {
	med := func(f func(syncResult) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return syncResult{
		took: time.Duration(med(func(r syncResult) float64 { return float64(r.took) })),
		heap: uint64(med(func(r syncResult) float64 { return float64(r.heap) })),
		cpu:  time.Duration(med(func(r syncResult) float64 { return float64(r.cpu) })),
	}
}

// expiringLW ends the current watch with a 410 Gone error event on demand,
// which makes the Reflector relist.
type expiringLW struct {
	*toolscache.ListWatch
	watched chan struct{} // a watch was started (after a list is in the queue)
	mu      sync.Mutex
	cur     *expiringWatch
}

type expiringWatch struct {
	watch.Interface
	out  chan watch.Event
	kick chan struct{}
	once sync.Once
}

func (e *expiringWatch) ResultChan() <-chan watch.Event { return e.out }
func (e *expiringWatch) Stop()                          { e.Interface.Stop() }

// IsWatchListSemanticsUnSupported: relists are plain lists, as client-go
// does after a 410 when watch-list is off.
func (*expiringLW) IsWatchListSemanticsUnSupported() bool { return true }

func (l *expiringLW) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := l.ListWatch.WatchWithContext(ctx, opts)
	if err != nil {
		return nil, err
	}
	ew := &expiringWatch{Interface: w, out: make(chan watch.Event), kick: make(chan struct{})}
	go func() {
		defer close(ew.out)
		in := w.ResultChan()
		for {
			select {
			case ev, ok := <-in:
				if !ok {
					return
				}
				select {
				case ew.out <- ev:
				case <-ew.kick:
					ew.expire()
					return
				}
			case <-ew.kick:
				ew.expire()
				return
			}
		}
	}()
	l.mu.Lock()
	l.cur = ew
	l.mu.Unlock()
	select {
	case l.watched <- struct{}{}:
	default:
	}
	return ew, nil
}

func (e *expiringWatch) expire() {
	st := apierrors.NewResourceExpired("expired by the scale benchmark").Status()
	e.out <- watch.Event{Type: watch.Error, Object: &st}
	// The Reflector stops the watch on an error; drain until it does.
	go func() {
		for range e.Interface.ResultChan() {
		}
	}()
}

func (l *expiringLW) expire() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur == nil {
		return false
	}
	l.cur.once.Do(func() { close(l.cur.kick) })
	l.cur = nil
	return true
}

type relistResult struct {
	took   time.Duration
	allocs uint64
	bytes  uint64
}

// measureRelist syncs one informer (list then watch), then makes it relist
// twice and measures each relist: from the 410 until the Reflector starts
// its next watch, which it does once the list is decoded and replaced into
// the informer's queue.
func measureRelist(ctx context.Context, cs kubernetes.Interface, ns string, fresh bool) ([]relistResult, error) {
	lw := &expiringLW{ListWatch: listWatch(cs, ns), watched: make(chan struct{}, 1)}
	inf, _ := newInformer(lw, fresh)
	stop := started(inf)
	defer stop()
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("no sync")
	}
	var out []relistResult
	for i := range 2 {
		time.Sleep(500 * time.Millisecond)
		select {
		case <-lw.watched:
		default:
		}
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		start := time.Now()
		if !lw.expire() {
			return nil, fmt.Errorf("no watch to expire")
		}
		select {
		case <-lw.watched:
		case <-time.After(2 * time.Minute):
			return nil, fmt.Errorf("relist %d did not complete", i)
		}
		took := time.Since(start)
		runtime.ReadMemStats(&m1)
		out = append(out, relistResult{took: took, allocs: m1.Mallocs - m0.Mallocs, bytes: m1.TotalAlloc - m0.TotalAlloc})
	}
	return out, nil
}

func medianRelist(rs []relistResult) relistResult {
	slices.SortFunc(rs, func(a, b relistResult) int { return int(a.took - b.took) })
	r := rs[len(rs)/2]
	al := make([]uint64, len(rs))
	by := make([]uint64, len(rs))
	for i, x := range rs {
		al[i], by[i] = x.allocs, x.bytes
	}
	slices.Sort(al)
	slices.Sort(by)
	r.allocs, r.bytes = al[len(al)/2], by[len(by)/2]
	return r
}

type streamResult struct {
	events int64
	took   time.Duration
	cpu    time.Duration
}

func (s streamResult) rate() float64 { return float64(s.events) / s.took.Seconds() }
func (s streamResult) cpuPer1000() float64 {
	if s.events == 0 {
		return 0
	}
	return ms(s.cpu) * 1000 / float64(s.events)
}

// startWriter runs the update stream in a child process (its CPU is not
// counted as ours).
func startWriter(ns string, n int) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-cluster", *kubeconfig, "-child-stream", ns, "-child-n", strconv.Itoa(n),
		"-stream", stream.String(), "-writers", strconv.Itoa(*writers))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd, cmd.Start()
}

func measureStream(ctx context.Context, cs kubernetes.Interface, ns string, n int, fresh bool, round int) (streamResult, error) {
	inf, _ := newInformer(listWatch(cs, ns), fresh)
	var events atomic.Int64
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, _ any) { events.Add(1) },
	}); err != nil {
		return streamResult{}, err
	}
	stop := started(inf)
	defer stop()
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return streamResult{}, fmt.Errorf("no sync")
	}
	runtime.GC()
	cmd, err := startWriter(ns, n)
	if err != nil {
		return streamResult{}, err
	}
	prof, err := startProfile("stream", n, fresh, round)
	if err != nil {
		return streamResult{}, err
	}
	defer func() { _ = prof.stopCPU() }()
	e0, c0, t0 := events.Load(), cpuTime(), time.Now()
	werr := cmd.Wait()
	// Let the last events arrive.
	time.Sleep(time.Second)
	r := streamResult{events: events.Load() - e0, took: time.Since(t0), cpu: cpuTime() - c0}
	if err := prof.stopCPU(); err != nil {
		return r, err
	}
	if werr != nil {
		return r, fmt.Errorf("writer: %w", werr)
	}
	return r, nil
}

// writeStream is the child process: -writers goroutines update random
// ConfigMaps for d.
func writeStream(ctx context.Context, cfg *rest.Config, ns string, n int, d time.Duration) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	end := time.Now().Add(d)
	var wrote, failed atomic.Int64
	var wg sync.WaitGroup
	for w := range *writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for time.Now().Before(end) {
				name := fmt.Sprintf("cm-%06d", 1+rng.IntN(n-1)) // cm-000000 is the relist marker
				_, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, fmt.Appendf(nil, `{"data":{"seq":"%d"}}`, rng.Int64()), metav1.PatchOptions{})
				if err != nil {
					failed.Add(1)
				} else {
					wrote.Add(1)
				}
			}
		})
	}
	wg.Wait()
	logf("writer: %d updates, %d failed", wrote.Load(), failed.Load())
	return nil
}

// latencies are per probe: handler is the plain informer's handler seeing
// the write, wait WaitForFreshness returning, own the FreshInformer's own
// handler seeing it (same stream as wait: the difference between wait and
// handler that is not the two watch streams').
type latencies struct{ handler, wait, own []time.Duration }

// measureLatency runs both informers on ns while the child writes the
// stream, and makes sequential probe writes here: for each, the time from
// the write's return to WaitForFreshness returning, and to the plain
// informer's handler seeing the write's resource version.
func measureLatency(ctx context.Context, cs kubernetes.Interface, ns string, n int, shared bool) (latencies, error) {
	var plainLW, freshLW toolscache.ListerWatcher = listWatch(cs, ns), listWatch(cs, ns)
	if shared {
		tee := newTeeLW(listWatch(cs, ns), 2)
		plainLW, freshLW = tee, tee
	}
	plain, _ := newInformer(plainLW, false)
	_, fresh := newInformer(freshLW, true)
	var mu sync.Mutex
	seen, seenOwn := map[string]time.Time{}, map[string]time.Time{}
	recorder := func(into map[string]time.Time) func(obj any) {
		return func(obj any) {
			cm := obj.(*corev1.ConfigMap)
			if strings.HasPrefix(cm.Name, "probe-") {
				now := time.Now()
				mu.Lock()
				into[cm.ResourceVersion] = now
				mu.Unlock()
			}
		}
	}
	for inf, into := range map[informer]map[string]time.Time{plain: seen, fresh: seenOwn} {
		record := recorder(into)
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { record(obj) },
			UpdateFunc: func(_, obj any) { record(obj) },
		}); err != nil {
			return latencies{}, err
		}
	}
	stopP, stopF := started(plain), started(fresh)
	defer stopP()
	defer stopF()
	if !toolscache.WaitForCacheSync(ctx.Done(), plain.HasSynced, fresh.HasSynced) {
		return latencies{}, fmt.Errorf("no sync")
	}
	cmd, err := startWriter(ns, n)
	if err != nil {
		return latencies{}, err
	}
	defer cmd.Wait()
	type probe struct {
		rv       string
		returned time.Time
		fresh    time.Time
	}
	var probes []probe
	end := time.Now().Add(*stream - time.Second)
	for i := 0; time.Now().Before(end); i++ {
		name := fmt.Sprintf("probe-%d", i%10)
		obj, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, fmt.Appendf(nil, `{"data":{"i":"%d"}}`, i), metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			obj, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		}
		if err != nil {
			return latencies{}, err
		}
		returned := time.Now()
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = fresh.WaitForFreshness(wctx, obj.ResourceVersion)
		cancel()
		if err != nil {
			return latencies{}, err
		}
		probes = append(probes, probe{obj.ResourceVersion, returned, time.Now()})
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // late handler deliveries
	var lat latencies
	mu.Lock()
	defer mu.Unlock()
	for _, p := range probes[min(10, len(probes)):] { // the first ten are creates
		h, ok := seen[p.rv]
		o, okOwn := seenOwn[p.rv]
		if !ok || !okOwn {
			continue
		}
		lat.handler = append(lat.handler, h.Sub(p.returned))
		lat.wait = append(lat.wait, p.fresh.Sub(p.returned))
		lat.own = append(lat.own, o.Sub(p.returned))
	}
	if len(lat.wait) == 0 {
		return lat, fmt.Errorf("no probe seen by the plain informer's handler")
	}
	return lat, nil
}

func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q * float64(len(s)-1))
	return s[i]
}

// measureIdle: a quiet namespace of n objects, each informer alone for
// -idle; the FreshInformer with -waiters pending waits for an RV nobody
// will write.
// probes counts the quiet-resource probe requests the FreshInformer sent
// meanwhile (its waiters' target is never reached, so it probes, backing
// off).
func measureIdle(ctx context.Context, cs kubernetes.Interface, ns string) (plainCPU, freshCPU time.Duration, probes uint64, err error) {
	for _, isFresh := range []bool{false, true} {
		inf, f := newInformer(listWatch(cs, ns), isFresh)
		stop := started(inf)
		if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			stop()
			return 0, 0, 0, fmt.Errorf("no sync")
		}
		wctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		if f != nil {
			for range *waiters {
				wg.Go(func() { _ = f.WaitForFreshness(wctx, "999999999999999") })
			}
			for f.Stats().PendingWaiters < *waiters {
				time.Sleep(time.Millisecond)
			}
		}
		runtime.GC()
		time.Sleep(time.Second)
		var r0 uint64
		if f != nil {
			r0 = f.ProbeStats().Requests
		}
		c0 := cpuTime()
		time.Sleep(*idle)
		c := cpuTime() - c0
		if f != nil {
			probes = f.ProbeStats().Requests - r0
		}
		cancel()
		wg.Wait()
		stop()
		if isFresh {
			freshCPU = c
		} else {
			plainCPU = c
		}
		logf("idle fresh=%v: %.3fs CPU", isFresh, c.Seconds())
	}
	return plainCPU, freshCPU, probes, nil
}

// alternating says which informer runs first in round i (fresh: true),
// so that a warming server favours neither.
func alternating(i int) []bool {
	if i%2 == 1 {
		return []bool{true, false}
	}
	return []bool{false, true}
}

// syncRows: initial sync of n objects, -reps times each, alternating.
func syncRows(ctx context.Context, cs kubernetes.Interface, ns string, n int, row func(what, plain, fresh, ratio string)) error {
	var ps, fs []syncResult
	for i := range *reps {
		for _, fresh := range alternating(i) {
			r, err := measureSync(ctx, cs, ns, n, fresh, i)
			if err != nil {
				return err
			}
			logf("sync %d fresh=%v: %v, heap %.1f MiB, cpu %.2fs", n, fresh, r.took.Round(time.Millisecond), mib(r.heap), r.cpu.Seconds())
			if fresh {
				fs = append(fs, r)
			} else {
				ps = append(ps, r)
			}
		}
	}
	p, f := medianSync(ps), medianSync(fs)
	// Median (range over the -reps runs): on a shared machine the range
	// says how much of a ratio is noise.
	took := func(rs []syncResult, m syncResult) string {
		lo, hi := rangeOf(rs, func(r syncResult) float64 { return r.took.Seconds() })
		return fmt.Sprintf("%.2f s (%.2f–%.2f)", m.took.Seconds(), lo, hi)
	}
	cpu := func(rs []syncResult, m syncResult) string {
		lo, hi := rangeOf(rs, func(r syncResult) float64 { return r.cpu.Seconds() })
		return fmt.Sprintf("%.2f s (%.2f–%.2f)", m.cpu.Seconds(), lo, hi)
	}
	row(fmt.Sprintf("initial sync %d: time to synced, median (range) of %d", n, len(ps)), took(ps, p), took(fs, f), ratio(f.took.Seconds(), p.took.Seconds()))
	row(fmt.Sprintf("initial sync %d: heap after GC", n), fmt.Sprintf("%.1f MiB", mib(p.heap)), fmt.Sprintf("%.1f MiB", mib(f.heap)), ratio(float64(f.heap), float64(p.heap)))
	row(fmt.Sprintf("initial sync %d: CPU, median (range)", n), cpu(ps, p), cpu(fs, f), ratio(f.cpu.Seconds(), p.cpu.Seconds()))
	return nil
}

// relistRows: relists at n objects.
func relistRows(ctx context.Context, cs kubernetes.Interface, ns string, n int, row func(what, plain, fresh, ratio string)) error {
	var pr, fr []relistResult
	for range *reps {
		for _, fresh := range []bool{false, true} {
			r, err := measureRelist(ctx, cs, ns, fresh)
			if err != nil {
				return err
			}
			for _, x := range r {
				logf("relist %d fresh=%v: %v, %d allocs, %.1f MiB", n, fresh, x.took.Round(time.Millisecond), x.allocs, mib(x.bytes))
			}
			if fresh {
				fr = append(fr, r...)
			} else {
				pr = append(pr, r...)
			}
		}
	}
	p2, f2 := medianRelist(pr), medianRelist(fr)
	row(fmt.Sprintf("relist %d: time", n), dur(p2.took), dur(f2.took), ratio(f2.took.Seconds(), p2.took.Seconds()))
	row(fmt.Sprintf("relist %d: allocations", n), fmt.Sprintf("%d (%.1f MiB)", p2.allocs, mib(p2.bytes)), fmt.Sprintf("%d (%.1f MiB)", f2.allocs, mib(f2.bytes)), ratio(float64(f2.allocs), float64(p2.allocs)))
	return nil
}

// streamRows: the update stream, one informer at a time, -stream-rounds
// each, alternating which goes first; events and CPU are summed per
// informer.
func streamRows(ctx context.Context, cs kubernetes.Interface, ns string, n int, row func(what, plain, fresh, ratio string)) error {
	var p3, f3 streamResult
	for round := range *streamRounds {
		for _, fresh := range alternating(round) {
			r, err := measureStream(ctx, cs, ns, n, fresh, round)
			if err != nil {
				return err
			}
			logf("stream fresh=%v: %d events in %v, cpu %.2fs", fresh, r.events, r.took.Round(time.Millisecond), r.cpu.Seconds())
			sum := &p3
			if fresh {
				sum = &f3
			}
			sum.events += r.events
			sum.took += r.took
			sum.cpu += r.cpu
		}
	}
	row(fmt.Sprintf("update stream (%d writers, %d x %v): events/s", *writers, *streamRounds, *stream), fmt.Sprintf("%.0f", p3.rate()), fmt.Sprintf("%.0f", f3.rate()), ratio(f3.rate(), p3.rate()))
	row("update stream: CPU per 1000 events", fmt.Sprintf("%.1f ms", p3.cpuPer1000()), fmt.Sprintf("%.1f ms", f3.cpuPer1000()), ratio(f3.cpuPer1000(), p3.cpuPer1000()))
	return nil
}

// latencyRows: write -> visible under load, both informers at once.
func latencyRows(ctx context.Context, cs kubernetes.Interface, ns string, n int, row func(what, plain, fresh, ratio string)) error {
	return latencyRowsOn(ctx, cs, ns, n, row, false)
}

// sharedLatencyRows is latencyRows with both informers on one list and
// watch stream (teeLW): per write, what differs is only the informers.
func sharedLatencyRows(ctx context.Context, cs kubernetes.Interface, ns string, n int, row func(what, plain, fresh, ratio string)) error {
	return latencyRowsOn(ctx, cs, ns, n, row, true)
}

func latencyRowsOn(ctx context.Context, cs kubernetes.Interface, ns string, n int, row func(what, plain, fresh, ratio string), shared bool) error {
	what := "under load"
	if shared {
		what = "under load, one watch stream shared"
	}
	var lat latencies
	for round := range *latRounds {
		l, err := measureLatency(ctx, cs, ns, n, shared)
		if err != nil {
			return err
		}
		logf("latency round %d: %d probes", round, len(l.wait))
		lat.handler = append(lat.handler, l.handler...)
		lat.wait = append(lat.wait, l.wait...)
		lat.own = append(lat.own, l.own...)
	}
	for _, q := range []struct {
		name string
		p    float64
	}{{"p50", 0.5}, {"p99", 0.99}, {"max", 1}} {
		h, w, o := quantile(lat.handler, q.p), quantile(lat.wait, q.p), quantile(lat.own, q.p)
		row(fmt.Sprintf("%s: write -> visible, %s (%d probes)", what, q.name, len(lat.wait)),
			fmt.Sprintf("%.2f ms (handler)", ms(h)), fmt.Sprintf("%.2f ms (WaitForFreshness; its own handler %.2f ms)", ms(w), ms(o)), fmt.Sprintf("%+.2f ms", ms(w-h)))
	}
	// Per probe, both from the FreshInformer's one stream: how much later
	// (positive) or earlier WaitForFreshness returned than that informer's
	// own handler saw the write. This isolates the freshness path from the
	// difference between two watch streams, which dominates the rows above.
	perProbe := func(name string, other []time.Duration) {
		diff := make([]time.Duration, len(lat.wait))
		for i := range lat.wait {
			diff[i] = lat.wait[i] - other[i]
		}
		row(fmt.Sprintf("%s: WaitForFreshness minus %s, per probe: min / p1 / p50 / p99 / max", what, name), "—",
			fmt.Sprintf("%+.2f / %+.2f / %+.2f / %+.2f / %+.2f ms", ms(quantile(diff, 0)), ms(quantile(diff, 0.01)), ms(quantile(diff, 0.5)), ms(quantile(diff, 0.99)), ms(quantile(diff, 1))), "—")
	}
	perProbe("the FreshInformer's own handler", lat.own)
	if shared {
		// Same stream: the per-write comparison the target is about.
		perProbe("client-go's handler", lat.handler)
	}
	return nil
}

// idleRows: the quiet namespace with pending waiters.
func idleRows(ctx context.Context, cs kubernetes.Interface, ns string, n int, row func(what, plain, fresh, ratio string)) error {
	pi, fi, probes, err := measureIdle(ctx, cs, ns)
	if err != nil {
		return err
	}
	row(fmt.Sprintf("idle %v, %d waiters pending", *idle, *waiters), fmt.Sprintf("%.3f s CPU (no waiters)", pi.Seconds()), fmt.Sprintf("%.3f s CPU (%d probe requests)", fi.Seconds(), probes), fmt.Sprintf("%+.3f s", (fi-pi).Seconds()))
	return nil
}
