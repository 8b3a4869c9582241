package freshctrl_test

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/freshinformer/freshinformer/freshctrl"
)

// A manager opts in with two fields; everything else is as before.
func ExampleNewCache() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		NewCache:  freshctrl.NewCache,
		NewClient: freshctrl.NewClient,
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{"team-a": {}, "team-b": {}},
		},
	})
	if err != nil {
		panic(err)
	}
	_ = mgr.GetClient() // reads reflect this client's own writes
}

// Settings other than the defaults go through an Options value.
func ExampleOptions() {
	o := freshctrl.Options{Timeout: 3 * time.Second}
	_ = ctrl.Options{NewCache: o.NewCache, NewClient: o.NewClient}
}

type reconciler struct {
	client.Client
	requeuer *freshctrl.Requeuer
}

// Reconcile reads without blocking; when the cache is behind its own
// writes, the request comes back exactly when it has caught up.
func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var child corev1.ConfigMap
	key := types.NamespacedName{Namespace: req.Namespace, Name: req.Name + "-child"}
	if err := r.Get(ctx, key, &child, freshctrl.FailIfNotFresh); err != nil {
		if res, ok := r.requeuer.WhenFresh(req, err); ok {
			return res, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	// ... decide and write through r.Client ...
	return reconcile.Result{}, nil
}

func ExampleRequeuer() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{NewCache: freshctrl.NewCache, NewClient: freshctrl.NewClient})
	if err != nil {
		panic(err)
	}
	r := &reconciler{Client: mgr.GetClient(), requeuer: freshctrl.NewRequeuer()}
	err = ctrl.NewControllerManagedBy(mgr).
		For(&corev1.ConfigMap{}).
		WatchesRawSource(r.requeuer).
		Complete(r)
	if err != nil {
		panic(err)
	}
}
