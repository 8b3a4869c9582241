// Command demo is a small controller loop that shows what freshinformer
// adds. It writes ConfigMaps through the API server and, after each write,
// compares two reads of its informer cache: one straight away (what a
// plain informer gives a reconciler: often stale) and one after
// WaitForFreshness (never stale). It prints, per write, how long the cache
// took to become fresh, the observed resource version and the lag, and
// serves Prometheus metrics on localhost (-metrics-addr; -detailed-metrics
// adds the detailed histogram buckets the dashboard's percentile panels
// need).
//
// Run it with `make demo` (an embedded kube-apiserver and etcd), or against
// a cluster of your own, explicitly: `make demo DEMO_KUBECONFIG=path` or
// `go run ./examples/demo -kubeconfig path`. It removes what it made when
// it ends: the namespace if it created it, else its own ConfigMaps.
//
// With -check it is a test: it exits non-zero unless it made writes and
// every read after WaitForFreshness saw its write (make support-matrix).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/metrics"
)

func main() {
	var (
		kubeconfig  = flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
		namespace   = flag.String("namespace", "freshinformer-demo", "namespace to write ConfigMaps in (created if missing)")
		duration    = flag.Duration("duration", 30*time.Second, "how long to run; 0 runs until Ctrl-C")
		rate        = flag.Float64("writes-per-second", 20, "writes per second")
		objects     = flag.Int("objects", 5, "how many ConfigMaps to cycle through")
		metricsAddr = flag.String("metrics-addr", "127.0.0.1:9464", "where to serve /metrics (port 0: any free port, printed)")
		detailed    = flag.Bool("detailed-metrics", false, "export the detailed histogram buckets (metrics.WithDetailedMetrics): the dashboard's percentile panels need them")
		quiet       = flag.Bool("quiet", false, "print only the summary")
		check       = flag.Bool("check", false, "exit non-zero unless writes were made and no read after WaitForFreshness was stale")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	s, err := run(ctx, *kubeconfig, *namespace, *rate, *objects, *metricsAddr, *detailed, *quiet)
	if err == nil && *check {
		err = s.check()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, ns string, rate float64, objects int, metricsAddr string, detailed, quiet bool) (*summary, error) {
	var s summary
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	// client-go's default 5 QPS would throttle the demo's own writes.
	cfg.QPS, cfg.Burst = float32(2*rate+10), int(2*rate+20)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	_, err = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	defer cleanUp(client, ns, err == nil)

	// Metrics on a registry of our own, served on localhost.
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var opts []metrics.Option
	if detailed {
		opts = append(opts, metrics.WithDetailedMetrics())
	}
	provider, err := metrics.NewProvider(registry, opts...)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", metricsAddr)
	if err != nil {
		return nil, fmt.Errorf("serving metrics: %w", err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(registry, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	fmt.Printf("[demo] Prometheus metrics: http://%s/metrics\n", ln.Addr())

	// The freshness-aware informer: a drop-in SharedIndexInformer.
	lw := toolscache.NewListWatchFromClient(client.CoreV1().RESTClient(), "configmaps", ns, fields.Everything())
	informer := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{},
		cache.WithName("demo"), cache.WithMetrics(provider))
	lister := corelisters.NewConfigMapLister(informer.GetIndexer())
	informerCtx, stopInformer := context.WithCancel(context.WithoutCancel(ctx))
	informerDone := make(chan struct{})
	go func() { defer close(informerDone); informer.RunWithContext(informerCtx) }()
	defer func() { stopInformer(); <-informerDone }()
	if !toolscache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return nil, errors.New("informer did not sync")
	}
	fmt.Printf("[demo] informer synced at resource version %s; writing %d ConfigMaps at %.0f writes/s in namespace %s (Ctrl-C to stop)\n",
		informer.LastObservedResourceVersion(), objects, rate, ns)

	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			s.print(ln.Addr().String())
			return &s, nil
		case <-tick.C:
		}
		name := "demo-" + strconv.Itoa(i%objects)
		written, err := write(ctx, client, ns, name, i)
		if err != nil {
			if ending(ctx) {
				continue
			}
			return nil, err
		}
		rv := written.ResourceVersion
		_ = informer.RecordWrittenObject(written) // for the write-to-visible and lag metrics
		naiveStale := stale(lister, ns, name, rv)

		start := time.Now()
		waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = informer.WaitForFreshness(waitCtx, rv)
		cancel()
		took := time.Since(start)
		if err != nil {
			if ending(ctx) {
				continue
			}
			return nil, fmt.Errorf("waiting for %s: %w", rv, err)
		}
		s.add(took, naiveStale, stale(lister, ns, name, rv))
		if !quiet {
			observed := informer.LastObservedResourceVersion()
			fmt.Printf("write %4d %-7s rv=%s  fresh after %8s  observed=%s lag=%s  read without waiting: %s\n",
				i, name, rv, took.Round(time.Microsecond), observed, lag(informer.NewestKnownResourceVersion(), observed), map[bool]string{true: "STALE", false: "fresh"}[naiveStale])
		}
	}
}

// ending reports whether the run is over or about to be: requests then
// fail with context or rate-limiter errors that are not failures.
func ending(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	return ctx.Err() != nil || (ok && time.Until(deadline) < time.Second)
}

// demoLabel marks the ConfigMaps the demo writes, so that it removes only
// what it made.
const demoLabel = "freshinformer.io/demo"

// cleanUp removes what the demo made: the namespace if it created it, else
// its own ConfigMaps. It runs after ctx has ended, so it has its own
// bound.
func cleanUp(client kubernetes.Interface, ns string, createdNamespace bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	if createdNamespace {
		err = client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	} else {
		err = client.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: demoLabel})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		fmt.Fprintf(os.Stderr, "[demo] cleaning up namespace %s: %v\n", ns, err)
		return
	}
	fmt.Printf("[demo] removed what the demo made in namespace %s\n", ns)
}

// write updates (or creates) one ConfigMap and returns what the server stored.
func write(ctx context.Context, client kubernetes.Interface, ns, name string, i int) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{demoLabel: "true"}}, Data: map[string]string{"write": strconv.Itoa(i)}}
	out, err := client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		out, err = client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	}
	return out, err
}

// stale reports whether the cached object is older than the write at rv.
func stale(lister corelisters.ConfigMapLister, ns, name, rv string) bool {
	cm, err := lister.ConfigMaps(ns).Get(name)
	if err != nil {
		return true
	}
	c, err := freshness.Compare(cm.ResourceVersion, rv)
	return err != nil || c < 0
}

func lag(newest, observed string) string {
	n, err1 := strconv.ParseUint(newest, 10, 64)
	o, err2 := strconv.ParseUint(observed, 10, 64)
	if err1 != nil || err2 != nil || n < o {
		return "0"
	}
	return strconv.FormatUint(n-o, 10)
}

type summary struct {
	took                  []time.Duration
	naiveStale, waitStale int
}

func (s *summary) add(took time.Duration, naiveStale, waitStale bool) {
	s.took = append(s.took, took)
	if naiveStale {
		s.naiveStale++
	}
	if waitStale {
		s.waitStale++
	}
}

// check is -check's verdict.
func (s *summary) check() error {
	switch {
	case len(s.took) == 0:
		return errors.New("check: no write was made")
	case s.waitStale > 0:
		return fmt.Errorf("check: %d of %d reads after WaitForFreshness were stale", s.waitStale, len(s.took))
	}
	fmt.Printf("[demo] check passed: %d writes, no read after WaitForFreshness was stale\n", len(s.took))
	return nil
}

func (s *summary) print(metricsAddr string) {
	n := len(s.took)
	fmt.Printf("\n[demo] %d writes\n", n)
	if n == 0 {
		return
	}
	slices.Sort(s.took)
	q := func(p float64) time.Duration { return s.took[min(n-1, int(p*float64(n)))].Round(time.Microsecond) }
	fmt.Printf("[demo] time until the cache was fresh: p50 %s  p90 %s  p99 %s  max %s\n", q(0.5), q(0.9), q(0.99), s.took[n-1].Round(time.Microsecond))
	fmt.Printf("[demo] reads right after the write (plain informer): %d of %d stale (%.0f%%)\n", s.naiveStale, n, 100*float64(s.naiveStale)/float64(n))
	fmt.Printf("[demo] reads after WaitForFreshness:                 %d of %d stale\n", s.waitStale, n)
	fmt.Printf("[demo] metrics were served at http://%s/metrics\n", metricsAddr)
}
