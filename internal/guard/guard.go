// Package guard is the layer between client-go's Reflector and the
// informer's queue that keeps the stream from going back in time (package
// reflector describes it for users). It keeps the stream's own facts (what
// it delivered, which lists it refused, which watch is open) and asks its
// Owner, the informer's trust state, for the rest: the floor proofs
// raised, whether a declared restore waits for its relist, and what a
// request is stamped with.
package guard

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/reflector"
)

// Stamp is when a request was sent, as the Owner counts: the regressions
// found and the failures seen by then. The Guard carries it from a list's
// request to its admission (ListAdmission.Stamp).
type Stamp struct{ Epoch, Failures uint64 }

// Owner is the informer a Guard reports to. Its methods are called with no
// Guard lock held, except Floor and Stamp, which must not call the Guard.
type Owner interface {
	// Floor returns the newest position the informer proved off the
	// stream (the Guard's floor is at least it), and whether a declared
	// restore waits for its relist: then there is no floor, and the next
	// list is a consistent read accepted whatever its resource version.
	Floor() (proven freshness.RV, restoring bool)
	// Stamp returns the stamp of a request sent now.
	Stamp() Stamp
	// Regressed declares a regression the Guard found admitting a list
	// (RegressionConsistentList, RegressionStaleList).
	Regressed(reflector.Regression)
	// Broken is told that a request failed, or a stream ended well before
	// its timeout: the server may be restarting, and may come back from a
	// restored etcd. It must not block.
	Broken()
	// Resuming is told that the Reflector resumes its watch after Broken,
	// with no list requested since; it reports whether the Guard relists
	// first (on the watch path, without the Reflector's backoff) or may
	// resume the stream (the Owner checked the server).
	Resuming(ctx context.Context) (relist bool)
}

// Options configure a Guard.
type Options struct {
	// Owner is the informer the Guard reports to (nil: one that proves
	// nothing and is told nothing).
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
}

// Guard keeps one informer's list/watch stream from going back in time.
// Wrap the informer's ListerWatcher with ListerWatcher and make its queue
// with NewQueue; both share the Guard's floor and counters. A Guard is safe
// for concurrent use; its ListerWatcher and Queue are meant for one
// Reflector.
type Guard struct {
	opts   Options
	logger atomic.Pointer[klog.Logger]

	// mu guards the fields below. Owner.Floor and Owner.Stamp are called
	// under it (they take the Owner's lock after it); nothing else is.
	mu             sync.Mutex
	delivered      freshness.RV // highest plausible RV the queue delivered
	plain          bool         // the last list's RV was not comparable
	admittedAny    bool
	refused        int       // consecutive refusals
	streakStart    time.Time // first refusal of the current streak
	lastRefusal    *reflector.StaleListError
	pendingWatch   *openWatch // a watch-list whose initial events are not queued yet
	fallback       bool       // a watch-list was refused: the next list is client-go's fallback
	listConsistent bool       // the last list request was a consistent read
	listStamp      Stamp      // the last list request's stamp
	forceRelist    bool       // a relist is due: the next plain watch relists first
	// broken: Owner.Broken was called since the last list request or
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
	g := &Guard{opts: opts, delivered: opts.InitialFloor}
	logger := klog.Background()
	g.logger.Store(&logger)
	return g
}

type nopOwner struct{}

func (nopOwner) Floor() (freshness.RV, bool)    { return freshness.RV{}, false }
func (nopOwner) Stamp() Stamp                   { return Stamp{} }
func (nopOwner) Regressed(reflector.Regression) {}
func (nopOwner) Broken()                        {}
func (nopOwner) Resuming(context.Context) bool  { return false }

// SetLogger sets the logger the Guard reports through.
func (g *Guard) SetLogger(logger klog.Logger) { g.logger.Store(&logger) }

func (g *Guard) log() klog.Logger { return *g.logger.Load() }

// Stats returns the Guard's counters (Regressions is the Owner's to count).
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
// highest resource version the queue delivered or the Owner proved; zero
// while the stream is not comparable or a restore waits for its relist.
func (g *Guard) Floor() freshness.RV {
	g.mu.Lock()
	defer g.mu.Unlock()
	floor, _ := g.floorLocked()
	return floor
}

func (g *Guard) floorLocked() (floor freshness.RV, restoring bool) {
	proven, restoring := g.opts.Owner.Floor()
	if g.plain || restoring {
		return freshness.RV{}, restoring
	}
	if proven.Compare(g.delivered) > 0 {
		return proven, false
	}
	return g.delivered, false
}

// ListAdmission is what the Guard decided about a list it queued.
type ListAdmission struct {
	// Stamp is the list request's.
	Stamp Stamp
	// Regressed says the list is older than the floor and the Guard
	// declared that (Owner.Regressed): the informer follows it back
	// without declaring it again.
	Regressed bool
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

// RelistPending reports whether a relist was requested and its list is
// not yet queued.
func (g *Guard) RelistPending() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.forceRelist || g.relisting
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
	a := ListAdmission{Stamp: g.listStamp}
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
		a.Regressed = true
		undo = g.admitLocked(listRV, a)
		g.mu.Unlock()
		g.opts.Owner.Regressed(r)
		return undo, nil
	}
	if !fallback {
		g.refused++
		g.staleRefused.Add(1)
	}
	refusal := &reflector.StaleListError{ListResourceVersion: rv, Floor: floor.String(), Refused: g.refused}
	g.lastRefusal = refusal
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

// raise returns rv, or the floor when rv is an older comparable resource
// version or "0" (any state) while there is a floor. "" (a consistent read)
// is left alone: the Reflector falls back to it after 410 Gone or "Too
// large resource version", and it is at least as new as anything.
func (g *Guard) raise(rv string, floor freshness.RV) string {
	if rv == "" || floor.IsZero() {
		return rv
	}
	if rv == "0" {
		g.floorRaised.Add(1)
		return floor.String()
	}
	parsed, err := freshness.ParseRV(rv)
	if err != nil {
		return rv
	}
	if !parsed.AtLeast(floor) {
		g.floorRaised.Add(1)
		return floor.String()
	}
	return rv
}

// startRV rewrites the resource version of a list (or watch-list) request:
// "" (a consistent read) while a declared restore waits for its relist,
// after a request failed or to resume a broken stream (a server back from
// a restored etcd may be behind the floor: a consistent list tells at
// once, where one raised to the floor would wait for writes that may
// never come), or for a consistent initial list; otherwise raised to the
// floor. It records the
// request's stamp and whether it is a consistent read.
func (g *Guard) startRV(options *metav1.ListOptions, watchList bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pendingWatch = nil
	g.relisting = g.relisting || g.forceRelist
	g.forceRelist = false // this is the relist
	failed := g.failed
	g.broken, g.failed = false, false
	g.listStamp = g.opts.Owner.Stamp()
	floor, restoring := g.floorLocked()
	if restoring || (failed && g.admittedAny) || (g.opts.ConsistentInitialList && !g.admittedAny && options.ResourceVersion == "0") {
		options.ResourceVersion = ""
		if !watchList { // a watch-list keeps NotOlderThan: with "" it is a consistent read too
			options.ResourceVersionMatch = ""
		}
		g.listConsistent = true
		return
	}
	if options.ResourceVersion != "" {
		options.ResourceVersion = g.raise(options.ResourceVersion, floor)
		if options.ResourceVersion != "0" && options.ResourceVersionMatch == "" {
			options.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
		}
	}
	g.listConsistent = options.ResourceVersion == ""
}

// WatchError is told of an error client-go's Reflector reports (to its
// watch error handler): one the server ended a stream with (a 503 from an
// apiserver shutting down, say) makes the next list a consistent read, as
// a failed request does.
func (g *Guard) WatchError(err error) {
	if err == nil || errors.Is(err, reflector.ErrStaleList) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return
	}
	g.mu.Lock()
	g.failed = true
	g.mu.Unlock()
}

// requestFailed tells the Owner a request failed with err, or a stream
// ended early (err nil), unless the informer is stopping.
func (g *Guard) requestFailed(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	g.mu.Lock()
	g.broken = true
	g.failed = g.failed || (err != nil && !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err))
	g.mu.Unlock()
	g.opts.Owner.Broken()
}

// ListerWatcher wraps lw so that list and watch requests never start below
// the floor and lists ask for NotOlderThan semantics.
func (g *Guard) ListerWatcher(lw toolscache.ListerWatcher) toolscache.ListerWatcher {
	return &guardedListerWatcher{inner: toolscache.ToListerWatcherWithContext(lw), outer: lw, guard: g}
}

type guardedListerWatcher struct {
	inner toolscache.ListerWatcherWithContext
	outer toolscache.ListerWatcher // for the optional interfaces it implements
	guard *Guard
}

var _ toolscache.ListerWatcherWithContext = &guardedListerWatcher{}

func (lw *guardedListerWatcher) List(options metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), options)
}

func (lw *guardedListerWatcher) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), options)
}

func (lw *guardedListerWatcher) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	// Only the first page names a resource version; later pages continue it.
	if options.Continue == "" {
		lw.guard.startRV(&options, false)
	}
	obj, err := lw.inner.ListWithContext(ctx, options)
	if err != nil {
		lw.guard.listFailed(ctx, err)
	}
	return obj, err
}

// listFailed notes a list request's failure: a relist that was due is
// over (the Reflector lists again after its backoff).
func (g *Guard) listFailed(ctx context.Context, err error) {
	g.mu.Lock()
	g.relisting = false
	g.mu.Unlock()
	g.requestFailed(ctx, err)
}

func (lw *guardedListerWatcher) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	g := lw.guard
	g.watches.Add(1)
	watchList := options.SendInitialEvents != nil && *options.SendInitialEvents
	if watchList {
		g.startRV(&options, true)
	} else {
		g.mu.Lock()
		broken := g.broken
		g.mu.Unlock()
		relist := broken && g.opts.Owner.Resuming(ctx)
		g.mu.Lock()
		// The stream broke (a server shutting down ends its streams): a
		// consistent read tells at once whether the one reached now lost
		// history, where one raised to the floor would wait for it.
		g.failed = g.failed || relist
		relist = relist || g.forceRelist
		if g.resumeAt != "" {
			options.ResourceVersion = g.resumeAt
		}
		floor, _ := g.floorLocked()
		options.ResourceVersion = g.raise(options.ResourceVersion, floor)
		g.mu.Unlock()
		if relist {
			// The Reflector would resume the old stream: relist first,
			// here, without the backoff of client-go's own relist.
			if err := lw.relist(ctx, &options); err != nil {
				return nil, err
			}
		}
	}
	w, err := lw.inner.WatchWithContext(ctx, options)
	if err != nil {
		g.requestFailed(ctx, err)
		return nil, err
	}
	g.mu.Lock()
	for g.forceRelist && !watchList {
		// A relist was asked for while the request was on its way: this
		// watch would resume the old stream.
		g.mu.Unlock()
		w.Stop()
		if err := lw.relist(ctx, &options); err != nil {
			return nil, err
		}
		if w, err = lw.inner.WatchWithContext(ctx, options); err != nil {
			g.requestFailed(ctx, err)
			return nil, err
		}
		g.mu.Lock()
	}
	ow := &openWatch{Interface: w, g: g, ctx: ctx}
	if options.TimeoutSeconds != nil {
		ow.deadline = g.opts.StreamClock.Now().Add(time.Duration(*options.TimeoutSeconds) * time.Second)
	}
	g.currentWatch = ow
	g.broken, g.failed = false, false
	if watchList {
		g.pendingWatch = ow
	}
	g.mu.Unlock()
	return ow, nil
}

// openWatch is a watch stream handed to the Reflector. Its Stop tells the
// Guard the stream is over, and the Owner if it ended well before its
// timeout: an apiserver that shuts down ends its streams.
type openWatch struct {
	watch.Interface
	g        *Guard
	ctx      context.Context // the request's: done once the informer stops
	deadline time.Time       // when the server ends it (the request's timeout); zero: unknown
	byGuard  atomic.Bool     // stopped by the Guard (a relist), not by its end
}

// watchEndSlack is how long before its timeout a watch may end and still
// count as ended by the timeout.
const watchEndSlack = 5 * time.Second

func (w *openWatch) Stop() {
	w.g.mu.Lock()
	if w.g.currentWatch == w {
		w.g.currentWatch = nil
	}
	w.g.mu.Unlock()
	w.Interface.Stop()
	early := w.deadline.IsZero() || w.g.opts.StreamClock.Now().Add(watchEndSlack).Before(w.deadline)
	if early && !w.byGuard.Load() {
		w.g.requestFailed(w.ctx, nil)
	}
}

func (w *openWatch) stopByGuard() {
	w.byGuard.Store(true)
	w.Stop()
}

// relist lists through the inner ListerWatcher, as the Reflector would
// after 410 Gone (a consistent read while a declared restore waits for its
// relist, else NotOlderThan the floor; in pages, through client-go's
// pager), and queues the list through the Guard's Queue, whose checks it
// passes like any list. The watch that follows starts at the list's
// resource version: options is set to it. When it fails, the error it
// returns (410 Gone) has the Reflector relist after its backoff instead.
func (lw *guardedListerWatcher) relist(ctx context.Context, options *metav1.ListOptions) error {
	rv, err := lw.listIntoQueue(ctx, options.ResourceVersion)
	if err != nil {
		lw.guard.log().V(2).Info("Relisting on the watch path failed; the Reflector relists", "err", err)
		return apierrors.NewResourceExpired("freshinformer: relisting (after a broken stream, a declared regression, or for a freshness probe)")
	}
	options.ResourceVersion = rv
	lw.guard.mu.Lock()
	lw.guard.resumeAt = rv
	lw.guard.mu.Unlock()
	return nil
}

func (lw *guardedListerWatcher) listIntoQueue(ctx context.Context, from string) (string, error) {
	g := lw.guard
	g.mu.Lock()
	q := g.queue
	g.mu.Unlock()
	if q == nil {
		return "", errors.New("no queue")
	}
	options := metav1.ListOptions{ResourceVersion: from}
	g.startRV(&options, false)
	p := pager.New(pager.SimplePageFunc(func(o metav1.ListOptions) (runtime.Object, error) {
		return lw.inner.ListWithContext(ctx, o)
	}))
	list, _, err := p.ListWithAlloc(ctx, options)
	if err != nil {
		g.listFailed(ctx, err)
		return "", err
	}
	listMeta, err := meta.ListAccessor(list)
	if err != nil {
		return "", err
	}
	items, err := meta.ExtractListWithAlloc(list)
	if err != nil {
		return "", err
	}
	objs := make([]interface{}, len(items))
	for i, item := range items {
		objs[i] = item
	}
	rv := listMeta.GetResourceVersion()
	if err := q.Replace(objs, rv); err != nil {
		return "", err
	}
	return rv, nil
}

// IsWatchListSemanticsUnSupported forwards what the wrapped ListerWatcher
// says (client-go's informer factories mark clients that cannot stream
// lists); a ListerWatcher that says nothing supports them.
func (lw *guardedListerWatcher) IsWatchListSemanticsUnSupported() bool {
	u, ok := lw.outer.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && u.IsWatchListSemanticsUnSupported()
}

// Queue is client-go's RealFIFO with the Guard's checks on Replace (the one
// call through which a list, plain or watch-list, reaches the cache) and on
// watch events and bookmarks (their resource versions raise the floor).
type Queue struct {
	*toolscache.RealFIFO
	guard *Guard
}

// NewQueue returns a Queue over a RealFIFO made with opts, forcing atomic
// events and bookmark deltas on: the informer then sees every list as one
// ReplacedAll and every bookmark in stream order, whatever client-go's
// AtomicFIFO feature gate says.
func (g *Guard) NewQueue(opts toolscache.RealFIFOOptions) *Queue {
	opts.AtomicEvents = true
	opts.EmitDeltaTypeBookmark = true
	opts.KnownObjects = nil // atomic events keep no known-objects view
	q := &Queue{RealFIFO: toolscache.NewRealFIFOWithOptions(opts), guard: g}
	g.mu.Lock()
	g.queue = q
	g.mu.Unlock()
	return q
}

// Replace refuses a list older than the floor (the Reflector backs off and
// relists) and otherwise queues it. When it refuses a watch-list's initial
// events it stops that watch: client-go's Reflector falls back to a plain
// list without stopping it.
func (q *Queue) Replace(list []interface{}, resourceVersion string) error {
	g := q.guard
	g.mu.Lock()
	g.relisting = false
	w := g.pendingWatch
	g.pendingWatch = nil
	consistent := g.listConsistent
	fallback := g.fallback && w == nil
	g.fallback = false
	g.mu.Unlock()
	undo, err := g.admitList(resourceVersion, consistent, fallback)
	if err != nil {
		if w != nil {
			w.stopByGuard()
			g.watchesStopped.Add(1)
			g.mu.Lock()
			g.fallback = true
			g.mu.Unlock()
		}
		return err
	}
	queued := false
	defer func() {
		if !queued { // an error, or a panicking transform client-go recovers from
			undo()
		}
	}()
	if err := q.RealFIFO.Replace(list, resourceVersion); err != nil {
		return err
	}
	queued = true
	return nil
}

// Add queues a watch event's object unless its resource version is
// malformed or implausible (see Plausible) in a comparable stream.
func (q *Queue) Add(obj interface{}) error {
	if !q.guard.admitEvent(resourceVersionOf(obj), "event") {
		return nil
	}
	return q.RealFIFO.Add(obj)
}

// Update is Add for a modified object.
func (q *Queue) Update(obj interface{}) error {
	if !q.guard.admitEvent(resourceVersionOf(obj), "event") {
		return nil
	}
	return q.RealFIFO.Update(obj)
}

// Delete is Add for a deleted object.
func (q *Queue) Delete(obj interface{}) error {
	if !q.guard.admitEvent(resourceVersionOf(obj), "event") {
		return nil
	}
	return q.RealFIFO.Delete(obj)
}

// Bookmark queues a bookmark unless its resource version is malformed or
// implausible in a comparable stream.
func (q *Queue) Bookmark(resourceVersion string) error {
	if !q.guard.admitEvent(resourceVersion, "bookmark") {
		return nil
	}
	return q.RealFIFO.Bookmark(resourceVersion)
}

func resourceVersionOf(obj interface{}) string {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if m, err := meta.Accessor(obj); err == nil {
		return m.GetResourceVersion()
	}
	return ""
}

// ClassifyError returns err so that errors.Is(err, ErrStaleList) and
// errors.As(err, **StaleListError) hold when err reports a list this Guard
// refused, even if the chain was flattened on the way (client-go's
// Reflector wraps list errors with %v). Other errors are returned as is.
func (g *Guard) ClassifyError(err error) error {
	if err == nil || errors.Is(err, reflector.ErrStaleList) {
		return err
	}
	g.mu.Lock()
	last := g.lastRefusal
	g.mu.Unlock()
	msg := err.Error()
	if last == nil || !strings.Contains(msg, last.Error()) {
		return err
	}
	return &refusedError{msg: msg, cause: last}
}

// refusedError keeps a flattened error's message and restores its cause.
type refusedError struct {
	msg   string
	cause *reflector.StaleListError
}

func (e *refusedError) Error() string { return e.msg }
func (e *refusedError) Unwrap() error { return e.cause }
