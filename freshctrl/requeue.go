package freshctrl

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fcache "github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/readyourwrites"
)

// Defaults of RequeuerOptions.
const (
	// DefaultMaxPark bounds how long a request waits for a cache before it
	// is re-queued anyway.
	DefaultMaxPark = 10 * time.Second
	// DefaultProbeTimeout bounds WhenFresh's request for the server's
	// resource version after a delete.
	DefaultProbeTimeout = 5 * time.Second
)

// RequeuerOptions configure a Requeuer; the zero value is NewRequeuer's.
type RequeuerOptions struct {
	// MaxPark bounds how long a request stays pending (default
	// DefaultMaxPark): past it the request is added back to the queue even
	// though the cache has not caught up (the informer may be stuck, or
	// its target never reached); the reconcile that follows will usually
	// find the cache behind and park it again.
	MaxPark time.Duration
	// ProbeTimeout bounds the one request WhenFresh makes for a delete
	// not yet seen, on the reconcile goroutine (default
	// DefaultProbeTimeout). On timeout the request is re-queued through
	// the rate limiter.
	ProbeTimeout time.Duration
	// Clock replaces the real clock for MaxPark (for tests).
	Clock clock.WithDelayedExecution
}

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
// it) and a place in one deadline heap: no goroutine and no timer per
// request (one timer per Requeuer for MaxPark).
//
// Bounds: at most one pending entry per request (a request parked again
// keeps its first deadline and waits for the highest target asked on the
// same informer, or for the newest informer asked), and each leaves within
// MaxPark: the pending entries are the distinct requests parked in the
// last MaxPark.
//
// Callbacks: the freshness callback runs on the informer's goroutine that
// applies the event or bookmark (or answers its probe), or on WhenFresh's
// own goroutine when the cache is already there; the MaxPark timer runs on
// a timer goroutine; Start's goroutine waits for the end of its context.
// All of them only take the Requeuer's lock and add to the queue, which
// does not block.
//
// It is safe for concurrent use. Its mutex guards the pending requests,
// their deadline heap, the timer and the started and stopped state; it is a
// leaf: AfterFreshness, the stop functions, the server probe and the
// queue are called with it released.
type Requeuer struct {
	opts RequeuerOptions
	wg   sync.WaitGroup

	mu       sync.Mutex      // guards the fields below
	ctx      context.Context // set by Start
	queue    workqueue.TypedRateLimitingInterface[reconcile.Request]
	pending  map[reconcile.Request]*pendingRequest
	byDue    dueHeap
	timer    clock.Timer // fires at byDue[0].due; nil when nothing is pending
	timerDue time.Time
	stopped  bool // Start's context ended
	// handing counts requests out of pending whose queue Add has not
	// returned yet: Pending counts them, so a request is never in neither.
	handing int
}

var _ source.Source = &Requeuer{}

// NewRequeuer returns a Requeuer with the default options; add it to a
// controller with WatchesRawSource (or Watch) before the manager starts.
func NewRequeuer() *Requeuer {
	return NewRequeuerWithOptions(RequeuerOptions{})
}

// NewRequeuerWithOptions returns a Requeuer with o's settings.
func NewRequeuerWithOptions(o RequeuerOptions) *Requeuer {
	if o.MaxPark <= 0 {
		o.MaxPark = DefaultMaxPark
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = DefaultProbeTimeout
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &Requeuer{opts: o, pending: map[reconcile.Request]*pendingRequest{}}
}

// pendingRequest is one parked request.
type pendingRequest struct {
	req      reconcile.Request
	informer *fcache.FreshInformer
	target   freshness.RV
	due      time.Time
	index    int         // in byDue, -1 once out
	stop     func() bool // calls the freshness callback off
	// registering: WhenFresh is between AfterFreshness and storing stop;
	// a callback meanwhile leaves its outcome in early.
	registering bool
	early       *error
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
		r.shutDown()
	})
	return nil
}

func (r *Requeuer) shutDown() {
	r.mu.Lock()
	r.stopped = true
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	var stops []func() bool
	for len(r.byDue) > 0 {
		p := r.byDue[0]
		r.removeLocked(p)
		if p.stop != nil {
			stops = append(stops, p.stop)
		}
	}
	r.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}

// WhenFresh schedules req for when the cache reaches what err (a
// *readyourwrites.NotFreshError from a FailIfNotFresh read) says it
// lacks, and returns the result the reconciler should return with a nil
// error. The request comes
// back through the queue's Add once the cache gets there, through Add
// after MaxPark if it has not, or through AddRateLimited if it never will
// (its informer stopped, or its resource versions cannot be ordered). A
// request already pending stays pending once, with its first deadline.
//
// For a delete not yet seen, WhenFresh asks the server once for its
// current resource version (one limit=1 list, bounded by ProbeTimeout) and
// waits for that; if that fails, the request is re-queued through the
// rate limiter. For an informer that is not a FreshInformer (from a
// cache.Options.NewInformer hook), which cannot call back, the request is
// re-queued through the rate limiter at once. ok is false when err is not
// a *readyourwrites.NotFreshError or the Requeuer is not running: the
// reconciler returns err itself.
func (r *Requeuer) WhenFresh(req reconcile.Request, err error) (result reconcile.Result, ok bool) {
	var nf *readyourwrites.NotFreshError
	if !errors.As(err, &nf) {
		return reconcile.Result{}, false
	}
	r.mu.Lock()
	running := r.queue != nil && !r.stopped && r.ctx.Err() == nil
	ctx, queue := r.ctx, r.queue
	r.mu.Unlock()
	if !running {
		return reconcile.Result{}, false
	}
	if nf.Informer == nil {
		queue.AddRateLimited(req)
		return reconcile.Result{}, true
	}
	target, perr := freshness.ParseRV(nf.Written)
	if nf.Deleted && nf.Written == "" {
		// A delete has no resource version of its own: the server's
		// current one is past it.
		pctx, cancel := context.WithTimeout(ctx, r.opts.ProbeTimeout)
		rv, err := nf.Informer.ServerResourceVersion(pctx)
		cancel()
		if err == nil {
			target, perr = freshness.ParseRV(rv)
		} else {
			perr = err
		}
		if perr != nil {
			queue.AddRateLimited(req)
			return reconcile.Result{}, true
		}
	}
	if perr != nil {
		return reconcile.Result{}, false
	}
	r.park(req, nf.Informer, target)
	return reconcile.Result{}, true
}

// park makes req pending on informer until target.
func (r *Requeuer) park(req reconcile.Request, informer *fcache.FreshInformer, target freshness.RV) {
	now := r.opts.Clock.Now()
	p := &pendingRequest{req: req, informer: informer, target: target, due: now.Add(r.opts.MaxPark), index: -1, registering: true}
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		r.queue.AddRateLimited(req)
		return
	}
	var oldStop func() bool
	if old := r.pending[req]; old != nil {
		if old.informer == informer && old.target.Compare(target) >= 0 {
			r.mu.Unlock() // already waiting for as much
			return
		}
		p.due, oldStop = old.due, old.stop
		old.stop = nil
		r.removeLocked(old)
	}
	r.pending[req] = p
	heap.Push(&r.byDue, p)
	r.armLocked()
	r.mu.Unlock()
	if oldStop != nil {
		oldStop()
	}

	// Not under r.mu: the callback may run right here, and the tracker
	// calls it under no lock of ours.
	stop := informer.AfterFreshness(target.String(), func(err error) { r.due(p, err) })

	r.mu.Lock()
	p.registering = false
	switch {
	case p.early != nil: // the cache was there (or never will be) already
		err := *p.early
		r.mu.Unlock()
		r.hand(p.req, err)
		return
	case r.pending[req] != p: // expired, replaced or shut down meanwhile
		r.mu.Unlock()
		stop()
		return
	}
	p.stop = stop
	r.mu.Unlock()
}

// due is p's freshness callback (see Requeuer for where it runs).
func (r *Requeuer) due(p *pendingRequest, err error) {
	r.mu.Lock()
	if r.pending[p.req] != p {
		r.mu.Unlock()
		return
	}
	r.removeLocked(p)
	r.armLocked()
	if p.registering {
		p.early = &err
		r.mu.Unlock()
		return
	}
	r.handing++
	r.mu.Unlock()
	r.hand(p.req, err)
	r.mu.Lock()
	r.handing--
	r.mu.Unlock()
}

// hand gives a request back to the controller: at once when the cache got
// there, through the rate limiter when it never will, so the reconciler
// sees for itself.
func (r *Requeuer) hand(req reconcile.Request, err error) {
	if err == nil {
		r.queue.Add(req)
	} else {
		r.queue.AddRateLimited(req)
	}
}

// expire re-queues every request whose MaxPark has passed; it runs on the
// timer.
func (r *Requeuer) expire() {
	r.mu.Lock()
	r.timer = nil
	now := r.opts.Clock.Now()
	var reqs []reconcile.Request
	var stops []func() bool
	for len(r.byDue) > 0 && !r.byDue[0].due.After(now) {
		p := r.byDue[0]
		r.removeLocked(p)
		reqs = append(reqs, p.req)
		if p.stop != nil {
			stops = append(stops, p.stop)
		}
	}
	r.armLocked()
	queue := r.queue
	r.handing += len(reqs)
	r.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
	for _, req := range reqs {
		queue.Add(req)
	}
	r.mu.Lock()
	r.handing -= len(reqs)
	r.mu.Unlock()
}

// Pending returns how many requests wait for a cache, counting those on
// their way back to the queue: once it is 0, every request the Requeuer
// gave back is in the queue.
func (r *Requeuer) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending) + r.handing
}

// removeLocked takes p out of the map and the heap. r.mu is held.
func (r *Requeuer) removeLocked(p *pendingRequest) {
	if r.pending[p.req] == p {
		delete(r.pending, p.req)
	}
	if p.index >= 0 {
		heap.Remove(&r.byDue, p.index)
	}
}

// armLocked points the one timer at the earliest deadline. r.mu is held.
func (r *Requeuer) armLocked() {
	if len(r.byDue) == 0 || r.stopped {
		if r.timer != nil {
			r.timer.Stop()
			r.timer = nil
		}
		return
	}
	due := r.byDue[0].due
	if r.timer != nil {
		if r.timerDue.Equal(due) {
			return
		}
		r.timer.Stop()
	}
	r.timerDue = due
	r.timer = r.opts.Clock.AfterFunc(due.Sub(r.opts.Clock.Now()), r.expire)
}

// dueHeap orders pending requests by deadline (container/heap).
type dueHeap []*pendingRequest

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *dueHeap) Push(x any) {
	p := x.(*pendingRequest)
	p.index = len(*h)
	*h = append(*h, p)
}

func (h *dueHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	old[len(old)-1] = nil
	p.index = -1
	*h = old[:len(old)-1]
	return p
}
