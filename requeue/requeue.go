// Package requeue parks a workqueue key until the informer caches have
// caught up with what its owner wrote, and adds it back to a client-go
// workqueue the moment they have: requeue when fresh, instead of blocking a
// worker (readyourwrites.ReadYourWrites.EnsureFresh) or retrying with an exponential
// backoff until the cache happens to be fresh, as kube-controller-manager's
// consistency store does.
//
// One line in the reconciler, after it knows the owner:
//
//	if parked, err := rq.ParkUntilFresh(key, readyourwrites.OwnerOf(parent)); parked || err != nil {
//		return err // parked: the key comes back when the cache is fresh
//	}
//
// A parked key costs a callback on the informers' trackers (no goroutine,
// no timer of its own); one timer per Requeuer bounds how long a key stays
// parked, after which it is added back anyway and counted.
package requeue

import (
	"container/heap"
	"errors"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/freshinformer/freshinformer/readyourwrites"
)

// DefaultMaxPark bounds how long a key stays parked when no WithMaxPark
// option is given.
const DefaultMaxPark = 10 * time.Second

// Freshness tells when an owner's writes are visible in the caches.
// *readyourwrites.ReadYourWrites implements it.
type Freshness interface {
	// WhenFresh calls f once every cache owner wrote to has caught up
	// (nil) or cannot (an error); stop calls f off. See
	// readyourwrites.ReadYourWrites.WhenFresh.
	WhenFresh(owner readyourwrites.Owner, f func(error)) (stop func() bool)
}

var _ Freshness = (*readyourwrites.ReadYourWrites)(nil)

// Outcome says how a key left the parking, for metrics.
type Outcome string

// The outcomes of a parking.
const (
	OutcomeFresh    Outcome = "fresh"    // the caches caught up: added back at once
	OutcomeMaxPark  Outcome = "max_park" // the bound passed first: added back anyway
	OutcomeFailed   Outcome = "failed"   // the caches cannot catch up (informer stopped, incomparable): added back rate limited
	OutcomeShutDown Outcome = "shutdown" // the Requeuer shut down: dropped
)

// Metrics receives a Requeuer's measurements. Package metrics implements
// it for Prometheus (metrics.NewRequeueMetrics). Calls are made with the
// Requeuer's lock held: they must be quick and must not call back.
type Metrics interface {
	// SetParked reports how many keys are parked now.
	SetParked(n int)
	// ObserveRequeue records a key leaving the parking, and how long it
	// was parked.
	ObserveRequeue(outcome Outcome, parked time.Duration)
}

// Option configures a Requeuer.
type Option func(*options)

type options struct {
	maxPark time.Duration
	metrics Metrics
	clock   clock.WithDelayedExecution
}

// WithMaxPark bounds how long a key stays parked (default DefaultMaxPark):
// past it the key is added back to the queue even though the caches have
// not caught up, and counted (OutcomeMaxPark). The reconcile that follows
// will usually park it again.
func WithMaxPark(d time.Duration) Option { return func(o *options) { o.maxPark = d } }

// WithMetrics has the Requeuer report to m.
func WithMetrics(m Metrics) Option { return func(o *options) { o.metrics = m } }

// WithClock replaces the real clock (for tests).
func WithClock(c clock.WithDelayedExecution) Option { return func(o *options) { o.clock = c } }

// Requeuer parks keys of a typed workqueue until their owners' writes are
// visible in the caches. Its methods are safe for concurrent use; a key is
// parked at most once at a time.
//
// Its mutex guards the parked keys, their deadline heap, the timer and the
// shut-down flag. Under it the Requeuer calls only its Metrics (which must
// not call back); it calls WhenFresh, the notices' stop functions and the
// queue with it released, so the freshness callbacks, which take it, may
// run on any goroutine and at once. It is a leaf before the metrics' own
// locks: no lock of the Requeuer's callers or of the caches is taken under
// it.
type Requeuer[T comparable] struct {
	queue     workqueue.TypedRateLimitingInterface[T]
	freshness Freshness
	opts      options

	// mu guards the fields below. The workqueue and the freshness
	// callbacks are called with it released.
	mu       sync.Mutex
	parked   map[T]*parking
	byDue    dueHeap[T]
	timer    clock.Timer // fires at byDue[0].due; nil when nothing is parked
	timerDue time.Time
	shutDown bool
}

// parking is one parked key.
type parking struct {
	start, due  time.Time
	index       int         // in byDue, -1 once out
	stop        func() bool // calls the WhenFresh notice off
	registering bool        // ParkUntilFresh is between WhenFresh and storing stop
	early       *error      // set when the notice ran during registration
}

// New returns a Requeuer that adds keys back to queue once freshness says
// their owner's writes are visible.
func New[T comparable](queue workqueue.TypedRateLimitingInterface[T], freshness Freshness, opts ...Option) *Requeuer[T] {
	o := options{maxPark: DefaultMaxPark, clock: clock.RealClock{}}
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxPark <= 0 {
		o.maxPark = DefaultMaxPark
	}
	return &Requeuer[T]{queue: queue, freshness: freshness, opts: o, parked: map[T]*parking{}}
}

// ErrShutDown is returned by ParkUntilFresh after ShutDown.
var ErrShutDown = errors.New("requeue: shut down")

// ParkUntilFresh returns (false, nil) when every cache owner wrote to has
// caught up: reconcile now. Otherwise it parks key and returns (true,
// nil): return from the reconcile without error; key comes back through
// queue.Add the moment the caches catch up, or after the bound. When a
// cache cannot catch up (its informer stopped, its resource versions
// cannot be ordered, no informer caches a resource written) it returns
// (false, err): handle it as any reconcile error (the usual
// AddRateLimited).
//
// A key that is parked already stays parked with its original deadline,
// now waiting for owner's writes as recorded at this call. After ShutDown
// it returns (false, ErrShutDown).
func (r *Requeuer[T]) ParkUntilFresh(key T, owner readyourwrites.Owner) (parked bool, err error) {
	now := r.opts.clock.Now()
	p := &parking{start: now, due: now.Add(r.opts.maxPark), index: -1, registering: true}
	r.mu.Lock()
	if r.shutDown {
		r.mu.Unlock()
		return false, ErrShutDown
	}
	var oldStop func() bool
	if old := r.parked[key]; old != nil {
		p.start, p.due, oldStop = old.start, old.due, old.stop
		old.stop = nil
		r.remove(key, old)
	}
	r.parked[key] = p
	heap.Push(&r.byDue, dueEntry[T]{key, p})
	r.mu.Unlock()
	if oldStop != nil {
		oldStop()
	}

	stop := r.freshness.WhenFresh(owner, func(err error) { r.notified(key, p, err) })

	r.mu.Lock()
	p.registering = false
	switch {
	case p.early != nil: // fresh (or failed) already: no parking
		r.armLocked()
		r.setParkedLocked()
		r.mu.Unlock()
		return false, *p.early
	case r.parked[key] != p: // the bound passed (or ShutDown) meanwhile: already handled
		r.mu.Unlock()
		stop()
		return true, nil
	}
	p.stop = stop
	r.armLocked()
	r.setParkedLocked()
	r.mu.Unlock()
	return true, nil
}

// notified is the WhenFresh callback of parking p of key.
func (r *Requeuer[T]) notified(key T, p *parking, err error) {
	r.mu.Lock()
	if r.parked[key] != p { // the bound, ShutDown or a newer parking came first
		r.mu.Unlock()
		return
	}
	r.remove(key, p)
	if p.registering {
		p.early = &err
		r.mu.Unlock()
		return
	}
	outcome := OutcomeFresh
	if err != nil {
		outcome = OutcomeFailed
	}
	r.observeLocked(outcome, p)
	r.armLocked()
	r.mu.Unlock()
	if err != nil {
		r.queue.AddRateLimited(key) // the next reconcile's ParkUntilFresh returns the error
		return
	}
	r.queue.Add(key)
}

// expire adds back every key whose bound has passed; it runs on the timer.
func (r *Requeuer[T]) expire() {
	r.mu.Lock()
	r.timer = nil
	now := r.opts.clock.Now()
	var keys []T
	var stops []func() bool
	for len(r.byDue) > 0 && !r.byDue[0].p.due.After(now) {
		e := r.byDue[0]
		r.remove(e.key, e.p)
		keys = append(keys, e.key)
		if e.p.stop != nil {
			stops = append(stops, e.p.stop)
		}
		r.observeLocked(OutcomeMaxPark, e.p)
	}
	r.armLocked()
	r.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
	for _, k := range keys {
		r.queue.Add(k)
	}
}

// Parked returns how many keys are parked.
func (r *Requeuer[T]) Parked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.parked)
}

// IsParked reports whether key is parked.
func (r *Requeuer[T]) IsParked(key T) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.parked[key] != nil
}

// ShutDown calls off every parking without adding the keys back, and
// stops the timer. Call it when the queue shuts down. It is idempotent.
func (r *Requeuer[T]) ShutDown() {
	r.mu.Lock()
	r.shutDown = true
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	var stops []func() bool
	for len(r.byDue) > 0 {
		e := r.byDue[0]
		r.remove(e.key, e.p)
		if e.p.stop != nil {
			stops = append(stops, e.p.stop)
		}
		r.observeLocked(OutcomeShutDown, e.p)
	}
	r.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}

// remove takes p out of the map and the heap. r.mu is held.
func (r *Requeuer[T]) remove(key T, p *parking) {
	if r.parked[key] == p {
		delete(r.parked, key)
	}
	if p.index >= 0 {
		heap.Remove(&r.byDue, p.index)
	}
}

func (r *Requeuer[T]) observeLocked(outcome Outcome, p *parking) {
	if r.opts.metrics != nil {
		r.opts.metrics.ObserveRequeue(outcome, r.opts.clock.Since(p.start))
		r.opts.metrics.SetParked(len(r.parked))
	}
}

func (r *Requeuer[T]) setParkedLocked() {
	if r.opts.metrics != nil {
		r.opts.metrics.SetParked(len(r.parked))
	}
}

// armLocked points the one timer at the earliest deadline. r.mu is held.
func (r *Requeuer[T]) armLocked() {
	if len(r.byDue) == 0 || r.shutDown {
		if r.timer != nil {
			r.timer.Stop()
			r.timer = nil
		}
		return
	}
	due := r.byDue[0].p.due
	if r.timer != nil {
		if r.timerDue.Equal(due) {
			return
		}
		r.timer.Stop()
	}
	r.timerDue = due
	r.timer = r.opts.clock.AfterFunc(due.Sub(r.opts.clock.Now()), r.expire)
}

// dueEntry is a parked key in the deadline heap.
type dueEntry[T comparable] struct {
	key T
	p   *parking
}

// dueHeap orders parkings by deadline (container/heap).
type dueHeap[T comparable] []dueEntry[T]

func (h dueHeap[T]) Len() int           { return len(h) }
func (h dueHeap[T]) Less(i, j int) bool { return h[i].p.due.Before(h[j].p.due) }
func (h dueHeap[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].p.index = i
	h[j].p.index = j
}

func (h *dueHeap[T]) Push(x any) {
	e := x.(dueEntry[T])
	e.p.index = len(*h)
	*h = append(*h, e)
}

func (h *dueHeap[T]) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = dueEntry[T]{}
	e.p.index = -1
	*h = old[:len(old)-1]
	return e
}
