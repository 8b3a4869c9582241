// Command heapsoak shows that a controller built with this library keeps a
// flat heap while owners come and go without end (issue 22: "nothing grows
// without bound").
//
// It starts its own etcd and kube-apiserver on loopback (package
// controlplane; binaries from `make bins`) and runs, in this process, a
// client-go style controller written the way a user writes one: informers
// from the drop-in factory (cache.NewSharedInformerFactory) with
// Prometheus metrics on (package metrics), a client whose writes are
// recorded by the writes transport (writes.WrapConfig, writes.WithOwner),
// read-your-writes (readyourwrites.ReadYourWrites: EnsureFresh and CheckFresh) and
// requeue-when-fresh (package requeue, with its metrics) on a client-go
// workqueue. A load generator in the same process creates owners
// (ConfigMaps, each with a name never used before) at -rate per second and
// deletes each after a short life; some are deleted at once, before their
// first reconcile checks freshness, so the controller meets the NotFound
// path and writes whose owner never comes back. See controller.go and
// driver.go for what each side does.
//
// Every -sample it runs the garbage collector and records the heap
// (HeapInuse, HeapAlloc, live heap objects), the goroutines, and the
// objects live in the cluster. At the end it prints a Markdown table and a
// verdict: the heap is flat when the mean of the last third of the samples
// is within -tolerance percent (or -tolerance-mib, whichever is larger) of
// the mean of the second third, for both HeapInuse and HeapAlloc, and the
// goroutines are flat when their last-third mean is within 10% (or 10) of
// the second third's. The first third is warm-up. It exits 1 when either
// is not flat, or when the controller did too little work for the
// measurement to mean anything.
//
// Bounds: the load runs for -duration and stops by itself; every client's
// request rate is capped by client-go's rate limiter (see clientQPS), so
// the requests are bounded by the duration; a watchdog ends the process
// (stopping the control plane first) -duration plus 5 minutes after start.
// All traffic goes to the loopback control plane it started (it refuses
// any other address). `make soak-heap` runs it under
// integration/hack/with-reaper.sh, which ends any etcd or kube-apiserver
// left behind if the process dies without stopping them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/freshinformer/freshinformer/integration/internal/runinfo"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/integration/controlplane"
	"github.com/freshinformer/freshinformer/metrics"
	"github.com/freshinformer/freshinformer/readyourwrites"
	"github.com/freshinformer/freshinformer/requeue"
	"github.com/freshinformer/freshinformer/writes"
)

var (
	duration     = flag.Duration("duration", 10*time.Minute, "how long the load runs")
	rate         = flag.Float64("rate", 4, "owners created per second (each costs about 8 writes on average)")
	every        = flag.Duration("sample", 20*time.Second, "time between heap samples")
	workers      = flag.Int("workers", 4, "reconcile workers")
	maxSteps     = flag.Int("max-steps", 3, "each owner asks for 1 to max-steps reconcile steps (one child Secret per step)")
	lifetime     = flag.Duration("lifetime", 6*time.Second, "owners not deleted at once live between a third of this and this long")
	early        = flag.Float64("early-delete", 0.2, "fraction of owners deleted right after creation, before their reconcile checks freshness")
	forget       = flag.Float64("forget", 0.5, "fraction of owners for which the controller calls ReadYourWrites.Forget when it finds them deleted; the others are left to the library's own eviction")
	tolerancePct = flag.Float64("tolerance", 10, "heap flat: the last third's mean within this many percent of the second third's")
	toleranceMiB = flag.Float64("tolerance-mib", 0.5, "... or within this many MiB, whichever is larger")
	profileDir   = flag.String("profile", "", "write heap profiles at the end of the first and second thirds (heap-third1.pprof, heap-third2.pprof) and at the end (heap-end.pprof) into this directory; compare two with go tool pprof -diff_base")
)

// clientQPS caps each client's requests per second (client-go's token
// bucket): the load generator's and the controller's. At the default
// -rate both stay well below it.
const clientQPS, clientBurst = 60, 120

func main() {
	klog.InitFlags(nil)
	flag.Parse()
	if err := validateFlags(); err != nil {
		fmt.Fprintln(os.Stderr, "heapsoak:", err)
		os.Exit(2)
	}
	if *profileDir != "" {
		// Finer heap sampling, so that small per-owner structures show up
		// in the profiles' difference (must be set before allocating).
		runtime.MemProfileRate = 64 << 10
	}
	os.Exit(run())
}

func validateFlags() error {
	switch {
	case *duration < 3**every:
		return errors.New("-duration must be at least three -sample periods (the verdict compares thirds)")
	case *every <= 0:
		return errors.New("-sample must be positive")
	case *rate <= 0 || *rate > 20:
		return errors.New("-rate must be in (0, 20] owners per second")
	case *workers < 1 || *maxSteps < 1:
		return errors.New("-workers and -max-steps must be at least 1")
	case *lifetime < time.Second:
		return errors.New("-lifetime must be at least 1s")
	case *early < 0 || *early > 1 || *forget < 0 || *forget > 1:
		return errors.New("-early-delete and -forget are fractions in [0, 1]")
	}
	return nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[heapsoak %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// run returns the exit status: 0 flat, 1 not flat or failed.
func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	began, loadStart, rev := time.Now(), runinfo.LoadAvg(), runinfo.Revision()
	logf("starting a control plane")
	cp, err := controlplane.Start(ctx, controlplane.Options{})
	if err != nil {
		logf("%v", err)
		return 1
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			logf("stopping the control plane: %v", err)
		}
	}()
	// The watchdog: whatever hangs, the process ends, and the control
	// plane with it.
	watchdog := time.AfterFunc(*duration+5*time.Minute, func() {
		logf("watchdog: still running %v after start; stopping the control plane and exiting", *duration+5*time.Minute)
		_ = cp.Stop()
		os.Exit(2)
	})
	defer watchdog.Stop()
	logf("%s", cp.Describe())

	cfg := cp.Config()
	if err := requireLoopback(cfg); err != nil {
		logf("%v", err)
		return 1
	}
	res, err := soak(ctx, cfg)
	if err != nil {
		logf("%v", err)
		if res == nil {
			return 1
		}
	}
	fmt.Printf("\n%s, GOMAXPROCS %d, %s to %s, library at %s\n", runtime.Version(), runtime.GOMAXPROCS(0),
		began.UTC().Format(time.RFC3339), time.Now().UTC().Format(time.RFC3339), rev)
	fmt.Printf("load average (1, 5, 15 min) at start: %s; at end: %s\n", loadStart, runinfo.LoadAvg())
	fmt.Printf("-duration %v -rate %g -sample %v -workers %d -max-steps %d -lifetime %v -early-delete %g -forget %g\n\n",
		*duration, *rate, *every, *workers, *maxSteps, *lifetime, *early, *forget)
	ok := res.report(os.Stdout)
	if err != nil || !ok {
		return 1
	}
	return 0
}

// requireLoopback refuses to send traffic anywhere but the loopback
// control plane this process started.
func requireLoopback(cfg *rest.Config) error {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return fmt.Errorf("control plane address %q: %w", cfg.Host, err)
	}
	if h := u.Hostname(); h != "localhost" {
		if ip := net.ParseIP(h); ip == nil || !ip.IsLoopback() {
			return fmt.Errorf("control plane address %q is not loopback: refusing to run", cfg.Host)
		}
	}
	return nil
}

// namespace is where every object of the soak lives.
const namespace = "heapsoak"

// soak wires the controller and the load, samples until -duration has
// passed, and tears everything down. The result holds the samples taken,
// also when an error ends the run early.
func soak(ctx context.Context, cfg *rest.Config) (*result, error) {
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
	// The load generator's client and the informers' client: plain.
	plain, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := plain.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}

	// --- the controller, as a user wires it --------------------------------
	registry := prometheus.NewRegistry()
	provider, err := metrics.NewProvider(registry)
	if err != nil {
		return nil, err
	}
	requeueMetrics, err := metrics.NewRequeueMetrics(registry, "heapsoak")
	if err != nil {
		return nil, err
	}
	factory := cache.NewSharedInformerFactory(plain, 0, cache.WithNamespace(namespace),
		cache.WithInformerOptions(cache.WithMetrics(provider), cache.WithName("heapsoak")))
	ryw := readyourwrites.New(factory, 10*time.Second)
	st := &stats{}
	recording, err := kubernetes.NewForConfig(writes.WrapConfig(cfg, ryw, writes.WithErrorHandler(func(context.Context, error) {
		st.unrecorded.Add(1) // none expected: both resources written have an informer
	})))
	if err != nil {
		return nil, err
	}
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName]())
	rq := requeue.New(queue, ryw, requeue.WithMetrics(requeueMetrics))
	c, err := newController(recording, factory, queue, ryw, rq, *forget, st)
	if err != nil {
		return nil, err
	}
	informerCtx, stopInformers := context.WithCancel(context.WithoutCancel(ctx))
	factory.Start(informerCtx.Done())
	defer func() { stopInformers(); factory.Shutdown() }()
	syncCtx, cancelSync := context.WithTimeout(ctx, time.Minute)
	synced := factory.WaitForCacheSyncWithContext(syncCtx)
	cancelSync()
	if err := synced.AsError(); err != nil {
		return nil, fmt.Errorf("informers did not sync: %w", err)
	}

	workCtx, stopWork := context.WithCancel(ctx)
	var workersDone sync.WaitGroup
	for range *workers {
		workersDone.Go(func() {
			for c.next(workCtx) {
			}
		})
	}
	// Torn down in this order: the load, then the workers (a blocked
	// EnsureFresh returns on workCtx), the Requeuer, the informers (above).
	defer func() {
		stopWork()
		queue.ShutDown()
		workersDone.Wait()
		rq.ShutDown()
	}()

	// --- the load ------------------------------------------------------
	d := newDriver(plain, namespace, *rate, *lifetime, *early, *maxSteps)
	loadCtx, stopLoad := context.WithCancel(ctx)
	var loadDone sync.WaitGroup
	loadDone.Go(func() { d.run(loadCtx) })
	loadDone.Go(func() { d.janitor(loadCtx) })
	defer func() { stopLoad(); loadDone.Wait() }()

	// --- sampling --------------------------------------------------------
	res := &result{duration: *duration}
	start := time.Now()
	take := func() {
		s := measure(ctx, plain, registry, d, c, st, rq)
		s.at = time.Since(start)
		res.samples = append(res.samples, s)
		logf("%s", s)
	}
	take()
	thirdsWritten := 0 // heap profiles written at the thirds' ends
	tick := time.NewTicker(*every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			res.interrupted = true
			return res, fmt.Errorf("interrupted: %w", context.Cause(ctx))
		case <-tick.C:
		}
		take()
		at := res.samples[len(res.samples)-1].at
		if thirdsWritten < 2 && at >= time.Duration(thirdsWritten+1)**duration/3 {
			thirdsWritten++
			if err := writeHeapProfile(fmt.Sprintf("heap-third%d.pprof", thirdsWritten)); err != nil {
				return res, err
			}
		}
		if at >= *duration-*every/2 {
			break
		}
	}
	if err := writeHeapProfile("heap-end.pprof"); err != nil {
		return res, err
	}
	return res, nil
}

// writeHeapProfile writes the heap profile after a collection, when
// -profile is set.
func writeHeapProfile(name string) error {
	if *profileDir == "" {
		return nil
	}
	if err := os.MkdirAll(*profileDir, 0o755); err != nil {
		return err
	}
	runtime.GC()
	f, err := os.Create(filepath.Join(*profileDir, name))
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	logf("wrote %s", f.Name())
	return f.Close()
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
