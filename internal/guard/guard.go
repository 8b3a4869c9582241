// Package guard is the layer between client-go's Reflector and the
// informer's queue that keeps the stream from going back in time (package
// reflector describes it for users). It is the adapter between client-go's
// queue and list/watch and the informer's trust state (internal/trust): it
// keeps the stream's own facts (what it delivered, which lists it refused,
// which watch is open, the lists it queued), submits what it finds (a
// failed request or broken stream, a list admitted below the floor), and
// takes from the trust state the floor (with the proofs it holds), whether
// a declared restore waits for its relist, and what a request is stamped
// with. Its Owner decides how the stream resumes after a failed request,
// and checks the server after a stream that ended early resumed.
package guard

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/trust"
	"github.com/freshinformer/freshinformer/reflector"
)

// Stamp is when a request was sent, as the trust state counts: the Guard
// carries it from a list's request to its admission (ListAdmission.Stamp).
type Stamp = trust.Stamp

// Owner is the informer a Guard reports to. It is called with no Guard
// lock held.
type Owner interface {
	// Resuming is told that the Reflector resumes its watch after a
	// request failed, with no list requested since; it reports whether
	// the Guard relists first (on the watch path, without the Reflector's
	// backoff) or may resume the stream (the Owner checked the server).
	Resuming(ctx context.Context) (relist bool)
	// Resumed is told that a watch resumed the stream after it ended
	// early, no request having failed since: the server that took it may
	// not be the one whose history the stream followed, and the Owner
	// checks it (the Failure submitted when the stream ended holds waits
	// meanwhile). It must not block.
	Resumed()
}

// Options configure a Guard.
type Options struct {
	// Trust is the informer's trust state (nil: one of the Guard's own).
	// The Guard submits to it a failed request or a stream ended well
	// before its timeout (trust.Failure: the server may be restarting, and
	// may come back from a restored etcd), and a list admitted below the
	// floor, which the informer will follow back (trust.Regression
	// Admitted: what it proved of the history that list rewrites is
	// void); it takes the floor and the stamps from it (trust.Trust.Floor,
	// Stamp), holding its own lock.
	Trust *trust.Trust
	// Owner is the informer the Guard reports to (nil: one that never
	// asks for a relist).
	Owner Owner
	// InitialFloor, if set, is a resource version the first list must
	// reach (fresh on start): for example one persisted by a predecessor.
	InitialFloor freshness.RV
	// ConsistentInitialList makes the first list a consistent read
	// (resourceVersion "") instead of client-go's "0".
	ConsistentInitialList bool
	// AcceptRegressionAfter bounds how long older lists are refused before
	// one is accepted as a declared regression. Zero means
	// reflector.DefaultAcceptRegressionAfter; a negative value accepts the
	// second older list at once.
	AcceptRegressionAfter time.Duration
	// Clock times the regression bound; the real clock if nil.
	Clock clock.PassiveClock
	// StreamClock times watch streams against their requests' timeouts.
	// The real clock if nil, whatever Clock is: a fake Clock a test steps
	// for the bound must not make every stream look ended early.
	StreamClock clock.PassiveClock
	// ListAfterFailure, if set, reports whether the Reflector's next
	// watch-list, after a failed request, should be a list instead: the
	// watch-list request fails at once, unsent, and the Reflector lists
	// (client-go falls back to a list on any watch-list error). Called
	// with no Guard lock held.
	ListAfterFailure func() bool
}

// Guard keeps one informer's list/watch stream from going back in time.
// Wrap the informer's ListerWatcher with ListerWatcher and make its queue
// with NewQueue; both share the Guard's floor and counters. A Guard is safe
// for concurrent use; its ListerWatcher and Queue are meant for one
// Reflector.
type Guard struct {
	opts   Options
	logger atomic.Pointer[klog.Logger]

	// mu guards the fields below. The trust state's Floor and Stamp are
	// called under it (its lock is taken after this one); nothing else is.
	mu             sync.Mutex
	delivered      freshness.RV // highest plausible RV the queue delivered
	plain          bool         // the last list's RV was not comparable
	admittedAny    bool
	refused        int                       // consecutive refusals
	streakStart    time.Time                 // first refusal of the current streak
	refusal        *reflector.StaleListError // the last list's, until reported or listed again
	pendingWatch   *openWatch                // a watch-list whose initial events are not queued yet
	fallback       bool                      // a watch-list was refused: the next list is client-go's fallback
	watchListed    bool                      // the Reflector lists by watch-list
	listConsistent bool                      // the last list request was a consistent read
	listAdmission  ListAdmission             // the last list request's stamp, when it was sent, after a failure
	forceRelist    bool                      // a relist is due: the next plain watch relists first
	// broken: a Failure was submitted since the last list request or
	// watch start; failed: for a failed request other than 410 Gone (the
	// server may be down, or back from a restored etcd).
	broken, failed bool
	relisting      bool // the relist that was due has begun; its list is not yet queued
	// resumeAt is the resource version of a relist on the watch path,
	// until the stream delivers something after it: the Reflector never
	// saw that list, so its own resource version is the old stream's.
	resumeAt     string
	currentWatch *openWatch      // the stream the Reflector reads, nil once stopped
	queued       []ListAdmission // lists queued, not yet taken (TakeList), in order
	queue        *Queue          // NewQueue's: where a relist on the watch path goes

	lists, watches, staleRefused, floorRaised atomic.Uint64
	malformed, implausible, watchesStopped    atomic.Uint64
}

// New returns a Guard.
func New(opts Options) *Guard {
	if opts.AcceptRegressionAfter == 0 {
		opts.AcceptRegressionAfter = reflector.DefaultAcceptRegressionAfter
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.StreamClock == nil {
		opts.StreamClock = clock.RealClock{}
	}
	if opts.Owner == nil {
		opts.Owner = nopOwner{}
	}
	if opts.Trust == nil {
		opts.Trust = new(trust.Trust)
	}
	g := &Guard{opts: opts, delivered: opts.InitialFloor}
	logger := klog.Background()
	g.logger.Store(&logger)
	return g
}

type nopOwner struct{}

func (nopOwner) Resuming(context.Context) bool { return false }
func (nopOwner) Resumed()                      {}

// SetLogger sets the logger the Guard reports through.
func (g *Guard) SetLogger(logger klog.Logger) { g.logger.Store(&logger) }

func (g *Guard) log() klog.Logger { return *g.logger.Load() }

// Stats returns the Guard's counters (Regressions is the informer's to count).
func (g *Guard) Stats() reflector.Stats {
	return reflector.Stats{
		Lists:              g.lists.Load(),
		Watches:            g.watches.Load(),
		StaleListsRefused:  g.staleRefused.Load(),
		FloorRaised:        g.floorRaised.Load(),
		MalformedSkipped:   g.malformed.Load(),
		ImplausibleSkipped: g.implausible.Load(),
		WatchesStopped:     g.watchesStopped.Load(),
	}
}

// Floor returns where requests must start and lists must reach: the
// highest resource version the queue delivered or the trust state proved;
// zero while the stream is not comparable or a restore waits for its
// relist.
func (g *Guard) Floor() freshness.RV {
	g.mu.Lock()
	defer g.mu.Unlock()
	floor, _ := g.floorLocked()
	return floor
}

func (g *Guard) floorLocked() (floor freshness.RV, restoring bool) {
	floor, restoring = g.opts.Trust.Floor(g.delivered)
	if g.plain {
		return freshness.RV{}, restoring
	}
	return floor, restoring
}

// ListAdmission is what the Guard decided about a list it queued.
type ListAdmission struct {
	// Stamp is the list request's.
	Stamp Stamp
	// Sent is when the list request was sent (real time, as the probe
	// scheduler's), and AfterFailure whether a request had failed, or a
	// stream ended early, before it: the server may be just back from an
	// outage (a restarted apiserver answers a resumed watch 410 Gone).
	Sent         time.Time
	AfterFailure bool
	// Regression, when set, says the list is older than the floor and
	// accepted (RegressionConsistentList, RegressionStaleList): the
	// informer declares it as it applies the list, after what was queued
	// ahead of it, and follows it back.
	Regression *reflector.Regression
}

// TakeList returns what the Guard decided about the next list in the
// queue, and forgets it. The informer calls it for each list it takes from
// the queue, in order.
func (g *Guard) TakeList() ListAdmission {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queued) == 0 {
		return ListAdmission{}
	}
	a := g.queued[0]
	g.queued = g.queued[1:]
	return a
}

// RequestRelist has the Reflector relist soon: the current watch is
// stopped, and the Reflector's next plain watch relists first unless a
// list or watch-list comes before it.
func (g *Guard) RequestRelist() {
	g.mu.Lock()
	g.forceRelist = true
	w := g.currentWatch
	g.currentWatch = nil
	g.mu.Unlock()
	if w != nil {
		w.stopByGuard()
	}
}

// RelistPending reports whether a relist is on its way: one requested
// whose list is not yet queued, or a watch-list whose initial events are
// still streaming (the Reflector's own relist after a 410, say), which
// moves the cache anyway.
func (g *Guard) RelistPending() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.forceRelist || g.relisting || g.pendingWatch != nil
}

// admitList decides whether a list at rv may replace the cache: it returns
// the undo of its admission (should the queue not take the list) to
// accept, a *StaleListError to refuse. consistent says the list was a
// consistent read; fallback that it is client-go's plain list right after
// a refused watch-list, the same attempt.
func (g *Guard) admitList(rv string, consistent, fallback bool) (undo func(), err error) {
	listRV, parseErr := freshness.ParseRV(rv)
	g.mu.Lock()
	floor, restoring := g.floorLocked()
	a := g.listAdmission
	if parseErr != nil {
		// Not comparable: nothing to guard; the informer works as a plain
		// one until a list is comparable again.
		wasPlain := g.plain
		g.plain = true
		undo = g.admitLocked(g.delivered, a)
		g.mu.Unlock()
		if !wasPlain {
			g.log().Error(parseErr, "List resource version cannot be ordered; guarding nothing until a list's can")
		}
		return undo, nil
	}
	g.plain = false
	if restoring || floor.IsZero() || listRV.AtLeast(floor) {
		undo = g.admitLocked(listRV, a)
		g.mu.Unlock()
		return undo, nil
	}

	now := g.opts.Clock.Now()
	if g.refused == 0 {
		g.streakStart = now
	}
	since := now.Sub(g.streakStart)
	var reason reflector.RegressionReason
	switch {
	case consistent:
		reason = reflector.RegressionConsistentList
	case g.refused > 0 && since >= g.opts.AcceptRegressionAfter:
		reason = reflector.RegressionStaleList
	}
	if reason != "" {
		r := reflector.Regression{Reason: reason, ListResourceVersion: rv, Floor: floor.String(), Refused: g.refused, Since: since}
		if g.refused == 0 {
			r.Since = 0
		}
		a.Regression = &r
		undo = g.admitLocked(listRV, a)
		g.mu.Unlock()
		due, _ := g.opts.Trust.Submit(trust.Regression{Step: trust.Admitted})
		due.Run()
		return undo, nil
	}
	if !fallback {
		g.refused++
		g.staleRefused.Add(1)
	}
	refusal := &reflector.StaleListError{ListResourceVersion: rv, Floor: floor.String(), Refused: g.refused}
	g.refusal = refusal
	g.mu.Unlock()
	g.log().V(2).Info("Refusing a list older than the cache", "listResourceVersion", rv, "floor", floor.String(), "refused", refusal.Refused)
	return nil, refusal
}

// admitLocked records a list admitted at rv, to be queued next, and
// returns the undo that forgets it should the queue not take it (the
// informer's transform failed): the Reflector lists again. g.mu is held;
// undo takes it.
func (g *Guard) admitLocked(rv freshness.RV, a ListAdmission) (undo func()) {
	prev := g.delivered
	g.resumeAt = ""
	g.refused = 0
	g.admittedAny = true
	g.delivered = rv
	g.lists.Add(1)
	g.queued = append(g.queued, a)
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.queued = g.queued[:len(g.queued)-1] // the Reflector queues one list at a time: this one is last
		if g.delivered.Compare(rv) == 0 {
			g.delivered = prev
		}
	}
}

// admitEvent decides whether a watch event or bookmark at rv may enter the
// queue, and raises the delivered floor when it does. While the stream is
// comparable, a malformed or implausible rv is counted and skipped: one bad
// value neither switches the guard off nor poisons the floor. An event with
// no resource version at all is not from an API server: it switches the
// guard to plain until the next comparable list.
func (g *Guard) admitEvent(rvs string, what string) bool {
	rv, err := freshness.ParseRV(rvs)
	g.mu.Lock()
	if g.plain || !g.admittedAny {
		g.mu.Unlock()
		return true
	}
	if rvs == "" && what == "event" {
		// No API server sends an object without a resource version
		// (client-go's fake clientsets do): the stream as a whole is not
		// comparable, so stand aside until the next comparable list
		// rather than drop its objects.
		g.plain = true
		g.mu.Unlock()
		return true
	}
	if err != nil {
		g.mu.Unlock()
		g.malformed.Add(1)
		if what == "bookmark" {
			g.log().Error(err, "Skipped a watch bookmark with a malformed resource version; the stream's resource versions are otherwise comparable")
			return false
		}
		// The object is the server's state: apply it (losing nothing);
		// its resource version just cannot count toward freshness.
		g.log().Error(err, "A watch event has a malformed resource version; applying it without counting it toward freshness")
		return true
	}
	if !reflector.Plausible(rv, g.delivered) {
		floor := g.delivered.String()
		g.mu.Unlock()
		g.implausible.Add(1)
		g.log().Error(nil, "Skipped a watch "+what+" with an implausible resource version, far ahead of the stream", "resourceVersion", truncate(rvs), "floor", floor)
		return false
	}
	if rv.Compare(g.delivered) > 0 {
		g.delivered = rv
	}
	g.resumeAt = "" // the Reflector's resource version is this stream's again
	g.mu.Unlock()
	return true
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// Reported is told of an error client-go's Reflector reports to its watch
// error handler, and returns it as the handler should see it. The
// Reflector flattens a list's error chain (%v): the Guard's refusal of
// that list, if it was the cause, is put back, so that errors.Is(err,
// reflector.ErrStaleList) holds. An error the server ended a stream with
// (a 503 from an apiserver shutting down, say; not 410 Gone) makes the
// next list a consistent read, as a failed request does.
func (g *Guard) Reported(err error) error {
	g.mu.Lock()
	refusal := g.refusal
	g.refusal = nil
	if err != nil && refusal == nil && !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		g.failed = true
	}
	g.mu.Unlock()
	if err == nil || refusal == nil || errors.Is(err, reflector.ErrStaleList) {
		return err
	}
	return &refusedError{msg: err.Error(), cause: refusal}
}

// ListIsCompressed reports whether a list of store's objects would take
// at least limit bytes in protobuf: the informer's ListAfterFailure, with
// the apiserver's compression threshold as limit. Objects without a
// protobuf size (unstructured, custom types) say no: the watch-list stays.
func ListIsCompressed(store toolscache.Store, limit int) bool {
	n := 0
	for _, obj := range store.List() {
		s, ok := obj.(interface{ Size() int })
		if !ok {
			return false
		}
		if n += s.Size(); n >= limit {
			return true
		}
	}
	return false
}

// WatchErrorHandler is the informer's Reflector's watch error handler:
// user's, or client-go's default except for refused stale lists, which
// the Guard logged already (at V(2)), and which client-go's default would
// report each at error level while a lagging replica catches up.
// errors.Is(err, reflector.ErrStaleList) holds in user's handler too
// (Reported).
func (g *Guard) WatchErrorHandler(user toolscache.WatchErrorHandlerWithContext) toolscache.WatchErrorHandlerWithContext {
	return func(ctx context.Context, r *toolscache.Reflector, err error) {
		err = g.Reported(err)
		switch {
		case user != nil:
			user(ctx, r, err)
		case !errors.Is(err, reflector.ErrStaleList):
			toolscache.DefaultWatchErrorHandler(ctx, r, err)
		}
	}
}

// refusedError keeps a flattened error's message and restores its cause.
type refusedError struct {
	msg   string
	cause *reflector.StaleListError
}

func (e *refusedError) Error() string { return e.msg }
func (e *refusedError) Unwrap() error { return e.cause }
