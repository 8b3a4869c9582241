package cache

// Informer benchmarks. Every informer here runs over benchLW: a list+watch
// stream (IsWatchListSemanticsUnSupported reports true, so client-go's
// Reflector lists, then watches from the list's resource version) whose one
// watch is a benchWatcher the benchmark feeds directly. Nothing is encoded or
// decoded: what is measured is the informer (Reflector, queue, indexer,
// handler fan-out, freshness tracking), not a transport.
//
// The results, the commands and what they mean are in docs/benchmarks.md.

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

const (
	// benchKeys is how many ConfigMaps the event benchmark's stream updates
	// in turn (a realistic key spread for one informer).
	benchKeys = 1000
	// benchBatch is how many events are pre-built at a time, with the timer
	// stopped, so the live heap stays bounded (and the garbage collector
	// runs as it would in a controller) whatever b.N is.
	benchBatch = 1 << 14
	// benchListRV is the initial list's resource version; events follow it.
	benchListRV = 1_000_000_000
)

// benchWatcher is a watch.Interface whose result channel the benchmark
// swaps: ResultChan is called by the Reflector once per event it reads, so
// a channel pre-filled with a whole batch can be handed over at once and the
// producer never sits on the informer's path.
type benchWatcher struct {
	cur      atomic.Pointer[chan watch.Event]
	stopOnce sync.Once
	stopped  chan struct{}
}

func newBenchWatcher(size int) *benchWatcher {
	w := &benchWatcher{stopped: make(chan struct{})}
	ch := make(chan watch.Event, size)
	w.cur.Store(&ch)
	return w
}

func (w *benchWatcher) ResultChan() <-chan watch.Event { return *w.cur.Load() }

func (w *benchWatcher) Stop() { w.stopOnce.Do(func() { close(w.stopped) }) }

// send queues one event on the current channel; it gives up once the
// watcher is stopped.
func (w *benchWatcher) send(ev watch.Event) bool {
	select {
	case *w.cur.Load() <- ev:
		return true
	case <-w.stopped:
		return false
	}
}

// handOver makes next (pre-filled) the result channel and wakes the
// Reflector, which may be blocked on the drained previous channel, with a
// bookmark at the resource version the stream is already at: if the
// Reflector had already switched to next, the bookmark stays unread in the
// dropped channel; either way the real events arrive in order.
func (w *benchWatcher) handOver(next chan watch.Event, atRV string) {
	prev := *w.cur.Load()
	w.cur.Store(&next)
	select {
	case prev <- watch.Event{Type: watch.Bookmark, Object: bookmark(atRV)}:
	default: // never full: the Reflector drained it
	}
}

// benchLW is a ListerWatcher that lists a fixed set of ConfigMaps and hands
// out one benchWatcher (later watches, which a healthy run never opens, get
// idle ones).
type benchLW struct {
	listRV string

	mu sync.Mutex
	// objects and head are the server's state: the list's until write.
	objects []*corev1.ConfigMap
	head    string
	watcher *benchWatcher
	watches int
	opened  chan struct{} // closed once the first watch is handed out
}

func newBenchLW(listRV string, objects []*corev1.ConfigMap, w *benchWatcher) *benchLW {
	return &benchLW{listRV: listRV, objects: objects, head: listRV, watcher: w, opened: make(chan struct{})}
}

// write makes obj (whose name the list has) the server's newest write, as
// a client's update does before its watch event is sent: a consistent
// read then answers at obj's resource version, as an API server's does.
func (lw *benchLW) write(obj *corev1.ConfigMap) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	for i, o := range lw.objects {
		if o.Name == obj.Name {
			lw.objects[i] = obj.DeepCopy()
		}
	}
	lw.head = obj.ResourceVersion
}

// List answers the initial list and any consistent read (a probe's) with
// the server's state.
func (lw *benchLW) List(metav1.ListOptions) (apiruntime.Object, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: lw.head}}
	list.Items = make([]corev1.ConfigMap, len(lw.objects))
	for i, o := range lw.objects {
		o.DeepCopyInto(&list.Items[i])
	}
	return list, nil
}

func (lw *benchLW) Watch(metav1.ListOptions) (watch.Interface, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.watches++
	if lw.watches == 1 {
		close(lw.opened)
		return lw.watcher, nil
	}
	return newBenchWatcher(1), nil
}

// IsWatchListSemanticsUnSupported makes the Reflector list, then watch.
func (lw *benchLW) IsWatchListSemanticsUnSupported() bool { return true }

// benchCounter is a no-op event handler that counts calls and signals when
// a target count is reached.
type benchCounter struct {
	n      atomic.Int64
	target atomic.Int64
	done   chan struct{}
}

func newBenchCounter() *benchCounter { return &benchCounter{done: make(chan struct{}, 1)} }

func (c *benchCounter) bump() {
	if c.n.Add(1) == c.target.Load() {
		c.done <- struct{}{}
	}
}

func (c *benchCounter) OnAdd(any, bool)     { c.bump() }
func (c *benchCounter) OnUpdate(_, _ any)   { c.bump() }
func (c *benchCounter) OnDelete(any)        { c.bump() }
func (c *benchCounter) expect(target int64) { c.target.Store(target) }

// wait waits for the target count, failing the benchmark after a minute.
func (c *benchCounter) wait(b *testing.B) {
	b.Helper()
	select {
	case <-c.done:
	case <-time.After(time.Minute):
		b.Fatalf("handler saw %d events, want %d", c.n.Load(), c.target.Load())
	}
}

// benchRun runs inf until the returned stop function is called; stop waits
// until RunWithContext has returned (and with it every goroutine the
// informer started). It also fails the benchmark if the informer does not
// sync and open its watch within 10s.
func benchRun(b testing.TB, inf toolscache.SharedIndexInformer, lw *benchLW) (stop func()) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.RunWithContext(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				b.Error("informer did not stop")
			}
		})
	}
	b.Cleanup(stop)
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	if !toolscache.WaitForCacheSync(sctx.Done(), inf.HasSynced) {
		b.Fatal("informer did not sync")
	}
	select {
	case <-lw.opened:
	case <-sctx.Done():
		b.Fatal("informer opened no watch")
	}
	return stop
}

// benchObjects returns n ConfigMaps ns/cm-0..n-1 at resource versions
// rv0+1..rv0+n, and their names.
func benchObjects(n int, rv0 uint64) ([]*corev1.ConfigMap, []string) {
	names := make([]string, n)
	objs := make([]*corev1.ConfigMap, n)
	for i := range n {
		names[i] = "cm-" + strconv.Itoa(i)
		objs[i] = benchCM(names[i], rv0+uint64(i)+1)
	}
	return objs, names
}

func benchCM(name string, rv uint64) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       "ns",
			Name:            name,
			ResourceVersion: strconv.FormatUint(rv, 10),
			Labels:          map[string]string{"app": "bench"},
		},
		Data: map[string]string{"key": "value"},
	}
}

var benchIndexers = toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}

// cpuTime returns the process's user+system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var errBenchStopped = errors.New("benchmark stopped")

// benchImpls are the two informers the event benchmarks compare; each
// returns the informer and, for fresh, its WaitForFreshness.
var benchImpls = []struct {
	name string
	new  func(toolscache.ListerWatcher) (toolscache.SharedIndexInformer, func(context.Context, string) error)
}{
	{"fresh", func(lw toolscache.ListerWatcher) (toolscache.SharedIndexInformer, func(context.Context, string) error) {
		inf := NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, benchIndexers)
		return inf, inf.WaitForFreshness
	}},
	{"fresh+metrics", func(lw toolscache.ListerWatcher) (toolscache.SharedIndexInformer, func(context.Context, string) error) {
		inf := NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, benchIndexers, WithMetrics(benchMetrics{}))
		return inf, inf.WaitForFreshness
	}},
	{"clientgo", func(lw toolscache.ListerWatcher) (toolscache.SharedIndexInformer, func(context.Context, string) error) {
		return toolscache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, benchIndexers), nil
	}},
}

// BenchmarkInformerEvents measures the cost per watch event of an informer
// in steady state under load: the cache holds benchKeys ConfigMaps, and b.N
// Modified events update them in turn with increasing resource versions,
// handed to the Reflector in pre-built batches of benchBatch (so the queue
// runs deep, as during a burst); one no-op handler is registered. impl=fresh
// is a FreshInformer, impl=clientgo client-go's SharedIndexInformer; both get
// the same stream. An op is one event, timed from its batch's hand-over to
// the Reflector until the handler has seen it (and, for fresh,
// WaitForFreshness of the batch's last resource version has returned).
// cpu-ns/op is the process's CPU time (user+system: every goroutine and the
// garbage collector) per event over the timed part.
func BenchmarkInformerEvents(b *testing.B) {
	for _, impl := range benchImpls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			benchEvents(b, impl.new, benchBatch)
		})
	}
}

// BenchmarkInformerEventsSmallBursts is BenchmarkInformerEvents with bursts
// of 8 events, each processed completely before the next is sent: the
// queue stays shallow (client-go's RealFIFO traces a pop when more than 10
// items wait), as for a controller that is not under load. The 8 events are
// built with the timer stopped but sent on the watch channel with it
// running (the same few sends for both implementations).
func BenchmarkInformerEventsSmallBursts(b *testing.B) {
	for _, impl := range benchImpls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			benchEvents(b, impl.new, 8)
		})
	}
}

// benchEvents runs b.N Modified events, in bursts of burst, through an
// informer made by newInformer; see BenchmarkInformerEvents.
func benchEvents(b *testing.B, newInformer func(toolscache.ListerWatcher) (toolscache.SharedIndexInformer, func(context.Context, string) error), burst int) {
	initial, names := benchObjects(benchKeys, benchListRV-benchKeys)
	w := newBenchWatcher(16)
	lw := newBenchLW(strconv.Itoa(benchListRV), initial, w)
	inf, waitFresh := newInformer(lw)
	counter := newBenchCounter()
	counter.expect(benchKeys)
	if _, err := inf.AddEventHandler(counter); err != nil {
		b.Fatal(err)
	}
	stop := benchRun(b, inf, lw)
	defer stop()
	counter.wait(b) // the initial list's adds
	ctx := context.Background()
	handOver := burst > cap(w.ResultChan())

	b.ReportAllocs()
	runtime.GC()
	b.ResetTimer()
	b.StopTimer()
	var cpu time.Duration
	lastRV := strconv.Itoa(benchListRV)
	events := make([]watch.Event, 0, burst)
	for start := 0; start < b.N; start += burst {
		n := min(burst, b.N-start)
		events = events[:0]
		for i := start; i < start+n; i++ {
			rv := uint64(benchListRV + i + 1)
			events = append(events, watch.Event{Type: watch.Modified, Object: benchCM(names[i%benchKeys], rv)})
		}
		var batch chan watch.Event
		if handOver {
			batch = make(chan watch.Event, n)
			for _, ev := range events {
				batch <- ev
			}
		}
		prevRV := lastRV
		lastRV = strconv.Itoa(benchListRV + start + n)
		counter.expect(int64(benchKeys + start + n))

		b.StartTimer()
		c0 := cpuTime(b) // inside the timed part: StartTimer and StopTimer stop the world
		if handOver {
			w.handOver(batch, prevRV)
		} else {
			for _, ev := range events {
				if !w.send(ev) {
					b.Fatal(errBenchStopped)
				}
			}
		}
		counter.wait(b)
		if waitFresh != nil {
			if err := waitFresh(ctx, lastRV); err != nil {
				b.Fatal(err)
			}
		}
		cpu += cpuTime(b) - c0
		b.StopTimer()
		clear(events)
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// startQuietFresh runs a FreshInformer over a list of 10 ConfigMaps at
// resource version listRV and returns it synced, with its server.
func startQuietFresh(b testing.TB, listRV uint64, opts ...Option) (*FreshInformer, *benchLW, func()) {
	b.Helper()
	objs, _ := benchObjects(10, listRV-10)
	lw := newBenchLW(strconv.FormatUint(listRV, 10), objs, newBenchWatcher(16))
	inf := NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, benchIndexers, opts...)
	if _, err := inf.AddEventHandler(newBenchCounter()); err != nil {
		b.Fatal(err)
	}
	stop := benchRun(b, inf, lw)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := inf.WaitForFreshness(ctx, strconv.FormatUint(listRV, 10)); err != nil {
		b.Fatal(err)
	}
	return inf, lw, stop
}

// BenchmarkWaitForFreshnessAlreadyFresh measures WaitForFreshness on a
// running informer whose cache is already past the target (the common case
// in a reconciler: one atomic load after parsing the target).
func BenchmarkWaitForFreshnessAlreadyFresh(b *testing.B) {
	inf, _, stop := startQuietFresh(b, 123456789012)
	defer stop()
	ctx := context.Background()
	const target = "123456789000"
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := inf.WaitForFreshness(ctx, target); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := inf.WaitForFreshness(ctx, target); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// waitPending waits until the informer has exactly n callers blocked in
// WaitForFreshness.
func waitPending(b *testing.B, inf *FreshInformer, n int) {
	b.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for inf.Stats().PendingWaiters != n {
		if time.Now().After(deadline) {
			b.Fatalf("%d waiters pending, want %d", inf.Stats().PendingWaiters, n)
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// BenchmarkWakeLatency measures, per round, the time from sending one watch
// event at the resource version k waiters are blocked on until all k
// WaitForFreshness calls have returned: Reflector, queue, indexer, tracker
// release, and the scheduler waking k goroutines. Setting up the waiters is
// not timed. ns/waiter is ns/op divided by k.
func BenchmarkWakeLatency(b *testing.B) {
	for _, k := range []int{1, 100, 10_000} {
		b.Run("waiters="+strconv.Itoa(k), func(b *testing.B) {
			const listRV = 1_000_000
			inf, lw, stop := startQuietFresh(b, listRV) // as users run it: quiet probes on
			defer stop()
			ctx := context.Background()
			var failed atomic.Pointer[error]
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				rv := uint64(listRV + i + 1)
				target := strconv.FormatUint(rv, 10)
				obj := benchCM("cm-"+strconv.Itoa(i%10), rv)
				lw.write(obj) // the write the waiters wait for; its event is sent below
				var wg sync.WaitGroup
				for range k {
					wg.Go(func() {
						if err := inf.WaitForFreshness(ctx, target); err != nil {
							failed.CompareAndSwap(nil, &err)
						}
					})
				}
				waitPending(b, inf, k)
				ev := watch.Event{Type: watch.Modified, Object: obj}
				b.StartTimer()
				if !lw.watcher.send(ev) {
					b.Fatal(errBenchStopped)
				}
				wg.Wait()
			}
			b.StopTimer()
			if err := failed.Load(); err != nil {
				b.Fatal(*err)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*k), "ns/waiter")
		})
	}
}

// BenchmarkIdleWaiters blocks n goroutines in WaitForFreshness on a quiet
// informer (nothing is sent on its watch) and reports the CPU time the whole
// process uses per second of wall time meanwhile (cpu-ms/s; 1000 would be
// one core busy). An op is a 100ms sleep. waiters=0 is the baseline.
func BenchmarkIdleWaiters(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run("waiters="+strconv.Itoa(n), func(b *testing.B) {
			const listRV = 1_000_000
			// No probes: one would read the server behind the waits' targets
			// and fail them (ErrTooLargeResourceVersion).
			inf, _, stop := startQuietFresh(b, listRV, WithQuietProbeDelay(-1))
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for i := range n {
				target := strconv.Itoa(listRV + 1 + i%10) // 10 distinct targets, none reached
				wg.Go(func() { _ = inf.WaitForFreshness(ctx, target) })
			}
			waitPending(b, inf, n)
			runtime.GC()
			b.ResetTimer()
			c0, t0 := cpuTime(b), time.Now()
			for b.Loop() {
				time.Sleep(100 * time.Millisecond)
			}
			cpu, wall := cpuTime(b)-c0, time.Since(t0)
			b.StopTimer()
			if got := inf.Stats().PendingWaiters; got != n {
				b.Errorf("%d waiters pending at the end, want %d", got, n)
			}
			cancel()
			wg.Wait()
			stop()
			b.ReportMetric(float64(cpu.Microseconds())/1e3/wall.Seconds(), "cpu-ms/s")
		})
	}
}

// benchMetrics does on the measured paths what package metrics' Provider
// does (which this package's tests cannot import): one client_golang
// counter and histogram per observation. Events themselves report nothing;
// the provider reads counters at scrape time.
type benchMetrics struct{}

var (
	benchWaits    = prometheus.NewCounter(prometheus.CounterOpts{Name: "bench_waits_total", Help: "bench"})
	benchWaitTime = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "bench_wait_seconds", Help: "bench"})
)

func (benchMetrics) InformerMetrics(*FreshInformer) InformerMetrics { return benchMetrics{} }
func (benchMetrics) ObserveWait(_ WaitOutcome, d time.Duration) {
	benchWaits.Inc()
	benchWaitTime.Observe(d.Seconds())
}
func (benchMetrics) ObserveWriteVisible(d time.Duration) { benchWaitTime.Observe(d.Seconds()) }
func (benchMetrics) Stopped()                            {}

// benchSyncObjects is how many ConfigMaps BenchmarkInitialSync lists: the
// size of the real-apiserver scale measurement (docs/benchmarks.md).
const benchSyncObjects = 10_000

// streamedListLW serves a watch-list: its first watch streams every object
// as an Added event, then the initial-events-end bookmark at listRV, and
// stays open; it does not say it lacks watch-list semantics, so client-go's
// Reflector (WatchListClient is on by default) streams instead of listing.
// This is the path an informer takes against kube-apiserver 1.35+.
type streamedListLW struct {
	listRV  string
	objects []*corev1.ConfigMap
}

func (lw *streamedListLW) List(metav1.ListOptions) (apiruntime.Object, error) {
	return nil, errors.New("streamedListLW: the benchmark expects a watch-list, not a list")
}

func (lw *streamedListLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	if opts.SendInitialEvents == nil || !*opts.SendInitialEvents {
		return nil, errors.New("streamedListLW: the benchmark expects a watch-list")
	}
	w := newBenchWatcher(len(lw.objects) + 1)
	for _, o := range lw.objects {
		w.send(watch.Event{Type: watch.Added, Object: o})
	}
	end := bookmark(lw.listRV)
	end.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	w.send(watch.Event{Type: watch.Bookmark, Object: end})
	return w, nil
}

// BenchmarkInitialSync measures an informer's initial sync of
// benchSyncObjects ConfigMaps, without a server: path=watchlist streams them
// (what client-go does against a current apiserver), path=list lists them
// (benchLW: one List, its items deep-copied as a decoder would allocate
// them). An op is one whole sync: from RunWithContext until the informer
// reports synced (its HasSyncedChecker's channel closes); no handler is
// registered, as in the real-apiserver measurement. impl=fresh is a
// FreshInformer, impl=clientgo client-go's SharedIndexInformer, fed the same
// objects. cpu-ns/op is the process's CPU time per sync (every goroutine and
// the garbage collector); allocs/op and B/op include the Reflector's and
// the informer's start-up.
func BenchmarkInitialSync(b *testing.B) {
	objs, _ := benchObjects(benchSyncObjects, benchListRV-benchSyncObjects)
	listRV := strconv.Itoa(benchListRV)
	paths := []struct {
		name string
		lw   func() (toolscache.ListerWatcher, *benchLW)
	}{
		{"watchlist", func() (toolscache.ListerWatcher, *benchLW) {
			return &streamedListLW{listRV: listRV, objects: objs}, nil
		}},
		{"list", func() (toolscache.ListerWatcher, *benchLW) {
			lw := newBenchLW(listRV, objs, newBenchWatcher(1))
			return lw, lw
		}},
	}
	for _, path := range paths {
		b.Run("path="+path.name, func(b *testing.B) {
			for _, impl := range benchImpls {
				b.Run("impl="+impl.name, func(b *testing.B) {
					benchInitialSync(b, path.lw, impl.new)
				})
			}
		})
	}
}

func benchInitialSync(b *testing.B, newLW func() (toolscache.ListerWatcher, *benchLW), newInformer func(toolscache.ListerWatcher) (toolscache.SharedIndexInformer, func(context.Context, string) error)) {
	b.ReportAllocs()
	var cpu time.Duration
	b.StopTimer()
	for range b.N {
		lw, plain := newLW()
		inf, _ := newInformer(lw)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		runtime.GC() // the previous sync's garbage is not this one's cost

		b.StartTimer()
		c0 := cpuTime(b)
		go func() {
			defer close(done)
			inf.RunWithContext(ctx)
		}()
		select {
		case <-inf.HasSyncedChecker().Done():
		case <-time.After(time.Minute):
			b.Fatal("informer did not sync")
		}
		cpu += cpuTime(b) - c0
		b.StopTimer()

		if got := len(inf.GetStore().ListKeys()); got != benchSyncObjects {
			b.Fatalf("synced with %d objects, want %d", got, benchSyncObjects)
		}
		if plain != nil {
			<-plain.opened // the list+watch path opens its watch after the list
		}
		cancel()
		<-done
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}
