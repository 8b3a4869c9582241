// Command controller is a small workqueue controller, in client-go style,
// that shows read-your-writes. Each "parent" ConfigMap asks for a count
// (data.target); the controller keeps a child ConfigMap counting up to it,
// one increment per reconcile, requeueing itself after each write. A
// reconcile that reads a stale child from the cache writes on top of an
// old resource version and gets a 409 Conflict: with -read-your-writes
// (the default) the controller waits for its own writes first and gets
// none.
//
//	go run ./examples/controller -read-your-writes=false   # conflicts
//	go run ./examples/controller                           # none
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
	"strconv"
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
	"github.com/freshinformer/freshinformer/metrics"
)

type controller struct {
	client         kubernetes.Interface
	lister         corelisters.ConfigMapLister
	queue          workqueue.TypedRateLimitingInterface[types.NamespacedName]
	ryw            *cache.ReadYourWrites
	readYourWrites bool

	reconciles, writes, conflicts, notFresh atomic.Int64
}

func main() {
	var (
		kubeconfig     = flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
		namespace      = flag.String("namespace", "freshinformer-controller", "namespace to work in (created if missing)")
		parents        = flag.Int("parents", 1, "parent ConfigMaps to create")
		target         = flag.Int("target", 200, "count each child must reach")
		readYourWrites = flag.Bool("read-your-writes", true, "wait for the cache to hold the controller's own writes before reading")
		requeue        = flag.Bool("requeue-style", false, "with -read-your-writes: requeue when not fresh (CheckFresh) instead of blocking (EnsureFresh)")
		metricsAddr    = flag.String("metrics-addr", "127.0.0.1:9465", "where to serve /metrics")
		timeout        = flag.Duration("timeout", 2*time.Minute, "give up after this long")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := run(ctx, *kubeconfig, *namespace, *parents, *target, *readYourWrites, *requeue, *metricsAddr); err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, ns string, parents, target int, readYourWrites, requeueStyle bool, metricsAddr string) error {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 200, 400
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
	ln, err := net.Listen("tcp", metricsAddr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(registry, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	fmt.Printf("[controller] metrics: http://%s/metrics; read-your-writes: %v\n", ln.Addr(), readYourWrites)

	// The drop-in factory: the same accessors as client-go's.
	factory := cache.NewSharedInformerFactory(client, 0, cache.WithNamespace(ns),
		cache.WithInformerOptions(cache.WithMetrics(provider), cache.WithName("controller")))
	c, err := newController(client, factory, readYourWrites)
	if err != nil {
		return err
	}
	informerCtx, stopInformers := context.WithCancel(context.WithoutCancel(ctx))
	factory.Start(informerCtx.Done())
	defer func() { stopInformers(); factory.Shutdown() }()
	if res := factory.WaitForCacheSyncWithContext(ctx); res.AsError() != nil {
		return res.AsError()
	}

	for i := range parents {
		p := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("parent-%d", i), Labels: map[string]string{"role": "parent"}},
			Data: map[string]string{"target": strconv.Itoa(target)}}
		if err := client.CoreV1().ConfigMaps(ns).Delete(ctx, p.Name+"-child", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}

	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c.next(ctx, requeueStyle) {
		}
	}()
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
	c.queue.ShutDown()
	<-done
	fmt.Printf("[controller] %d children counted to %d in %s: %d reconciles, %d writes, %d conflicts (stale reads), %d requeues for freshness\n",
		parents, target, time.Since(start).Round(time.Millisecond), c.reconciles.Load(), c.writes.Load(), c.conflicts.Load(), c.notFresh.Load())
	if remaining > 0 {
		return fmt.Errorf("%d children did not reach %d before the timeout", remaining, target)
	}
	return nil
}

// newController wires the controller to the factory's ConfigMap informer.
func newController(client kubernetes.Interface, factory *cache.SharedInformerFactory, readYourWrites bool) (*controller, error) {
	c := &controller{
		client:         client,
		lister:         factory.Core().V1().ConfigMaps().Lister(),
		queue:          workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName]()),
		ryw:            cache.NewReadYourWrites(factory, 10*time.Second),
		readYourWrites: readYourWrites,
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
func (c *controller) next(ctx context.Context, requeueStyle bool) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	err := c.reconcile(ctx, key, requeueStyle)
	switch {
	case err == nil:
		c.queue.Forget(key)
	case errors.Is(err, cache.ErrNotFresh):
		c.notFresh.Add(1)
		c.queue.AddRateLimited(key) // requeue style: the cache catches up meanwhile
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		c.conflicts.Add(1)
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
func (c *controller) reconcile(ctx context.Context, key types.NamespacedName, requeueStyle bool) error {
	c.reconciles.Add(1)
	parent, err := c.lister.ConfigMaps(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.ryw.Forget(cache.Owner{GroupKind: schema.GroupKind{Kind: "ConfigMap"}, NamespacedName: key})
		return nil
	}
	if err != nil {
		return err
	}
	owner := cache.OwnerOf(parent)
	if c.readYourWrites {
		if requeueStyle {
			if err := c.ryw.CheckFresh(owner); err != nil {
				return err
			}
		} else if err := c.ryw.EnsureFresh(ctx, owner); err != nil {
			return err
		}
	}
	target, _ := strconv.Atoi(parent.Data["target"])
	childName := key.Name + "-child"
	child, err := c.lister.ConfigMaps(key.Namespace).Get(childName)
	var written *corev1.ConfigMap
	switch {
	case apierrors.IsNotFound(err):
		written, err = c.client.CoreV1().ConfigMaps(key.Namespace).Create(ctx, &corev1.ConfigMap{
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
		written, err = c.client.CoreV1().ConfigMaps(key.Namespace).Update(ctx, child, metav1.UpdateOptions{})
	}
	if err := c.ryw.Wrote(owner, written, err); err != nil {
		return err
	}
	c.writes.Add(1)
	c.queue.Add(key) // straight back: the next step reads what this one wrote
	return nil
}
