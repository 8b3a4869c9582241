package fake

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/freshinformer/freshinformer/freshctrl"
)

// MaxReconciles bounds the reconciles of one Client.Reconcile call: past
// it, Reconcile fails with a *NotSettledError.
const MaxReconciles = 100

// NotSettledError is Client.Reconcile's error when the reconciler still
// asked to run again (Requeue, RequeueAfter, or a request parked with the
// Requeuer) after MaxReconciles reconciles: a reconciler that never
// settles, or one that polls for something only real time brings.
type NotSettledError struct {
	Request    reconcile.Request // the request of the last reconcile
	Reconciles int               // how many ran
	Result     reconcile.Result  // the last one's result
}

func (e *NotSettledError) Error() string {
	return fmt.Sprintf("freshctrl/fake: %s did not settle in %d reconciles (last result: %+v)", e.Request, e.Reconciles, e.Result)
}

// Requeuer returns the Client's freshctrl.Requeuer, started on the queue
// that Reconcile runs: hand it to the reconciler where a manager's
// controller would have it as a source (WatchesRawSource), and its
// WhenFresh parks requests as with a manager. (An unstarted Requeuer's
// WhenFresh returns ok=false.) Every call returns the same Requeuer; it
// stops with the Client.
func (c *Client) Requeuer() *freshctrl.Requeuer {
	c.requeueMu.Lock()
	defer c.requeueMu.Unlock()
	if c.requeuer == nil {
		c.queue = newSettleQueue()
		c.requeuer = freshctrl.NewRequeuer()
		_ = c.requeuer.Start(c.runCtx, c.queue) // fails only when started twice
		if c.stopped {
			c.queue.ShutDown()
		}
	}
	return c.requeuer
}

// Reconcile runs r for req as a controller would, until it settles, and
// returns the last reconcile's result: a result with Requeue or
// RequeueAfter reconciles req again at once (RequeueAfter's time is not
// waited for: the test runs as if it had passed), and a request parked
// with the Client's Requeuer (WhenFresh) is reconciled again when the
// Requeuer gives it back, that is once the cache has caught up (after
// PauseInformersFor's while, or ResumeInformers from another goroutine),
// or after its MaxPark. It settles when a reconcile asks for nothing more
// and no request is parked.
//
// An error from r ends it at once with that error and result (a
// controller would retry with backoff; a test wants to see it); so does
// the end of ctx while a request is parked. After MaxReconciles reconciles
// that still ask to run again it fails with a *NotSettledError.
//
// Requests the Requeuer gives back are reconciled whatever they are (a
// reconciler may park another request than its own). Calls on one Client
// run one at a time, as a controller with one worker.
func (c *Client) Reconcile(ctx context.Context, r reconcile.Reconciler, req reconcile.Request) (reconcile.Result, error) {
	requeuer := c.Requeuer()
	c.reconcileMu.Lock()
	defer c.reconcileMu.Unlock()
	for n := 1; ; n++ {
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			return res, err
		}
		//lint:ignore SA1019 Requeue is deprecated, and still honoured by controllers
		if !res.Requeue && res.RequeueAfter <= 0 {
			next, ok, err := c.queue.next(ctx, requeuer) // parked requests
			if err != nil {
				return res, fmt.Errorf("freshctrl/fake: waiting for %s's parked request: %w", req, err)
			}
			if !ok {
				return res, nil // settled
			}
			req = next
		}
		if n >= MaxReconciles {
			return res, &NotSettledError{Request: req, Reconciles: n, Result: res}
		}
	}
}

// settleQueue is the Requeuer's queue in a Client: a workqueue whose
// rate-limited and delayed adds are immediate (a test's time is not
// real), and which signals every add to Reconcile.
type settleQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	added chan struct{} // one pending signal at most
}

func newSettleQueue() *settleQueue {
	return &settleQueue{
		TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()),
		added:                      make(chan struct{}, 1),
	}
}

func (q *settleQueue) Add(req reconcile.Request) {
	q.TypedRateLimitingInterface.Add(req)
	select {
	case q.added <- struct{}{}:
	default:
	}
}

func (q *settleQueue) AddRateLimited(req reconcile.Request) { q.Add(req) }

func (q *settleQueue) AddAfter(req reconcile.Request, _ time.Duration) { q.Add(req) }

// next returns the next request given back to the queue, waiting while
// the Requeuer still holds one; ok is false when it holds none and the
// queue is empty. Reconcile is the queue's only reader.
func (q *settleQueue) next(ctx context.Context, requeuer *freshctrl.Requeuer) (reconcile.Request, bool, error) {
	// Adds wake it; the poll catches the Requeuer's count of a request it
	// is handing back dropping after the request was taken (no add).
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for {
		// Pending first: a request it stops counting is in the queue by then.
		pending := requeuer.Pending()
		if q.Len() > 0 {
			req, _ := q.Get()
			q.Done(req)
			q.Forget(req)
			return req, true, nil
		}
		if pending == 0 {
			return reconcile.Request{}, false, nil
		}
		select {
		case <-q.added:
		case <-poll.C:
		case <-ctx.Done():
			return reconcile.Request{}, false, ctx.Err()
		}
	}
}
