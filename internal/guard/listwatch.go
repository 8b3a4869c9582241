package guard

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/trust"
)

// The requests: what the Reflector asks for, rewritten to start at the
// floor; relists on the watch path; streams that break.

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
	g.pendingWatch, g.refusal = nil, nil
	g.watchListed = g.watchListed || watchList
	g.relisting = g.relisting || g.forceRelist
	g.forceRelist = false // this is the relist
	failed := g.failed
	g.listAdmission = ListAdmission{Stamp: g.opts.Trust.Stamp(), Sent: time.Now(), AfterFailure: failed || g.broken}
	g.broken, g.failed = false, false
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

// errRelistByWatchList fails a watch request that resumes a stream after
// a failed request, unsent, when the informer's Reflector lists by
// watch-list: client-go relists after a 410 Gone.
func errRelistByWatchList() error {
	return apierrors.NewResourceExpired("freshinformer: relisting after a failed request")
}

// errListInstead fails a watch-list request the Guard did not send: the
// Reflector lists instead (see Options.ListAfterFailure).
var errListInstead = errors.New("freshinformer: a list instead of a watch-list after a failed request")

// listInstead reports whether a watch-list requested now should be a list
// (Options.ListAfterFailure): a request failed since the last list, and
// the informer has listed before.
func (g *Guard) listInstead() bool {
	g.mu.Lock()
	after := g.failed && g.admittedAny
	g.mu.Unlock()
	return after && g.opts.ListAfterFailure != nil && g.opts.ListAfterFailure()
}

// requestFailed tells the trust state a request failed with err, or a
// stream ended early (err nil: with what it delivered, unless a request
// failed since the last list), unless the informer is stopping.
func (g *Guard) requestFailed(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	var f trust.Failure
	g.mu.Lock()
	g.broken = true
	g.failed = g.failed || (err != nil && !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err))
	if err == nil && !g.failed && !g.plain {
		f.Delivered = g.delivered
	}
	g.mu.Unlock()
	due, _ := g.opts.Trust.Submit(f)
	due.Run()
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
	watchList := options.SendInitialEvents != nil && *options.SendInitialEvents
	if watchList && g.listInstead() {
		return nil, errListInstead
	}
	g.watches.Add(1)
	resumed := false
	if watchList {
		g.startRV(&options, true)
	} else if r, err := lw.resume(ctx, &options); err != nil {
		return nil, err
	} else {
		resumed = r
	}
	w, err := lw.inner.WatchWithContext(ctx, options)
	if err != nil {
		g.requestFailed(ctx, err)
		return nil, err
	}
	g.mu.Lock()
	for g.forceRelist && !watchList {
		resumed = false
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
	ow := g.openedLocked(ctx, w, options, watchList)
	g.mu.Unlock()
	if resumed {
		g.opts.Owner.Resumed()
	}
	return ow, nil
}

// resume rewrites a plain watch request that resumes the Reflector's
// stream: from where a relist on the watch path left it, raised to the
// floor. After a failed request, when the Owner says so (Resuming), or
// when a relist was asked for, it relists first, here, without the
// backoff of client-go's own relist (the Reflector would resume the old
// stream). After a stream that only ended early (no request failed since:
// an apiserver shutting down ends its streams, and behind a load balancer
// another one takes the resumed watch) it reports resumed: the Owner
// checks the server once the watch is taken (Resumed).
func (lw *guardedListerWatcher) resume(ctx context.Context, options *metav1.ListOptions) (resumed bool, err error) {
	g := lw.guard
	g.mu.Lock()
	broken, failed := g.broken, g.failed
	g.mu.Unlock()
	relist := failed && g.opts.Owner.Resuming(ctx)
	g.mu.Lock()
	if relist && g.watchListed && !g.forceRelist {
		// The Reflector relists itself, by watch-list as client-go does
		// after a 410 (startRV makes it a consistent read): one request,
		// where a relist here is a list and a watch.
		g.mu.Unlock()
		return false, errRelistByWatchList()
	}
	relist = relist || g.forceRelist
	resumed = broken && !failed && !relist
	if g.resumeAt != "" {
		options.ResourceVersion = g.resumeAt
	}
	floor, _ := g.floorLocked()
	options.ResourceVersion = g.raise(options.ResourceVersion, floor)
	g.mu.Unlock()
	if relist {
		return false, lw.relist(ctx, options)
	}
	return resumed, nil
}

// openedLocked records w, opened with options, as the stream the
// Reflector reads: timed against the request's timeout, and, for a
// watch-list, the one whose initial events the next Replace brings. A
// stream that opened ends the breakage before it. g.mu is held.
func (g *Guard) openedLocked(ctx context.Context, w watch.Interface, options metav1.ListOptions, watchList bool) *openWatch {
	ow := &openWatch{Interface: w, g: g, ctx: ctx}
	if options.TimeoutSeconds != nil {
		ow.deadline = g.opts.StreamClock.Now().Add(time.Duration(*options.TimeoutSeconds) * time.Second)
	}
	g.currentWatch = ow
	g.broken, g.failed = false, false
	if watchList {
		g.pendingWatch = ow
	}
	return ow
}

// openWatch is a watch stream handed to the Reflector. Its Stop tells the
// Guard the stream is over, and the trust state if it ended well before its
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
