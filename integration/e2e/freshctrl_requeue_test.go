package e2e

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/freshinformer/freshinformer/freshctrl"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/integration/testenv"
)

// TestFreshctrlRequeuer runs a controller that never blocks on the cache:
// it reads with FailIfNotFresh and hands a stale cache to a Requeuer. It
// counts children in two cached namespaces up one Update at a time,
// coming back at once after each write, and must never read a child older
// than its own last write (so never conflict).
func TestFreshctrlRequeuer(t *testing.T) {
	nss := []string{testenv.Namespace(t), testenv.Namespace(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	mgr, err := ctrl.NewManager(testenv.Config(t), ctrl.Options{
		NewCache:  freshctrl.NewCache,
		NewClient: freshctrl.NewClient,
		Cache:     crcache.Options{DefaultNamespaces: map[string]crcache.Config{nss[0]: {}, nss[1]: {}}},
		Metrics:   metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	const target = 40
	r := &requeueCounter{c: mgr.GetClient(), requeuer: freshctrl.NewRequeuer(), written: map[types.NamespacedName]string{}}
	err = ctrl.NewControllerManagedBy(mgr).Named("requeue-counter").
		WithOptions(controller.Options{MaxConcurrentReconciles: 2, SkipNameValidation: ptr.To(true)}).
		For(&corev1.ConfigMap{}).
		WatchesRawSource(r.requeuer).
		Complete(r)
	if err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := mgr.Start(mctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	defer func() { stop(); wg.Wait() }()

	cs := testenv.Clientset(t)
	for _, ns := range nss {
		for i := range 2 {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c" + strconv.Itoa(i)}, Data: map[string]string{"count": "0", "target": strconv.Itoa(target)}}
			if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for r.done.Load() < 4 {
		if ctx.Err() != nil {
			t.Fatalf("only %d of 4 counted to %d", r.done.Load(), target)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%d reconciles, %d handed to the Requeuer, %d stale, %d conflicts", r.reconciles.Load(), r.requeued.Load(), r.stale.Load(), r.conflicts.Load())
	if r.stale.Load() != 0 || r.conflicts.Load() != 0 {
		t.Errorf("%d stale reads, %d conflicts", r.stale.Load(), r.conflicts.Load())
	}
}

type requeueCounter struct {
	c        client.Client
	requeuer *freshctrl.Requeuer

	mu      sync.Mutex
	written map[types.NamespacedName]string
	doneSet sync.Map

	reconciles, requeued, stale, conflicts, done atomic.Int64
}

func (r *requeueCounter) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.reconciles.Add(1)
	var obj corev1.ConfigMap
	if err := r.c.Get(ctx, req.NamespacedName, &obj, freshctrl.FailIfNotFresh); err != nil {
		if res, ok := r.requeuer.WhenFresh(req, err); ok {
			r.requeued.Add(1)
			return res, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if obj.Data["target"] == "" {
		return reconcile.Result{}, nil // not one of ours
	}
	r.mu.Lock()
	last := r.written[req.NamespacedName]
	r.mu.Unlock()
	if cmp, err := freshness.Compare(obj.ResourceVersion, last); last != "" && (err != nil || cmp < 0) {
		r.stale.Add(1)
	}
	n, _ := strconv.Atoi(obj.Data["count"])
	if strconv.Itoa(n) == obj.Data["target"] {
		if _, loaded := r.doneSet.LoadOrStore(req.NamespacedName, true); !loaded {
			r.done.Add(1)
		}
		return reconcile.Result{}, nil
	}
	obj.Data["count"] = strconv.Itoa(n + 1)
	if err := r.c.Update(ctx, &obj); err != nil {
		if apierrors.IsConflict(err) {
			r.conflicts.Add(1)
		}
		return reconcile.Result{}, err
	}
	r.mu.Lock()
	r.written[req.NamespacedName] = obj.ResourceVersion
	r.mu.Unlock()
	return reconcile.Result{RequeueAfter: time.Nanosecond}, nil
}
