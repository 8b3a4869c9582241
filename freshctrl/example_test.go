package freshctrl_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/freshinformer/freshinformer/freshctrl"
	"github.com/freshinformer/freshinformer/freshctrl/fake"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/readyourwrites"
)

// A manager opts in with two fields; everything else is as before. (The
// manager only starts talking to the API server when it starts.)
func ExampleNewCache() {
	cfg := &rest.Config{Host: "https://kube-apiserver.invalid"} // ctrl.GetConfigOrDie() in production
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		NewCache:  freshctrl.NewCache,  // every informer a FreshInformer, metrics on the manager's /metrics
		NewClient: freshctrl.NewClient, // cached reads reflect this client's own earlier writes
		Cache: cache.Options{ // as before: all of it works
			DefaultNamespaces: map[string]cache.Config{"team-a": {}, "team-b": {}},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, fresh := mgr.GetCache().(*freshctrl.Cache)
	fmt.Println("freshctrl cache:", fresh)
	// Output: freshctrl cache: true
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

// A FailIfNotFresh read does not wait: while the cache is behind the
// client's own write, it fails at once with a *NotFreshError naming the
// write. (Here the fake client's PauseInformers holds the cache behind.)
func ExampleFailIfNotFresh() {
	ctx := context.Background()
	settings := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}}
	c := fake.NewClientBuilder().WithObjects(settings).Build()
	defer c.Stop()
	key := client.ObjectKeyFromObject(settings)
	if err := c.Get(ctx, key, &corev1.ConfigMap{}); err != nil { // the informer runs
		fmt.Println(err)
		return
	}

	c.PauseInformers()
	settings.Data = map[string]string{"mode": "fast"}
	if err := c.Update(ctx, settings); err != nil {
		fmt.Println(err)
		return
	}
	err := c.Get(ctx, key, &corev1.ConfigMap{}, freshctrl.FailIfNotFresh)
	var nf *readyourwrites.NotFreshError
	if errors.As(err, &nf) {
		fmt.Println("not fresh:", errors.Is(err, freshness.ErrNotFresh), nf.Key, nf.Written == settings.ResourceVersion)
	}

	c.ResumeInformers()
	var got corev1.ConfigMap
	err = c.Get(ctx, key, &got) // waits for the write, then reads it
	fmt.Println(err, got.Data["mode"])
	// Output:
	// not fresh: true default/settings true
	// <nil> fast
}

// A read waits for the cache at most WaitTimeout (or Options.Timeout), then
// fails with a *NotFreshError whose cause is the context's deadline.
func ExampleWaitTimeout() {
	ctx := context.Background()
	settings := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}}
	c := fake.NewClientBuilder().WithObjects(settings).Build()
	defer c.Stop()
	key := client.ObjectKeyFromObject(settings)
	if err := c.Get(ctx, key, &corev1.ConfigMap{}); err != nil {
		fmt.Println(err)
		return
	}

	c.PauseInformers() // the cache never catches up
	settings.Data = map[string]string{"mode": "fast"}
	if err := c.Update(ctx, settings); err != nil {
		fmt.Println(err)
		return
	}
	err := c.Get(ctx, key, &corev1.ConfigMap{}, freshctrl.WaitTimeout(20*time.Millisecond))
	fmt.Println(errors.Is(err, freshness.ErrNotFresh), errors.Is(err, context.DeadlineExceeded))
	// Output: true true
}

// Every informer of the cache is a FreshInformer named after its scope:
// one per namespace of DefaultNamespaces, with the ByObject selectors.
func ExampleCache_FreshInformers() {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithCacheOptions(cache.Options{
		DefaultNamespaces: map[string]cache.Config{"team-a": {}, "team-b": {}},
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Label: labels.SelectorFromSet(labels.Set{"app": "web"})},
		},
	}).Build()
	defer c.Stop()
	// Informers are made on first use, as in controller-runtime.
	if err := c.List(ctx, &corev1.ConfigMapList{}); err != nil {
		fmt.Println(err)
		return
	}
	if err := c.List(ctx, &corev1.SecretList{}); err != nil {
		fmt.Println(err)
		return
	}
	var names []string
	for _, si := range c.Cache().FreshInformers() {
		names = append(names, si.Resource.Resource+" "+si.Informer.Name())
	}
	sort.Strings(names)
	fmt.Println(strings.Join(names, "\n"))
	// Output:
	// configmaps ns=team-a
	// configmaps ns=team-b
	// secrets ns=team-a,labels=app=web
	// secrets ns=team-b,labels=app=web
}
