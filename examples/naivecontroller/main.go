// Command naivecontroller is a deliberately naive controller, run with the
// stale-read detector on (package stalereads): it counts ConfigMaps up,
// one Update per step, reading each from its informer's lister right after
// its own previous write, without waiting for the cache. Every read older
// than its own write is a stale read (and the Update built on it a 409
// Conflict). It counts them itself, by comparing each read's resource
// version with the one its previous write returned, and prints that next
// to what the detector reported (and the freshinformer_stale_reads_total
// metric), so the two can be compared:
//
//	-wait=none       read at once (the naive controller)
//	-wait=freshness  WaitForFreshness(rv of the previous write) before reading
//	-wait=ryw        ReadYourWrites.EnsureFresh(owner) before reading
//	-lag=20ms        hold the informer's watch events for this long from each
//	                 write (freshtest.Lag): the cache falls behind on demand
//
// Writes go through a writes transport (recorded for the detector, and
// with the stale-write detector on: an Update sent on a stale read is
// reported too).
//
//	make demo DEMO_CMD="go run ./examples/naivecontroller -wait=none"
//
// It runs against $KUBECONFIG and prints one Markdown table row (-json: one
// JSON object).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/freshtest"
	"github.com/freshinformer/freshinformer/metrics"
	"github.com/freshinformer/freshinformer/readyourwrites"
	"github.com/freshinformer/freshinformer/stalereads"
	"github.com/freshinformer/freshinformer/writes"
)

// Result is what a run counted.
type Result struct {
	Wait     string  `json:"wait"`
	Lag      string  `json:"lag"`
	Reads    int64   `json:"reads"`
	Writes   int64   `json:"writes"`
	Seconds  float64 `json:"seconds"`
	Conflict int64   `json:"conflicts"`
	// StaleCounted: reads whose resource version was older than this
	// controller's own previous write of the object, counted by the
	// controller itself.
	StaleCounted int64 `json:"staleCounted"`
	// StaleReported: stale reads the detector reported; StaleMetric: its
	// counter, as Prometheus would scrape it.
	StaleReported int64 `json:"staleReported"`
	StaleMetric   int64 `json:"staleMetric"`
	// StaleWritesReported: Updates sent on older state than this
	// controller's own last write, reported by the writes transport.
	StaleWritesReported int64 `json:"staleWritesReported"`
}

func main() {
	var (
		kubeconfig = flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (default: $KUBECONFIG)")
		namespace  = flag.String("namespace", "naivecontroller", "namespace to work in (created if missing)")
		objects    = flag.Int("objects", 10, "ConfigMaps to count up, one goroutine each")
		steps      = flag.Int("steps", 50, "Updates per ConfigMap")
		wait       = flag.String("wait", "none", "before each read: none, freshness (WaitForFreshness) or ryw (EnsureFresh)")
		lag        = flag.Duration("lag", 0, "hold the informer's watch events for this long from each write (0: none)")
		asJSON     = flag.Bool("json", false, "print the result as JSON")
		timeout    = flag.Duration("timeout", 5*time.Minute, "give up after this long")
	)
	flag.Parse()
	switch *wait {
	case "none", "freshness", "ryw":
	default:
		fmt.Fprintln(os.Stderr, "naivecontroller: -wait must be none, freshness or ryw")
		os.Exit(2)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "naivecontroller: loading kubeconfig:", err)
		os.Exit(1)
	}
	cfg.QPS, cfg.Burst = -1, 0 // no client-side throttling
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	r, err := run(ctx, cfg, *namespace, *objects, *steps, *wait, *lag)
	if err != nil {
		fmt.Fprintln(os.Stderr, "naivecontroller:", err)
		os.Exit(1)
	}
	if *asJSON {
		_ = json.NewEncoder(os.Stdout).Encode(r)
		return
	}
	fmt.Println("| wait | lag | reads | stale reads counted by the controller | reported by the detector | freshinformer_stale_reads_total | 409 conflicts | stale writes reported | seconds |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	fmt.Printf("| %s | %s | %d | %d | %d | %d | %d | %d | %.1f |\n", r.Wait, r.Lag, r.Reads, r.StaleCounted, r.StaleReported, r.StaleMetric, r.Conflict, r.StaleWritesReported, r.Seconds)
}

func run(ctx context.Context, cfg *rest.Config, ns string, objects, steps int, wait string, lagFor time.Duration) (Result, error) {
	res := Result{Wait: wait, Lag: lagFor.String()}
	var staleReads, staleWrites atomic.Int64
	setup, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return res, err
	}
	if _, err := setup.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return res, err
	}

	// The informer's watch can be held back on demand; its reads are
	// checked by the detector.
	lag := freshtest.NewLag()
	defer lag.Release()
	watching, err := kubernetes.NewForConfig(lag.WrapConfig(cfg))
	if err != nil {
		return res, err
	}
	registry := prometheus.NewRegistry()
	provider, err := metrics.NewProvider(registry)
	if err != nil {
		return res, err
	}
	factory := cache.NewSharedInformerFactory(watching, 0, cache.WithNamespace(ns), cache.WithInformerOptions(
		cache.WithName("naivecontroller"), cache.WithMetrics(provider),
		cache.WithStaleReadDetection(func(stalereads.Report) { staleReads.Add(1) })))
	lister := factory.Core().V1().ConfigMaps().Lister()
	ryw := readyourwrites.New(factory, 30*time.Second)
	// Its writes are recorded (for the detector, and for -wait=ryw), and
	// checked by the stale-write detector.
	client, err := kubernetes.NewForConfig(writes.WrapConfig(cfg, ryw, writes.WithStaleWriteDetection(func(stalereads.Report) { staleWrites.Add(1) })))
	if err != nil {
		return res, err
	}
	informerCtx, stopInformers := context.WithCancel(context.WithoutCancel(ctx))
	factory.Start(informerCtx.Done())
	defer func() { stopInformers(); factory.Shutdown() }()
	if err := factory.WaitForCacheSyncWithContext(ctx).AsError(); err != nil {
		return res, err
	}
	informer := factory.FreshInformersForResource(schema.GroupResource{Resource: "configmaps"})[0]

	// Start from objects at count 0, in the cache: the measured steps are
	// Updates only.
	var newest string
	for i := range objects {
		name := "counted-" + strconv.Itoa(i)
		_ = setup.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{})
		cm, err := setup.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"count": "0"}}, metav1.CreateOptions{})
		if err != nil {
			return res, err
		}
		newest = cm.ResourceVersion
	}
	if err := informer.WaitForFreshness(ctx, newest); err != nil {
		return res, err
	}

	var reads, writesDone, conflicts, counted atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, objects)
	for i := range objects {
		name := "counted-" + strconv.Itoa(i)
		owner := readyourwrites.Owner{GroupKind: schema.GroupKind{Kind: "ConfigMap"}, NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
		wctx := writes.WithOwner(ctx, owner)
		wg.Go(func() {
			var last string // the resource version this goroutine's last write returned
			for step := 0; step < steps; {
				switch {
				case wait == "freshness" && last != "":
					if err := informer.WaitForFreshness(ctx, last); err != nil {
						errs <- err
						return
					}
				case wait == "ryw":
					if err := ryw.EnsureFresh(ctx, owner); err != nil {
						errs <- err
						return
					}
				}
				cm, err := lister.ConfigMaps(ns).Get(name)
				reads.Add(1)
				if err != nil {
					errs <- err
					return
				}
				if c, err := freshness.Compare(cm.ResourceVersion, last); last != "" && err == nil && c < 0 {
					counted.Add(1)
				}
				n, _ := strconv.Atoi(cm.Data["count"])
				cm = cm.DeepCopy()
				cm.Data["count"] = strconv.Itoa(n + 1)
				if lagFor > 0 {
					lag.HoldFor(lagFor)
				}
				updated, err := client.CoreV1().ConfigMaps(ns).Update(wctx, cm, metav1.UpdateOptions{})
				switch {
				case apierrors.IsConflict(err):
					conflicts.Add(1) // written on the stale read: try again
					continue
				case err != nil:
					errs <- err
					return
				}
				writesDone.Add(1)
				last = updated.ResourceVersion
				step++
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := errors.Join(collect(errs)...); err != nil {
		return res, err
	}
	res.Seconds = time.Since(start).Seconds()
	res.Reads, res.Writes, res.Conflict, res.StaleCounted = reads.Load(), writesDone.Load(), conflicts.Load(), counted.Load()
	res.StaleReported, res.StaleWritesReported = staleReads.Load(), staleWrites.Load()
	res.StaleMetric = scraped(registry, "freshinformer_stale_reads_total", "configmaps")
	return res, nil
}

func collect(errs <-chan error) []error {
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return all
}

// scraped reads a counter of the resource as Prometheus would.
func scraped(g prometheus.Gatherer, name, resource string) int64 {
	mfs, err := g.Gather()
	if err != nil {
		return -1
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "resource" && l.GetValue() == resource {
					return int64(m.GetCounter().GetValue())
				}
			}
		}
	}
	return -1
}
