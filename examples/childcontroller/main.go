// Command childcontroller is a complete client-go controller on freshinformer,
// to start from: for each ConfigMap labelled app=demo it keeps a ConfigMap
// <name>-child holding a copy of the parent's data. It uses the drop-in
// informer factory, a client-go workqueue, read-your-writes (EnsureFresh
// before reading, Wrote after writing), the stale-read detector with a
// handler, and Prometheus metrics. Run it against $KUBECONFIG, or on a
// throwaway control plane: make demo DEMO_CMD='go run ./examples/childcontroller'.
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/metrics"
	"github.com/freshinformer/freshinformer/readyourwrites"
	"github.com/freshinformer/freshinformer/stalereads"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file")
	ns := flag.String("namespace", "default", "namespace to watch")
	metricsAddr := flag.String("metrics-addr", "127.0.0.1:9466", "where to serve /metrics")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	check(err)
	cfg.QPS, cfg.Burst = 100, 200 // client-go's default, 5 per second, throttles a controller that writes on every event
	client := kubernetes.NewForConfigOrDie(cfg)

	registry := prometheus.NewRegistry()
	provider, err := metrics.NewProvider(registry) // freshinformer_* series per informer
	check(err)
	go func() { _ = http.ListenAndServe(*metricsAddr, promhttp.HandlerFor(registry, promhttp.HandlerOpts{})) }()
	var staleReads atomic.Int64
	onStaleRead := func(r stalereads.Report) { // a read older than this process's own write
		staleReads.Add(1)
		fmt.Fprintln(os.Stderr, r)
	}
	factory := cache.NewSharedInformerFactory(client, 0, cache.WithNamespace(*ns),
		cache.WithInformerOptions(cache.WithMetrics(provider), cache.WithStaleReadDetection(onStaleRead)))
	configMaps := factory.Core().V1().ConfigMaps()
	ryw := readyourwrites.New(factory, 10*time.Second) // EnsureFresh waits at most 10 s

	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName]())
	enqueue := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return // a DeletedFinalStateUnknown: the next event of the parent brings it back
		}
		if cm.Labels["app"] == "demo" {
			queue.Add(types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name})
		} else if parent := cm.Labels["demo-parent"]; parent != "" {
			queue.Add(types.NamespacedName{Namespace: cm.Namespace, Name: parent}) // a child changed
		}
	}
	_, err = configMaps.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
	})
	check(err)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	// reconcile makes key's child hold a copy of key's data.
	reconcile := func(ctx context.Context, key types.NamespacedName) error {
		parent, err := configMaps.Lister().ConfigMaps(key.Namespace).Get(key.Name)
		if apierrors.IsNotFound(err) {
			return nil // the child goes with it (owner reference, garbage collector)
		} else if err != nil {
			return err
		}
		owner := readyourwrites.OwnerOf(parent)
		if err := ryw.EnsureFresh(ctx, owner); err != nil { // the cache holds every write made for parent
			return err
		}
		want := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: key.Namespace, Name: key.Name + "-child", Labels: map[string]string{"demo-parent": key.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(parent, corev1.SchemeGroupVersion.WithKind("ConfigMap"))},
		}, Data: parent.Data}
		child, err := configMaps.Lister().ConfigMaps(key.Namespace).Get(want.Name)
		switch {
		case apierrors.IsNotFound(err):
			child, err = client.CoreV1().ConfigMaps(key.Namespace).Create(ctx, want, metav1.CreateOptions{})
		case err != nil:
			return err
		case maps.Equal(child.Data, parent.Data):
			return nil
		default:
			want.ResourceVersion = child.ResourceVersion // a stale read here would be a 409 Conflict
			child, err = client.CoreV1().ConfigMaps(key.Namespace).Update(ctx, want, metav1.UpdateOptions{})
		}
		return ryw.Wrote(owner, child, err) // the next reconcile of parent waits for this write
	}

	var workers sync.WaitGroup
	for range 2 {
		workers.Go(func() {
			for {
				key, shutdown := queue.Get()
				if shutdown {
					return
				}
				if err := reconcile(ctx, key); err != nil {
					fmt.Fprintf(os.Stderr, "reconcile %s: %v\n", key, err)
					queue.AddRateLimited(key)
				} else {
					queue.Forget(key)
				}
				queue.Done(key)
			}
		})
	}
	<-ctx.Done()
	queue.ShutDown()
	workers.Wait()
	factory.Shutdown()
	fmt.Printf("childcontroller: %d stale reads reported\n", staleReads.Load())
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "childcontroller:", err)
		os.Exit(1)
	}
}
