package freshctrl

import (
	"container/heap"
	"context"
	"errors"
	"sync"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fcache "github.com/freshinformer/freshinformer/cache"
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
// Pending requests cost one heap entry each; one goroutine per informer
// that has pending requests waits (WaitForFreshness, woken by events and
// bookmarks alike) for the lowest target, and none runs otherwise.
//
// It is safe for concurrent use.
type Requeuer struct {
	mu      sync.Mutex
	ctx     context.Context // set by Start
	queue   workqueue.TypedRateLimitingInterface[reconcile.Request]
	waiters map[*fcache.FreshInformer]*informerWaiter
	wg      sync.WaitGroup
}

var _ source.Source = &Requeuer{}

// NewRequeuer returns a Requeuer; add it to a controller with
// WatchesRawSource (or Watch) before the manager starts.
func NewRequeuer() *Requeuer {
	return &Requeuer{waiters: map[*fcache.FreshInformer]*informerWaiter{}}
}

// Start implements source.Source: requests become due into queue until ctx
// ends. It does not block.
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
		for _, w := range r.waiters {
			if w.cancel != nil {
				w.cancel()
			}
		}
		r.mu.Unlock()
	})
	return nil
}

// WhenFresh schedules req for when the cache reaches what err (a
// *NotFreshError from a FailIfNotFresh read) says it lacks, and returns the
// result the reconciler should return with a nil error. For a delete not
// yet seen, the Requeuer asks the server once for its current resource
// version (one limit=1 list per informer and round, however many requests
// wait) and waits for that. ok is false when err is not a *NotFreshError
// or the Requeuer is not running: the reconciler returns err itself.
func (r *Requeuer) WhenFresh(req reconcile.Request, err error) (result reconcile.Result, ok bool) {
	var nf *NotFreshError
	if !errors.As(err, &nf) || nf.informer == nil {
		return reconcile.Result{}, false
	}
	target, perr := freshness.ParseRV(nf.Target)
	if perr != nil && !nf.Deleted {
		return reconcile.Result{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.queue == nil || r.ctx.Err() != nil {
		return reconcile.Result{}, false
	}
	w := r.waiters[nf.informer]
	if w == nil {
		w = &informerWaiter{inf: nf.informer}
		r.waiters[nf.informer] = w
	}
	// A delete has no target yet: the zero RV sorts first and means "probe".
	lowest := w.pending.Len() == 0 || target.Compare(w.pending[0].rv) < 0
	heap.Push(&w.pending, pendingRequest{rv: target, req: req})
	switch {
	case !w.running:
		w.running = true
		r.wg.Go(func() { r.run(w) })
	case lowest && w.cancel != nil:
		w.cancel() // wait for the new, lower target first
	}
	return reconcile.Result{}, true
}

// Pending returns how many requests wait for a cache.
func (r *Requeuer) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, w := range r.waiters {
		n += w.pending.Len()
	}
	return n
}

// informerWaiter holds the requests waiting for one informer; guarded by
// the Requeuer's mu.
type informerWaiter struct {
	inf     *fcache.FreshInformer
	pending requestHeap
	running bool
	cancel  context.CancelFunc
}

// run waits for the lowest pending target of w, queues every request the
// cache has reached, and repeats until none is pending or the Requeuer
// stops.
func (r *Requeuer) run(w *informerWaiter) {
	for {
		r.mu.Lock()
		if w.pending.Len() == 0 || r.ctx.Err() != nil {
			w.running, w.cancel = false, nil
			r.mu.Unlock()
			return
		}
		target := w.pending[0].rv
		if target.IsZero() {
			r.mu.Unlock()
			r.probe(w)
			continue
		}
		ctx, cancel := context.WithCancel(r.ctx)
		w.cancel = cancel
		r.mu.Unlock()

		err := w.inf.WaitForFreshness(ctx, target.String())
		cancel()

		r.mu.Lock()
		w.cancel = nil
		switch {
		case err == nil:
			cur, _ := freshness.ParseRV(w.inf.LastObservedResourceVersion())
			for w.pending.Len() > 0 && cur.AtLeast(w.pending[0].rv) {
				r.queue.Add(heap.Pop(&w.pending).(pendingRequest).req)
			}
		case errors.Is(err, freshness.ErrStopped) || errors.Is(err, freshness.ErrIncomparable):
			// This cache will never get there: let the reconciler run and
			// see for itself.
			for w.pending.Len() > 0 {
				r.queue.AddRateLimited(heap.Pop(&w.pending).(pendingRequest).req)
			}
		}
		// Otherwise the wait was cancelled for a lower target, or the
		// Requeuer is stopping: loop.
		r.mu.Unlock()
	}
}

// probe gives the pending deletes of w the server's current resource
// version as their target (it is past the deletes), or, if the server
// cannot be asked, hands them back to the controller's rate limiter.
func (r *Requeuer) probe(w *informerWaiter) {
	s, err := w.inf.ProbeResourceVersion(r.ctx)
	rv, perr := freshness.ParseRV(s)
	r.mu.Lock()
	defer r.mu.Unlock()
	var deletes []pendingRequest
	for w.pending.Len() > 0 && w.pending[0].rv.IsZero() {
		deletes = append(deletes, heap.Pop(&w.pending).(pendingRequest))
	}
	for _, d := range deletes {
		if err != nil || perr != nil || rv.IsZero() {
			if r.ctx.Err() == nil {
				r.queue.AddRateLimited(d.req)
			}
			continue
		}
		heap.Push(&w.pending, pendingRequest{rv: rv, req: d.req})
	}
}

type pendingRequest struct {
	rv  freshness.RV
	req reconcile.Request
}

type requestHeap []pendingRequest

func (h requestHeap) Len() int           { return len(h) }
func (h requestHeap) Less(i, j int) bool { return h[i].rv.Compare(h[j].rv) < 0 }
func (h requestHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *requestHeap) Push(x any)        { *h = append(*h, x.(pendingRequest)) }
func (h *requestHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
