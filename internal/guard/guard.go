package guard

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/reflector"
)

// Options configure a Guard.
type Options struct {
	// InitialFloor, if set, is a resource version the first list must
	// reach (fresh on start): for example one persisted by a predecessor.
	// An older first list is refused, retried with NotOlderThan, and after
	// AcceptRegressionAfter accepted as a declared regression, like any
	// relist. It must be a comparable resource version.
	InitialFloor freshness.RV
	// ConsistentInitialList makes the first list a consistent read
	// (resourceVersion "") instead of client-go's "0" (any state the
	// watch cache holds, possibly older than what a predecessor saw).
	ConsistentInitialList bool
	// AcceptRegressionAfter bounds how long older lists are refused before
	// one is accepted as a declared regression. Zero means
	// DefaultAcceptRegressionAfter; a negative value accepts the second
	// older list at once.
	AcceptRegressionAfter time.Duration
	// OnRegression, if set, is called for every declared regression,
	// synchronously on the goroutine that detected it (the Reflector's, the
	// informer's processing goroutine, or a probe's): it must be quick and
	// must not block.
	OnRegression func(reflector.Regression)
	// OnWatchResumed, if set, is called when a watch starts after a
	// request failed (the server was unreachable or restarting, and may
	// have come back from a restored etcd, whose history a resumed watch
	// cannot show), on the Reflector's goroutine before it reads the
	// stream, with the request's context. FreshInformer answers it with
	// one consistent read and waits for it (bounded): a restore it
	// declares is relisted at once, on the watch path.
	OnWatchResumed func(context.Context)
	// OnRequestFailed, if set, is called each time a list or watch
	// request fails (other than with 410 Gone, which only asks for a
	// relist), and when the Reflector resumes a watch the server ended
	// well before its timeout (an apiserver restart ends its watches; the
	// Reflector's next request may find it back already): the server may
	// be down or restarting, and the one the informer reaches next may
	// have lost history it applied. Called on the Reflector's goroutine;
	// it must not block.
	OnRequestFailed func()
	// Clock times the regression bound (AcceptRegressionAfter); it
	// defaults to the real clock.
	Clock clock.PassiveClock
	// StreamClock times watch streams against the timeouts their requests
	// gave the server. It defaults to the real clock whatever Clock is: a
	// fake Clock a test steps for the bound must not make every stream
	// look as if it ended early.
	StreamClock clock.PassiveClock
	// Logger defaults to klog.Background().
	Logger *klog.Logger
}

// Guard keeps one informer's list/watch stream from going back in time. Use
// ListerWatcher to wrap the informer's ListerWatcher and NewQueue for its
// queue; both share the Guard's floor and counters.
//
// A Guard is safe for concurrent use. Its ListerWatcher and Queue are meant
// for one Reflector.
type Guard struct {
	opts   Options
	logger atomic.Pointer[klog.Logger]

	// mu guards the fields below. It is a leaf: OnRegression,
	// OnWatchResumed and OnRequestFailed are called with it released.
	mu             sync.Mutex
	delivered      freshness.RV // highest plausible RV delivered to the queue
	plain          bool         // the last list's RV was not comparable
	refused        int          // consecutive refusals
	streakStart    time.Time    // first refusal of the current streak
	lastRefusal    *reflector.StaleListError
	pendingWatch   *openWatch
	fallback       bool // a watch-list was refused: the next list is client-go's fallback
	listConsistent bool // the last list request was a consistent read
	admittedAny    bool // a list was admitted
	restoring      bool // a restore was declared: accept the next list whatever its RV
	forceRelist    bool // a relist is due: the next plain watch relists first
	relisting      bool // the relist that was due has begun; its list is not yet queued
	watchFailed    bool // a request failed since the last watch started (see Options.OnWatchResumed)
	// askedWhileRestoring: the last list (or watch-list) was asked for
	// while a declared restore waited for its relist, so it is that relist.
	askedWhileRestoring bool
	// resumeAt is the resource version of a relist on the watch path
	// (relist), until the stream delivers something after it or the
	// Reflector lists: the Reflector never saw that list, so its own
	// resource version is the old stream's, which after a declared
	// restore lies past writes of the restored server.
	resumeAt     string
	currentWatch *openWatch // the stream the Reflector reads, nil once it stopped it
	// lastWatch is the last stream handed to the Reflector, until a list
	// starts or the Guard stops it: a plain watch that follows it resumes
	// it, and if it ended early the server may have restarted.
	lastWatch *openWatch
	// queued holds what was decided about each list queued and not yet
	// taken by the informer (TakeList), in queue order; listsQueued counts
	// the lists queued since the start.
	queued      []ListAdmission
	listsQueued uint64
	queue       *Queue // NewQueue's: where a relist on the watch path goes

	lists, watches, staleRefused, regressions, floorRaised atomic.Uint64
	malformed, implausible, watchesStopped                 atomic.Uint64
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
	g := &Guard{opts: opts, delivered: opts.InitialFloor}
	logger := klog.Background()
	if opts.Logger != nil {
		logger = *opts.Logger
	}
	g.logger.Store(&logger)
	return g
}

// SetLogger sets the logger the Guard reports through (the informer's, with
// its name and resource), for example once the informer starts.
func (g *Guard) SetLogger(logger klog.Logger) { g.logger.Store(&logger) }

func (g *Guard) log() klog.Logger { return *g.logger.Load() }

// Stats returns the Guard's counters.
func (g *Guard) Stats() reflector.Stats {
	return reflector.Stats{
		Lists:              g.lists.Load(),
		Watches:            g.watches.Load(),
		StaleListsRefused:  g.staleRefused.Load(),
		Regressions:        g.regressions.Load(),
		FloorRaised:        g.floorRaised.Load(),
		MalformedSkipped:   g.malformed.Load(),
		ImplausibleSkipped: g.implausible.Load(),
		WatchesStopped:     g.watchesStopped.Load(),
	}
}

// Floor returns the Guard's floor: the highest resource version its Queue
// delivered, or that the informer proved its stream holds nothing below
// (Advance). It is the zero RV while the stream is not comparable or a
// declared restore waits for its relist.
func (g *Guard) Floor() freshness.RV {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.floorLocked()
}

func (g *Guard) floorLocked() freshness.RV {
	if g.plain || g.restoring {
		return freshness.RV{}
	}
	return g.delivered
}

// Advance raises the floor to rv: the informer proved that its stream holds
// no event up to rv (a quiet-resource probe's bookmark), so no request may
// start below it. regressions is Stats().Regressions when the proof began:
// a regression declared since voids the proof, and so does a plain stream
// or a restore waiting for its relist.
func (g *Guard) Advance(rv freshness.RV, regressions uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.plain || g.restoring || g.regressions.Load() != regressions {
		return
	}
	if rv.Compare(g.delivered) > 0 {
		g.delivered = rv
	}
}

// DeclareRegression declares r: it logs at error level, counts it in
// Stats.Regressions and calls Options.OnRegression. It is the one path by
// which a regression is made known; FreshInformer calls it for the
// regressions it detects itself.
func (g *Guard) DeclareRegression(r reflector.Regression) {
	g.regressions.Add(1)
	kv := []any{"reason", r.Reason, "listResourceVersion", r.ListResourceVersion, "floor", r.Floor}
	if r.Refused > 0 {
		kv = append(kv, "refused", r.Refused, "since", r.Since)
	}
	if r.Keys > 0 || r.WritesLost > 0 {
		kv = append(kv, "keys", r.Keys, "writesLost", r.WritesLost, "sampleKeys", r.SampleKeys)
	}
	g.log().Error(nil, "Declared regression: the cache follows the server back in time (etcd restored from a backup?)", kv...)
	if g.opts.OnRegression != nil {
		g.opts.OnRegression(r)
	}
}

// ListAdmission is what the Guard decided about a list it queued.
type ListAdmission struct {
	// Declared says the list was admitted under a regression already
	// declared: whoever applies it does not declare it again.
	Declared bool
	// Relist says the list is the relist a declared restore asked for
	// (BeginRestore). Whatever was queued before it is of the history the
	// server lost.
	Relist bool
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

// ListsQueued counts the lists queued since the start; a list the queue
// did not take (the informer's transform failed on it) is not counted.
// The informer's n-th list taken from the queue is the n-th counted.
func (g *Guard) ListsQueued() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.listsQueued
}

// BeginRestore declares r (see DeclareRegression) and has the stream start
// over (RelistForRestore).
func (g *Guard) BeginRestore(r reflector.Regression) {
	g.DeclareRegression(r)
	g.RelistForRestore()
}

// RelistForRestore has the stream start over after a declared restore: the
// floor is dropped until the next list asked for from now on (a consistent
// read, accepted whatever its resource version: the relist), and the
// current watch is stopped so that the Reflector relists at once. The
// informer calls it again when the relist could not be applied.
func (g *Guard) RelistForRestore() {
	g.mu.Lock()
	g.restoring, g.askedWhileRestoring = true, false
	g.delivered = freshness.RV{}
	g.mu.Unlock()
	g.RequestRelist()
}

// RequestRelist has the Reflector relist soon: the current watch is
// stopped, and the Reflector's next plain watch fails with 410 Gone unless
// a list or watch-list comes first (that is the relist).
func (g *Guard) RequestRelist() {
	g.mu.Lock()
	g.forceRelist = true
	w := g.currentWatch
	g.currentWatch, g.lastWatch = nil, nil
	g.mu.Unlock()
	if w != nil {
		w.Stop()
	}
}

// WatchFailing reports whether the last watch request failed and none has
// started since: the server may be down or restarting.
func (g *Guard) WatchFailing() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.watchFailed
}

// WatchOpen reports whether the Reflector has a watch stream open: one
// started and not yet stopped (the Reflector stops every stream it is done
// with, whether the server ended it or not). Between streams (a backoff, a
// relist) nothing tells the informer that the server it will reach next is
// the one it watched.
func (g *Guard) WatchOpen() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.currentWatch != nil
}

// openWatch is a watch stream handed to the Reflector; its Stop tells the
// Guard the stream is over. Events pass through untouched.
type openWatch struct {
	watch.Interface
	g        *Guard
	deadline time.Time // when the server ends it (the request's timeout); zero: unknown
}

// watchEndSlack is how long before its timeout a watch may end and still
// count as ended by the timeout.
const watchEndSlack = 5 * time.Second

// endedEarlyLocked reports whether the last stream the Reflector resumes
// now ended well before its timeout, and forgets it. g.mu is held.
func (g *Guard) endedEarlyLocked() bool {
	w := g.lastWatch
	g.lastWatch = nil
	return w != nil && !w.deadline.IsZero() && g.opts.StreamClock.Now().Add(watchEndSlack).Before(w.deadline)
}

func (w *openWatch) Stop() {
	w.g.mu.Lock()
	if w.g.currentWatch == w {
		w.g.currentWatch = nil
	}
	w.g.mu.Unlock()
	w.Interface.Stop()
}

// RelistPending reports whether a relist was requested and its list is
// not yet queued.
func (g *Guard) RelistPending() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.forceRelist || g.relisting
}

// admitList decides whether a list at rv may replace the cache: it returns
// the undo of its admission (see admitLocked) to accept, a
// *StaleListError to refuse. consistent says the list was a consistent
// read; fallback that it is client-go's plain list right after a refused
// watch-list, the same attempt.
func (g *Guard) admitList(rv string, consistent, fallback bool) (undo func(), err error) {
	listRV, parseErr := freshness.ParseRV(rv)
	g.mu.Lock()
	if g.restoring && !g.askedWhileRestoring {
		// Asked for before the restore was declared: of the lost history.
		// The informer drops it; the relist is still to come (the next
		// watch relists first).
		undo = g.queueLocked(ListAdmission{}, nil)
		g.mu.Unlock()
		return undo, nil
	}
	if parseErr != nil {
		// Not comparable: nothing to guard, the informer works as a plain
		// one until a list is comparable again.
		wasPlain := g.plain
		undo = g.admitLocked(g.delivered, ListAdmission{Relist: g.restoring}) // the floor waits for a comparable list
		g.plain = true
		g.mu.Unlock()
		if !wasPlain {
			g.log().Error(parseErr, "List resource version cannot be ordered; guarding nothing until a list's can")
		}
		return undo, nil
	}
	g.plain = false
	floor := g.floorLocked()
	if g.restoring || floor.IsZero() || listRV.AtLeast(floor) {
		undo = g.admitLocked(listRV, ListAdmission{Declared: g.restoring, Relist: g.restoring})
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
		undo = g.admitLocked(listRV, ListAdmission{Declared: true})
		g.mu.Unlock()
		g.DeclareRegression(r)
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

// admitLocked records an admitted list at rv, to be queued next: the floor
// is rv, and a declared restore has its relist. The undo it returns
// forgets the list if the queue does not take it (the informer's transform
// failed): the Reflector lists again, and a restore still waits for its
// relist. g.mu is held; undo takes it.
func (g *Guard) admitLocked(rv freshness.RV, a ListAdmission) (undo func()) {
	prev := g.delivered
	g.resumeAt = ""
	g.refused = 0
	g.restoring = false
	g.admittedAny = true
	g.delivered = rv
	g.lists.Add(1)
	return g.queueLocked(a, func() {
		switch {
		case a.Relist:
			g.restoring, g.delivered = true, freshness.RV{}
		case g.delivered.Compare(rv) == 0:
			g.delivered = prev
		}
	})
}

// queueLocked records a, for the list to be queued next, and returns the
// undo that forgets it and calls revert (if set) should the queue not take
// the list. g.mu is held; undo takes it.
func (g *Guard) queueLocked(a ListAdmission, revert func()) (undo func()) {
	g.queued = append(g.queued, a)
	g.listsQueued++
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.queued = g.queued[:len(g.queued)-1] // the Reflector queues one list at a time: this one is last
		g.listsQueued--
		if revert != nil {
			revert()
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

// startRV rewrites the resource version of a list (or watch-list) request:
// "" while a declared restore waits for its relist or for a consistent
// initial list; otherwise raised to the floor. It records whether the
// request is a consistent read.
func (g *Guard) startRV(options *metav1.ListOptions, watchList bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pendingWatch, g.lastWatch = nil, nil
	g.askedWhileRestoring = g.restoring
	g.relisting = g.relisting || g.forceRelist
	g.forceRelist = false // this is the relist
	if g.restoring || (g.opts.ConsistentInitialList && !g.admittedAny && options.ResourceVersion == "0") {
		options.ResourceVersion = ""
		if !watchList { // a watch-list keeps NotOlderThan: with "" it is a consistent read too
			options.ResourceVersionMatch = ""
		}
		g.listConsistent = true
		return
	}
	if options.ResourceVersion != "" {
		options.ResourceVersion = g.raise(options.ResourceVersion, g.floorLocked())
		if options.ResourceVersion != "0" && options.ResourceVersionMatch == "" {
			options.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
		}
	}
	g.listConsistent = options.ResourceVersion == ""
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
// over (the Reflector lists again after its backoff, or a probe asks
// again), and the server may be unreachable.
func (g *Guard) listFailed(ctx context.Context, err error) {
	g.mu.Lock()
	g.relisting = false
	g.mu.Unlock()
	g.requestFailed(ctx, err)
}

// requestFailed notes a list or watch request's failure (see
// Options.OnRequestFailed).
func (g *Guard) requestFailed(ctx context.Context, err error) {
	if ctx.Err() != nil || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) { // stopping; or a relist anyway
		return
	}
	g.serverMayHaveRestarted()
}

// serverMayHaveRestarted notes that the server may be down or restarting
// (see Options.OnRequestFailed).
func (g *Guard) serverMayHaveRestarted() {
	g.mu.Lock()
	g.watchFailed = true
	g.mu.Unlock()
	if g.opts.OnRequestFailed != nil {
		g.opts.OnRequestFailed()
	}
}

func (lw *guardedListerWatcher) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	g := lw.guard
	g.watches.Add(1)
	watchList := options.SendInitialEvents != nil && *options.SendInitialEvents
	if watchList {
		g.startRV(&options, true)
	} else {
		g.mu.Lock()
		force := g.forceRelist // relist's startRV makes it "relisting"
		endedEarly := g.endedEarlyLocked()
		if g.resumeAt != "" {
			options.ResourceVersion = g.resumeAt
		}
		if !force {
			options.ResourceVersion = g.raise(options.ResourceVersion, g.floorLocked())
		}
		g.mu.Unlock()
		if endedEarly && !force {
			g.serverMayHaveRestarted()
		}
		if force {
			// The Reflector would resume from where the old history was:
			// relist first, here, without the backoff client-go's Reflector
			// waits out before a relist of its own.
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
	resumed := g.watchFailed && !watchList // a watch-list's list is checked as any list
	g.watchFailed = false
	g.mu.Unlock()
	if resumed && g.opts.OnWatchResumed != nil {
		// Before the Reflector reads the stream: a restore the check
		// declares is relisted below, not after a backoff.
		g.opts.OnWatchResumed(ctx)
	}
	g.mu.Lock()
	for g.forceRelist && !watchList {
		// A relist was asked for while the request was on its way (a slow
		// connect, a relist above, or the check above declared a
		// restore): this watch would resume the old history.
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
	ow := &openWatch{Interface: w, g: g}
	if options.TimeoutSeconds != nil {
		ow.deadline = g.opts.StreamClock.Now().Add(time.Duration(*options.TimeoutSeconds) * time.Second)
	}
	g.currentWatch, g.lastWatch = ow, ow
	if watchList {
		g.pendingWatch = ow
	}
	g.mu.Unlock()
	return ow, nil
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
		return errRelist()
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

// errRelist makes the Reflector relist: its watch request "expired".
func errRelist() error {
	return apierrors.NewResourceExpired("freshinformer: relisting (after a declared regression, or for a freshness probe)")
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
			w.Stop()
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
