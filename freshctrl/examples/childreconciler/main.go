// Command childreconciler is a complete controller-runtime controller on
// freshctrl, to start from: for each ConfigMap labelled app=demo it keeps a
// ConfigMap <name>-child holding a copy of the parent's data. The manager's
// cache is freshctrl's (every informer a FreshInformer, metrics on the
// manager's /metrics) and so is its client: a cached read waits until the
// cache holds this client's own earlier writes, and the stale-read detector
// hands each report to a handler. Run it against $KUBECONFIG, or on a
// throwaway control plane: make demo DEMO_CMD='go -C freshctrl run ./examples/childreconciler'.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/freshinformer/freshinformer/freshctrl"
	"github.com/freshinformer/freshinformer/stalereads"
)

// reconciler makes a parent's child hold a copy of the parent's data.
type reconciler struct {
	client.Client // freshctrl's: reads reflect this client's own writes
}

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var parent corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &parent); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err) // deleted: the child goes with it (owner reference)
	}
	if parent.Labels["app"] != "demo" {
		return ctrl.Result{}, nil
	}
	child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name + "-child"}}
	// CreateOrUpdate reads the child from the cache, then writes it: after
	// this client's last write of it, the read waits until the cache has it
	// (else the update would carry an old resourceVersion: 409 Conflict).
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, child, func() error {
		child.Data = parent.Data
		return controllerutil.SetControllerReference(&parent, child, r.Scheme())
	})
	return ctrl.Result{}, err
}

func main() {
	ns := flag.String("namespace", "default", "namespace to watch")
	metricsAddr := flag.String("metrics-addr", "127.0.0.1:9467", "where to serve /metrics (0: nowhere)")
	flag.Parse()
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, nil)))

	cfg := ctrl.GetConfigOrDie()  // $KUBECONFIG, else in-cluster, else ~/.kube/config
	cfg.QPS, cfg.Burst = 100, 200 // client-go's default, 5 per second, throttles a controller that writes on every event
	var staleReads atomic.Int64
	fresh := freshctrl.Options{OnStaleRead: func(r stalereads.Report) { // turns the detector on
		staleReads.Add(1)
		fmt.Fprintln(os.Stderr, r)
	}}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		NewCache:  fresh.NewCache,
		NewClient: fresh.NewClient,
		Cache:     cache.Options{DefaultNamespaces: map[string]cache.Config{*ns: {}}},
		Metrics:   metricsserver.Options{BindAddress: *metricsAddr},
	})
	check(err)
	isParent := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()["app"] == "demo" })
	err = ctrl.NewControllerManagedBy(mgr).Named("childreconciler").
		For(&corev1.ConfigMap{}, builder.WithPredicates(isParent)).
		Owns(&corev1.ConfigMap{}). // a child's events reconcile its parent
		Complete(&reconciler{Client: mgr.GetClient()})
	check(err)
	check(mgr.Start(ctrl.SetupSignalHandler()))
	fmt.Printf("childreconciler: %d stale reads reported\n", staleReads.Load())
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "childreconciler:", err)
		os.Exit(1)
	}
}
