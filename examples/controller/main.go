// Command controller is a small workqueue controller, in client-go style,
// that shows read-your-writes. Each "parent" ConfigMap asks for a count
// (data.target); the controller keeps a child ConfigMap counting up to it,
// one increment per reconcile, requeueing itself after each write. A
// reconcile that reads a stale child from the cache writes on top of an
// old resource version and gets a 409 Conflict.
//
// Its write sites are plain client calls: the clients are made from a
// rest.Config wrapped by package writes, and each reconcile names its
// owner in its context (writes.WithOwner), so every write is recorded for
// read-your-writes. -mode picks what a reconcile does before reading:
//
//	-mode=requeue   park the key until the cache holds the owner's writes (package requeue): no worker blocks
//	-mode=ensure    block the worker until it does (ReadYourWrites.EnsureFresh)
//	-mode=backoff   check, and requeue with the workqueue's exponential backoff when behind, as kube-controller-manager does
//	-mode=off       read whatever the cache holds (stale reads show up as conflicts)
//
// At the end it prints one line of figures (a markdown table row): stale
// reads and conflicts per 1000 reconciles, step latency (from one write of
// a parent's child to the next) p50/p99, reconcile call duration p50/p99,
// and the time workers spent blocked.
//
// It runs against $KUBECONFIG (make demo DEMO_CMD="go run ./examples/controller"
// gives it an embedded control plane) and serves /metrics on localhost.
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
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/metrics"
	"github.com/freshinformer/freshinformer/readyourwrites"
	"github.com/freshinformer/freshinformer/requeue"
	"github.com/freshinformer/freshinformer/writes"
)

type controller struct {
	client kubernetes.Interface // writes through it are recorded
	lister corelisters.ConfigMapLister
	queue  workqueue.TypedRateLimitingInterface[types.NamespacedName]
	ryw    *readyourwrites.ReadYourWrites
	rq     *requeue.Requeuer[types.NamespacedName]
	mode   string

	reconciles, writes, conflicts, notFresh, parked atomic.Int64
	blockedNanos, blockedNow, blockedMax            atomic.Int64

	mu        sync.Mutex
	lastWrite map[types.NamespacedName]time.Time
	steps     []time.Duration // write to next write of the same parent
	durations []time.Duration // reconcile calls
}

func main() {
	var (
		kubeconfig  = flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
		namespace   = flag.String("namespace", "freshinformer-controller", "namespace to work in (created if missing)")
		parents     = flag.Int("parents", 10, "parent ConfigMaps to create")
		target      = flag.Int("target", 100, "count each child must reach")
		workers     = flag.Int("workers", 2, "reconcile workers")
		mode        = flag.String("mode", "requeue", "before reading: requeue (park until fresh), ensure (block until fresh), backoff (check, requeue with backoff), off")
		metricsAddr = flag.String("metrics-addr", "127.0.0.1:9465", "where to serve /metrics")
		timeout     = flag.Duration("timeout", 5*time.Minute, "give up after this long")
	)
	flag.Parse()
	switch *mode {
	case "requeue", "ensure", "backoff", "off":
	default:
		fmt.Fprintln(os.Stderr, "controller: -mode must be requeue, ensure, backoff or off")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := run(ctx, *kubeconfig, *namespace, *parents, *target, *workers, *mode, *metricsAddr); err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, ns string, parents, target, workers int, mode, metricsAddr string) error {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}

	registry := prometheus.NewRegistry()
	provider, err := metrics.NewProvider(registry)
	if err != nil {
		return err
	}
	requeueMetrics, err := metrics.NewRequeueMetrics(registry, "controller")
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", metricsAddr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(registry, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	fmt.Printf("[controller] metrics: http://%s/metrics; mode: %s\n", ln.Addr(), mode)

	// The drop-in factory: the same accessors as client-go's.
	factory := cache.NewSharedInformerFactory(client, 0, cache.WithNamespace(ns),
		cache.WithInformerOptions(cache.WithMetrics(provider), cache.WithName("controller")))
	ryw := readyourwrites.New(factory, 10*time.Second)
	// The setup change: clients made from the wrapped config record their
	// writes for read-your-writes.
	recording, err := kubernetes.NewForConfig(writes.WrapConfig(cfg, ryw))
	if err != nil {
		return err
	}
	c, err := newController(recording, factory, ryw, mode, requeue.WithMetrics(requeueMetrics))
	if err != nil {
		return err
	}
	defer c.rq.ShutDown()
	informerCtx, stopInformers := context.WithCancel(context.WithoutCancel(ctx))
	factory.Start(informerCtx.Done())
	defer func() { stopInformers(); factory.Shutdown() }()
	if res := factory.WaitForCacheSyncWithContext(ctx); res.AsError() != nil {
		return res.AsError()
	}

	for i := range parents {
		p := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("parent-%d", i), Labels: map[string]string{"role": "parent"}},
			Data: map[string]string{"target": strconv.Itoa(target)}}
		if err := client.CoreV1().ConfigMaps(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err := client.CoreV1().ConfigMaps(ns).Delete(ctx, p.Name+"-child", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	// Start from a cache without the deleted objects.
	informer := factory.FreshInformersForResource(schema.GroupResource{Resource: "configmaps"})[0]
	if rv, err := informer.ServerResourceVersion(ctx); err != nil {
		return err
	} else if err := informer.WaitForFreshness(ctx, rv); err != nil {
		return err
	}
	start := time.Now()
	for i := range parents {
		p := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("parent-%d", i), Labels: map[string]string{"role": "parent"}},
			Data: map[string]string{"target": strconv.Itoa(target)}}
		if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
	}

	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c.next(ctx) {
			}
		})
	}
	remaining := parents
	for remaining > 0 && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
		remaining = 0
		for i := range parents {
			child, err := client.CoreV1().ConfigMaps(ns).Get(ctx, fmt.Sprintf("parent-%d-child", i), metav1.GetOptions{})
			if err != nil || child.Data["count"] != strconv.Itoa(target) {
				remaining++
			}
		}
	}
	elapsed := time.Since(start)
	c.queue.ShutDown()
	wg.Wait()
	c.report(parents, target, workers, elapsed)
	if remaining > 0 {
		return fmt.Errorf("%d children did not reach %d before the timeout", remaining, target)
	}
	return nil
}

// newController wires the controller to the factory's ConfigMap informer.
// client is the one it writes with (made from a config wrapped by
// writes.WrapConfig, so its writes are recorded on ryw).
func newController(client kubernetes.Interface, factory *cache.SharedInformerFactory, ryw *readyourwrites.ReadYourWrites, mode string, opts ...requeue.Option) (*controller, error) {
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName]())
	c := &controller{
		client:    client,
		lister:    factory.Core().V1().ConfigMaps().Lister(),
		queue:     queue,
		ryw:       ryw,
		rq:        requeue.New(queue, ryw, opts...),
		mode:      mode,
		lastWrite: map[types.NamespacedName]time.Time{},
	}
	enqueueParent := func(obj any) {
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Labels["role"] == "parent" {
			c.queue.Add(types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name})
		}
	}
	if _, err := factory.Core().V1().ConfigMaps().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueParent,
		UpdateFunc: func(_, obj any) { enqueueParent(obj) },
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// next processes one work item; false when the queue is shut down.
func (c *controller) next(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	start := time.Now()
	err := c.reconcile(ctx, key)
	c.mu.Lock()
	c.durations = append(c.durations, time.Since(start))
	c.mu.Unlock()
	switch {
	case err == nil:
		c.queue.Forget(key)
	case errors.Is(err, freshness.ErrNotFresh):
		c.notFresh.Add(1)
		c.queue.AddRateLimited(key) // backoff mode: try again later, as kube-controller-manager does
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		c.conflicts.Add(1) // the reconcile read a stale child
		c.queue.AddRateLimited(key)
	default:
		if ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "[controller] reconcile:", err)
		}
		c.queue.AddRateLimited(key)
	}
	return true
}

// reconcile moves the parent's child one count closer to the target.
func (c *controller) reconcile(ctx context.Context, key types.NamespacedName) error {
	c.reconciles.Add(1)
	parent, err := c.lister.ConfigMaps(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.ryw.Forget(readyourwrites.Owner{GroupKind: schema.GroupKind{Kind: "ConfigMap"}, NamespacedName: key})
		return nil
	}
	if err != nil {
		return err
	}
	owner := readyourwrites.OwnerOf(parent)
	ctx = writes.WithOwner(ctx, owner) // the writes below are recorded for owner
	switch c.mode {
	case "requeue":
		if parked, err := c.rq.ParkUntilFresh(key, owner); parked || err != nil {
			if parked {
				c.parked.Add(1)
			}
			return err
		}
	case "ensure":
		if err := c.blocked(func() error { return c.ryw.EnsureFresh(ctx, owner) }); err != nil {
			return err
		}
	case "backoff":
		if err := c.ryw.CheckFresh(owner); err != nil {
			return err
		}
	}
	target, _ := strconv.Atoi(parent.Data["target"])
	childName := key.Name + "-child"
	child, err := c.lister.ConfigMaps(key.Namespace).Get(childName)
	switch {
	case apierrors.IsNotFound(err):
		_, err = c.client.CoreV1().ConfigMaps(key.Namespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: childName},
			Data:       map[string]string{"count": "0"},
		}, metav1.CreateOptions{})
	case err != nil:
		return err
	default:
		count, _ := strconv.Atoi(child.Data["count"])
		if count >= target {
			return nil
		}
		child = child.DeepCopy()
		child.Data["count"] = strconv.Itoa(count + 1)
		_, err = c.client.CoreV1().ConfigMaps(key.Namespace).Update(ctx, child, metav1.UpdateOptions{})
	}
	if err != nil {
		return err
	}
	c.wrote(key)
	c.queue.Add(key) // straight back: the next step reads what this one wrote
	return nil
}

// blocked runs wait, counting the time the worker spends blocked in it.
func (c *controller) blocked(wait func() error) error {
	now := c.blockedNow.Add(1)
	for {
		max := c.blockedMax.Load()
		if now <= max || c.blockedMax.CompareAndSwap(max, now) {
			break
		}
	}
	start := time.Now()
	err := wait()
	c.blockedNanos.Add(int64(time.Since(start)))
	c.blockedNow.Add(-1)
	return err
}

// wrote measures the step latency: from the parent's previous write to this one.
func (c *controller) wrote(key types.NamespacedName) {
	c.writes.Add(1)
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if last, ok := c.lastWrite[key]; ok {
		c.steps = append(c.steps, now.Sub(last))
	}
	c.lastWrite[key] = now
}

func (c *controller) report(parents, target, workers int, elapsed time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := func(ds []time.Duration, p float64) string {
		if len(ds) == 0 {
			return "-"
		}
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[min(len(s)-1, int(p*float64(len(s))))].Round(10 * time.Microsecond).String()
	}
	per1000 := func(n int64) string {
		return strconv.FormatFloat(1000*float64(n)/float64(max(1, c.reconciles.Load())), 'f', 1, 64)
	}
	fmt.Printf("[controller] %d children counted to %d by %d workers in %s: %d reconciles, %d writes, %d conflicts (stale reads), %d backoff requeues, %d parked\n",
		parents, target, workers, elapsed.Round(time.Millisecond), c.reconciles.Load(), c.writes.Load(), c.conflicts.Load(), c.notFresh.Load(), c.parked.Load())
	fmt.Println("| mode | wall time | reconciles | stale reads (409) per 1000 reconciles | step p50 | step p99 | reconcile call p50 | reconcile call p99 | workers blocked (total, most at once) |")
	fmt.Printf("| %s | %s | %d | %s | %s | %s | %s | %s | %s, %d |\n", c.mode, elapsed.Round(time.Millisecond), c.reconciles.Load(), per1000(c.conflicts.Load()),
		q(c.steps, 0.5), q(c.steps, 0.99), q(c.durations, 0.5), q(c.durations, 0.99),
		time.Duration(c.blockedNanos.Load()).Round(time.Millisecond), c.blockedMax.Load())
}
