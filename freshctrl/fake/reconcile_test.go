package fake_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/freshinformer/freshinformer/freshctrl"
	"github.com/freshinformer/freshinformer/freshctrl/fake"
)

// verifyingReconciler labels its parent, then asks to run again to check
// its own write with a FailIfNotFresh read: while the cache is behind, the
// read fails and the request is parked with the Requeuer.
type verifyingReconciler struct {
	client.Client
	requeuer            *freshctrl.Requeuer
	reconciles, parked  atomic.Int32
	labelled, confirmed atomic.Int32
}

func (r *verifyingReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.reconciles.Add(1)
	var parent corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &parent, freshctrl.FailIfNotFresh); err != nil {
		if res, ok := r.requeuer.WhenFresh(req, err); ok {
			r.parked.Add(1)
			return res, nil
		}
		return reconcile.Result{}, err
	}
	if parent.Labels["seen"] == "yes" {
		r.confirmed.Add(1)
		return reconcile.Result{}, nil
	}
	parent.Labels = map[string]string{"seen": "yes"}
	if err := r.Update(ctx, &parent); err != nil {
		return reconcile.Result{}, err
	}
	r.labelled.Add(1)
	return reconcile.Result{RequeueAfter: time.Hour}, nil // verify the write
}

func TestReconcileParksUntilFresh(t *testing.T) {
	ctx := waitCtx(t)
	parent := configMap("default", "parent", nil)
	c := newClient(t, fake.NewClientBuilder().WithObjects(parent))
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(parent)}
	if err := c.Get(ctx, req.NamespacedName, &corev1.ConfigMap{}); err != nil { // the informer runs
		t.Fatal(err)
	}
	r := &verifyingReconciler{Client: c, requeuer: c.Requeuer()}

	c.PauseInformersFor(500 * time.Millisecond) // far longer than two reconciles
	start := time.Now()
	res, err := c.Reconcile(ctx, r, req)
	if err != nil || res != (reconcile.Result{}) {
		var cached, stored corev1.ConfigMap
		cerr := c.Cache().Get(context.Background(), req.NamespacedName, &cached)
		serr := c.Server().Get(context.Background(), req.NamespacedName, &stored)
		t.Fatalf("Reconcile = %+v, %v; want a settled result (reconciles %d, parked %d; pending %d; cache at %s %v, server at %s %v)",
			res, err, r.reconciles.Load(), r.parked.Load(), c.Requeuer().Pending(), cached.ResourceVersion, cerr, stored.ResourceVersion, serr)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Reconcile took %v: it waited for RequeueAfter or MaxPark, not for the cache", took)
	}
	// labelled, parked (the cache is behind), confirmed once it caught up.
	if got := [4]int32{r.reconciles.Load(), r.labelled.Load(), r.parked.Load(), r.confirmed.Load()}; got != [4]int32{3, 1, 1, 1} {
		t.Errorf("reconciles, labelled, parked, confirmed = %v, want [3 1 1 1]", got)
	}
	if n := c.Requeuer().Pending(); n != 0 {
		t.Errorf("Requeuer has %d pending after Reconcile", n)
	}
	var got corev1.ConfigMap
	if err := c.Get(ctx, req.NamespacedName, &got); err != nil || got.Labels["seen"] != "yes" {
		t.Errorf("after Reconcile: %v, labels %v", err, got.Labels)
	}
}

func TestReconcileRequeueAfterRunsAtOnce(t *testing.T) {
	ctx := waitCtx(t)
	c := newClient(t, fake.NewClientBuilder())
	var calls atomic.Int32
	r := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		if calls.Add(1) < 4 {
			return reconcile.Result{RequeueAfter: time.Hour}, nil
		}
		return reconcile.Result{}, nil
	})
	start := time.Now()
	res, err := c.Reconcile(ctx, r, reconcile.Request{})
	if err != nil || res != (reconcile.Result{}) || calls.Load() != 4 {
		t.Fatalf("Reconcile = %+v, %v after %d calls; want settled after 4", res, err, calls.Load())
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Reconcile took %v: RequeueAfter is not waited for", took)
	}
}

func TestReconcileNeverSettles(t *testing.T) {
	ctx := waitCtx(t)
	c := newClient(t, fake.NewClientBuilder())
	var calls atomic.Int32
	r := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		calls.Add(1)
		return reconcile.Result{RequeueAfter: time.Second}, nil
	})
	req := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "loop"}}
	_, err := c.Reconcile(ctx, r, req)
	var ns *fake.NotSettledError
	if !errors.As(err, &ns) {
		t.Fatalf("Reconcile: %v, want a *NotSettledError", err)
	}
	if ns.Reconciles != fake.MaxReconciles || calls.Load() != fake.MaxReconciles || ns.Request != req || ns.Result.RequeueAfter != time.Second {
		t.Errorf("NotSettledError %+v after %d calls", ns, calls.Load())
	}
	t.Log(err)
}

func TestReconcileError(t *testing.T) {
	ctx := waitCtx(t)
	c := newClient(t, fake.NewClientBuilder())
	boom := errors.New("boom")
	var calls atomic.Int32
	r := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		calls.Add(1)
		return reconcile.Result{RequeueAfter: time.Second}, boom
	})
	res, err := c.Reconcile(ctx, r, reconcile.Request{})
	if !errors.Is(err, boom) || res.RequeueAfter != time.Second || calls.Load() != 1 {
		t.Errorf("Reconcile = %+v, %v after %d calls; want the first error at once", res, err, calls.Load())
	}
}

// A request parked while the informers never catch up ends with the
// context.
func TestReconcileParkedUntilContextEnds(t *testing.T) {
	parent := configMap("default", "parent", nil)
	c := newClient(t, fake.NewClientBuilder().WithObjects(parent))
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(parent)}
	if err := c.Get(waitCtx(t), req.NamespacedName, &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	r := &verifyingReconciler{Client: c, requeuer: c.Requeuer()}
	c.PauseInformers()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Reconcile(ctx, r, req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Reconcile: %v, want the context's deadline", err)
	}
	c.ResumeInformers()
}

// Requeuer is one started Requeuer per Client; after Stop its WhenFresh
// takes nothing.
func TestRequeuerOnePerClient(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	if first, second := c.Requeuer(), c.Requeuer(); first != second {
		t.Error("Requeuer returned two Requeuers")
	}
	c.Stop()
	late := fake.NewClientBuilder().Build()
	late.Stop()
	if late.Requeuer() == nil {
		t.Error("Requeuer after Stop is nil")
	}
}
