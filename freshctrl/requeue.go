package freshctrl

import (
	"context"
	"errors"
	"sync"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/freshinformer/freshinformer/freshness"
)

// Requeuer re-queues reconcile requests exactly when a cache reaches the
// resource version they need, so a busy controller never parks a worker
// on a stale cache and never guesses a backoff. A reconciler reads with
// FailIfNotFresh and hands the error to WhenFresh:
//
//	if err := r.Get(ctx, key, &child, freshctrl.FailIfNotFresh); err != nil {
//		if res, ok := r.Requeuer.WhenFresh(req, err); ok {
//			return res, nil // back in the queue once the cache has the write
//		}
//		return ctrl.Result{}, err
//	}
//
// and the Requeuer is a source of the controller:
//
//	ctrl.NewControllerManagedBy(mgr).For(&v1.Parent{}).WatchesRawSource(requeuer)
//
// A pending request costs one callback on its informer's tracker
// (FreshInformer.AfterFreshness, which also has a quiet resource probed for
// it): no goroutine and no timer per request.
//
// It is safe for concurrent use.
type Requeuer struct {
	mu      sync.Mutex
	ctx     context.Context // set by Start
	queue   workqueue.TypedRateLimitingInterface[reconcile.Request]
	pending map[*pendingRequest]func() bool // each with its stop
	wg      sync.WaitGroup
}

var _ source.Source = &Requeuer{}

// NewRequeuer returns a Requeuer; add it to a controller with
// WatchesRawSource (or Watch) before the manager starts.
func NewRequeuer() *Requeuer {
	return &Requeuer{pending: map[*pendingRequest]func() bool{}}
}

// Start implements source.Source: requests become due into queue until ctx
// ends, when every pending one is called off. It does not block.
func (r *Requeuer) Start(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.queue != nil {
		return errors.New("freshctrl: Requeuer started twice")
	}
	r.ctx, r.queue = ctx, queue
	r.wg.Go(func() {
		<-ctx.Done()
		r.mu.Lock()
		stops := r.pending
		r.pending = map[*pendingRequest]func() bool{}
		r.mu.Unlock()
		for _, stop := range stops {
			stop()
		}
	})
	return nil
}

// WhenFresh schedules req for when the cache reaches what err (a
// *NotFreshError from a FailIfNotFresh read) says it lacks, and returns the
// result the reconciler should return with a nil error. For a delete not
// yet seen, the Requeuer asks the server once for its current resource
// version (one limit=1 list) and waits for that. ok is false when err is
// not a *NotFreshError or the Requeuer is not running: the reconciler
// returns err itself.
func (r *Requeuer) WhenFresh(req reconcile.Request, err error) (result reconcile.Result, ok bool) {
	var nf *NotFreshError
	if !errors.As(err, &nf) || nf.informer == nil {
		return reconcile.Result{}, false
	}
	if _, perr := freshness.ParseRV(nf.Target); perr != nil && !nf.Deleted {
		return reconcile.Result{}, false
	}
	r.mu.Lock()
	running := r.queue != nil && r.ctx.Err() == nil
	ctx := r.ctx
	r.mu.Unlock()
	if !running {
		return reconcile.Result{}, false
	}
	target := nf.Target
	if nf.Deleted && target == "" {
		// A delete has no resource version of its own: the server's
		// current one is past it.
		rv, err := nf.informer.ProbeResourceVersion(ctx)
		if err != nil {
			r.queue.AddRateLimited(req)
			return reconcile.Result{}, true
		}
		target = rv
	}
	p := &pendingRequest{req: req}
	r.mu.Lock()
	r.pending[p] = func() bool { return false } // held until the callback is known
	r.mu.Unlock()
	stop := nf.informer.AfterFreshness(target, func(err error) { r.due(p, err) })
	r.mu.Lock()
	if _, still := r.pending[p]; still {
		r.pending[p] = stop
	}
	r.mu.Unlock()
	return reconcile.Result{}, true
}

// due hands a request back to the controller: at once when the cache got
// there, through the rate limiter when it never will (the informer stopped,
// or its resource versions cannot be ordered), so the reconciler sees for
// itself.
func (r *Requeuer) due(p *pendingRequest, err error) {
	r.mu.Lock()
	_, pending := r.pending[p]
	delete(r.pending, p)
	r.mu.Unlock()
	if !pending {
		return
	}
	if err == nil {
		r.queue.Add(p.req)
	} else {
		r.queue.AddRateLimited(p.req)
	}
}

// Pending returns how many requests wait for a cache.
func (r *Requeuer) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending)
}

type pendingRequest struct{ req reconcile.Request }
