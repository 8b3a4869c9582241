package cache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgofeatures "k8s.io/client-go/features"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/guard"
	"github.com/freshinformer/freshinformer/reflector"
)

// FreshInformer is a client-go SharedIndexInformer that knows how fresh its
// cache is. It tracks the highest resource version its indexer has applied
// (from watch events, bookmarks and lists, in stream order, and only once the
// change is in the indexer) and lets callers wait for a resource version with
// WaitForFreshness. It never moves the cache back in time: an event older
// than the cached object is rejected, and a relist older than what was
// observed is refused (see package reflector).
//
// It satisfies toolscache.SharedIndexInformer: listers, WaitForCacheSync,
// event handlers, transforms and indexers work as with client-go's.
type FreshInformer struct {
	lw          toolscache.ListerWatcher
	objectType  runtime.Object
	description string
	name        string
	resource    schema.GroupResource
	selector    Selector
	clock       clock.Clock
	indexer     toolscache.Indexer
	tracker     freshness.Tracker
	guard       *guard.Guard
	processor   *processor
	metrics     InformerMetrics // nil without WithMetrics
	quietDelay  time.Duration   // WithQuietProbeDelay
	quiet       quietProbe      // bounded freshness on quiet resources (quiet.go)

	newestMu    sync.Mutex
	newestWrite freshness.RV    // the newest RecordWrite
	visible     writeVisibility // write-to-visible samples, with metrics (metrics.go)

	// blockDeltas serializes applying deltas with handler and indexer
	// registration, so a late handler sees a consistent initial list.
	blockDeltas  sync.Mutex
	logger       klog.Logger  // set at start; read under blockDeltas
	applied      freshness.RV // the highest RV applied; under blockDeltas
	restoring    bool         // a restore was declared: freshness waits for the relist; under blockDeltas
	recent       recentRVs    // RVs of recently applied events; under blockDeltas
	incomparable atomic.Bool  // the last list's RV cannot be ordered
	// startOnEvent: the last list was at "0" (a fake source with nothing
	// in it; API servers never list at "0"), so freshness starts at the
	// first comparable event or bookmark after it. Under blockDeltas.
	startOnEvent bool
	probes       prober                 // restore verification (restore.go)
	declare      []reflector.Regression // found while applying; declared once blockDeltas is released
	// resumeAfterDeclare: a list that brought a regression moved the
	// tracker under Suspend; declareFound resumes it once the regression is
	// declared, so no waiter the list reaches is released before.
	resumeAfterDeclare bool
	// declareBarrier holds the handlers' notifications from that list
	// back until the regression is declared.
	declareBarrier chan struct{}
	written        writtenKeys // recorded writes not yet applied (lostwrites.go)

	mu                   sync.Mutex // guards the fields below
	started, stopped     bool
	controller           toolscache.Controller
	transform            toolscache.TransformFunc
	watchErrorHandler    toolscache.WatchErrorHandlerWithContext
	resyncCheckPeriod    time.Duration
	defaultHandlerResync time.Duration
	synced               chan struct{} // closed once the initial list is applied

	outOfOrder, incomparableObjects, bookmarks atomic.Uint64
	initialFloorErr                            error // a malformed Options.InitialFloor, logged at start
}

var _ toolscache.SharedIndexInformer = &FreshInformer{}

// NewSharedIndexInformer returns a FreshInformer over lw, like client-go's
// function of the same name. exampleObject is an object of the listed type;
// resync is the default handler resync period (0: none).
func NewSharedIndexInformer(lw toolscache.ListerWatcher, exampleObject runtime.Object, resync time.Duration, indexers toolscache.Indexers, opts ...Option) *FreshInformer {
	o := Options{ResyncPeriod: resync, Indexers: indexers}
	for _, opt := range opts {
		opt(&o)
	}
	return NewSharedIndexInformerWithOptions(lw, exampleObject, o)
}

// NewSharedIndexInformerWithOptions returns a FreshInformer over lw
// configured by options.
func NewSharedIndexInformerWithOptions(lw toolscache.ListerWatcher, exampleObject runtime.Object, options Options) *FreshInformer {
	if options.Clock == nil {
		options.Clock = clock.RealClock{}
	}
	if options.ObjectDescription == "" {
		options.ObjectDescription = fmt.Sprintf("%T", exampleObject)
	}
	if options.Resource.Empty() {
		options.Resource = exampleResource(exampleObject, options) // resources.go
	}
	f := &FreshInformer{
		lw:                   lw,
		resource:             options.Resource,
		selector:             options.Selector,
		objectType:           exampleObject,
		description:          options.ObjectDescription,
		name:                 options.Name,
		clock:                options.Clock,
		indexer:              toolscache.NewIndexer(toolscache.DeletionHandlingMetaNamespaceKeyFunc, options.Indexers),
		processor:            &processor{clock: options.Clock},
		resyncCheckPeriod:    options.ResyncPeriod,
		defaultHandlerResync: options.ResyncPeriod,
		synced:               make(chan struct{}),
		logger:               klog.Background(),
		quietDelay:           options.QuietProbeDelay,
	}
	f.probes.tracker = &f.tracker
	initialFloor, floorErr := parseInitialFloor(options.InitialFloor)
	f.initialFloorErr = floorErr
	f.guard = guard.New(guard.Options{
		Floor:                 f.appliedFloor,
		InitialFloor:          initialFloor,
		ConsistentInitialList: options.ConsistentInitialList,
		AcceptRegressionAfter: options.AcceptRegressionAfter,
		OnRegression:          options.OnRegression,
		OnWatchResumed:        f.verifyAfterOutage,
		Clock:                 options.Clock,
	})
	if options.Metrics != nil {
		f.metrics = options.Metrics.InformerMetrics(f)
	}
	return f
}

// Name returns the informer's name (WithName), "" if unnamed.
func (f *FreshInformer) Name() string { return f.name }

// Resource returns the listed resource (WithResource, or guessed).
func (f *FreshInformer) Resource() schema.GroupResource { return f.resource }

// WaitForFreshness blocks until the cache has applied rv (every event up to
// rv that the informer's selector admits is in the indexer), ctx ends, or
// the informer stops. It returns nil at once, without allocating, when the
// cache is already that fresh. Errors: one matching freshness.ErrIncomparable
// at once when rv is malformed or the server's resource versions cannot be
// ordered; a *freshness.WaitError unwrapping to ctx.Err() or
// freshness.ErrStopped otherwise.
func (f *FreshInformer) WaitForFreshness(ctx context.Context, rv string) error {
	target, err := freshness.ParseRV(rv)
	if err == nil && f.tracker.Reached(target) { // one atomic load
		if f.metrics != nil {
			f.metrics.ObserveWait(WaitFresh, 0)
		}
		return nil
	}
	if f.metrics == nil {
		if err != nil {
			return err
		}
		return f.waitBounded(ctx, target)
	}
	if err != nil {
		f.metrics.ObserveWait(WaitIncomparable, 0)
		return err
	}
	start := time.Now()
	err = f.waitBounded(ctx, target)
	f.metrics.ObserveWait(outcomeOf(err), time.Since(start))
	return err
}

// LastObservedResourceVersion returns the highest resource version the
// cache has applied, "" before the first list. It never decreases while the
// informer runs, except by a declared regression.
func (f *FreshInformer) LastObservedResourceVersion() string {
	return f.tracker.Current().String()
}

// Stats are a FreshInformer's counters since it was made.
type Stats struct {
	reflector.Stats
	// OutOfOrderRejected counts events older than the cached object,
	// neither applied nor delivered.
	OutOfOrderRejected uint64
	// IncomparableObjects counts events whose resource version (or their
	// cached object's) could not be ordered; they pass through unguarded.
	IncomparableObjects uint64
	// Bookmarks counts bookmarks applied.
	Bookmarks uint64
	// RestoreProbes counts consistent probes made to verify a recorded
	// write below the cache's resource version (see RecordWrite).
	RestoreProbes uint64
	// PendingWaiters is how many callers are blocked in WaitForFreshness.
	PendingWaiters int
}

// Stats returns the informer's counters.
func (f *FreshInformer) Stats() Stats {
	return Stats{
		Stats:               f.guard.Stats(),
		OutOfOrderRejected:  f.outOfOrder.Load(),
		IncomparableObjects: f.incomparableObjects.Load(),
		Bookmarks:           f.bookmarks.Load(),
		RestoreProbes:       f.probes.count(),
		PendingWaiters:      f.tracker.Pending(),
	}
}

// appliedFloor is the applied part of the Guard's floor (the Guard adds the
// highest resource version its queue delivered). Older events and bookmarks
// never lower either part; only a declared regression does.
func (f *FreshInformer) appliedFloor() freshness.RV {
	if f.incomparable.Load() {
		return freshness.RV{}
	}
	return f.tracker.Current()
}

// Run runs the informer until stopCh is closed.
func (f *FreshInformer) Run(stopCh <-chan struct{}) {
	f.RunWithContext(wait.ContextForChannel(stopCh))
}

// RunWithContext runs the informer until ctx ends; it logs through
// klog.FromContext(ctx). Stopping releases every WaitForFreshness caller
// with freshness.ErrStopped and returns once every goroutine it started has
// ended.
func (f *FreshInformer) RunWithContext(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	if f.name != "" {
		logger = klog.LoggerWithValues(logger, "informer", f.name)
	}
	logger = klog.LoggerWithValues(logger, "resource", f.resource.String())

	f.mu.Lock()
	if f.started || f.stopped {
		f.mu.Unlock()
		logger.Info("Warning: FreshInformer has already run; running it again is not allowed")
		return
	}
	f.blockDeltas.Lock()
	f.logger = logger
	f.blockDeltas.Unlock()
	f.guard.SetLogger(logger)
	if f.initialFloorErr != nil {
		logger.Error(f.initialFloorErr, "Ignoring the initial floor: not a comparable resource version")
	}
	f.probes.start(ctx)
	queue := f.guard.NewQueue(toolscache.RealFIFOOptions{
		Logger:                &logger,
		Name:                  f.description,
		KeyFunction:           toolscache.MetaNamespaceKeyFunc,
		Transformer:           f.transform,
		UnlockWhileProcessing: clientgofeatures.FeatureGates().Enabled(clientgofeatures.UnlockWhileProcessingFIFO),
	})
	f.controller = toolscache.New(&toolscache.Config{
		Queue:             queue,
		ListerWatcher:     f.guard.ListerWatcher(f.lw),
		Process:           f.handleDeltas,
		ProcessBatch:      f.handleBatch,
		ObjectType:        f.objectType,
		ObjectDescription: f.description,
		// Resyncs run on the informer's clock (resyncLoop), not the
		// Reflector's real one: WithClock drives them as client-go's
		// informer clock does.
		WatchErrorHandlerWithContext: watchErrorHandler(f.guard, f.watchErrorHandler),
	})
	f.started = true
	controller := f.controller
	f.mu.Unlock()

	stopProcessor := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { f.processor.run(stopProcessor) })
	wg.Go(func() {
		select {
		case <-ctx.Done():
		case <-controller.HasSyncedChecker().Done():
			f.blockDeltas.Lock()
			close(f.synced)
			f.processor.upstreamSynced()
			f.blockDeltas.Unlock()
		}
	})

	if f.resyncCheckPeriod > 0 {
		wg.Go(func() { f.resyncLoop(ctx, queue, f.resyncCheckPeriod) })
	}

	controller.RunWithContext(ctx)

	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
	f.probes.stop()
	f.tracker.Stop()
	f.stopProbes()
	close(stopProcessor)
	wg.Wait()
	if f.metrics != nil {
		f.metrics.Stopped()
	}
}

// resyncLoop checks every period, on the informer's clock, whether a
// handler is due for a resync, and if one is, queues a resync of every
// cached object (delivered as updates to the handlers that are due).
func (f *FreshInformer) resyncLoop(ctx context.Context, queue toolscache.Queue, period time.Duration) {
	t := f.clock.NewTimer(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if f.processor.shouldResync() {
			if err := queue.Resync(); err != nil {
				f.logger.Error(err, "Failed to queue a resync")
			}
		}
		t.Reset(period)
	}
}

// watchErrorHandler is the user's handler, or client-go's default except
// for refused stale lists: the Guard logged those already (at V(2)), and
// client-go's default would report each at error level while a lagging
// replica catches up. client-go's Reflector flattens a list error with %v
// on the list+watch path; the Guard restores it, so errors.Is(err,
// reflector.ErrStaleList) holds in the user's handler too.
func watchErrorHandler(g *guard.Guard, user toolscache.WatchErrorHandlerWithContext) toolscache.WatchErrorHandlerWithContext {
	return func(ctx context.Context, r *toolscache.Reflector, err error) {
		err = g.ClassifyError(err)
		switch {
		case user != nil:
			user(ctx, r, err)
		case !reflector.IsStaleList(err):
			toolscache.DefaultWatchErrorHandler(ctx, r, err)
		}
	}
}

// handleDeltas is the controller's Process function: it applies one queue
// item to the indexer, advances the tracker, then notifies handlers.
func (f *FreshInformer) handleDeltas(obj any, isInInitialList bool) error {
	deltas, ok := obj.(toolscache.Deltas)
	if !ok {
		return fmt.Errorf("freshinformer: queue item is %T, not Deltas", obj)
	}
	return f.handleBatch(deltas, isInInitialList)
}

// handleBatch is the controller's ProcessBatch function: a run of
// changes to distinct keys, popped from the queue at once (client-go's
// InOrderInformersBatchProcess), applied in order. A regression found
// while applying is declared before the batch's later changes advance
// freshness.
func (f *FreshInformer) handleBatch(deltas []toolscache.Delta, isInInitialList bool) error {
	for len(deltas) > 0 {
		n, found, err := f.applyRun(deltas, isInInitialList)
		deltas = deltas[n:]
		if found {
			f.declareFound()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// applyRun applies deltas in order under blockDeltas until one fails or
// finds a regression to declare, and returns how many it took. The lock is
// released by defer: a panicking IndexFunc or transform unwinds to
// client-go's process loop (which reports it and, with
// utilruntime.ReallyCrash off, goes on) without leaving the informer
// wedged.
func (f *FreshInformer) applyRun(deltas []toolscache.Delta, isInInitialList bool) (n int, found bool, err error) {
	f.lockApply()
	defer f.unlockApply()
	for _, d := range deltas {
		n++
		if err = f.apply(d, isInInitialList); err != nil {
			f.logger.Error(err, "Failed to apply a change to the cache", "type", d.Type)
			return n, len(f.declare) > 0, err
		}
		if len(f.declare) > 0 {
			return n, true, nil
		}
	}
	return n, false, nil
}

// lockApply takes blockDeltas for a section that may move the tracker. The
// freshness callbacks such a section releases (AfterFreshness, WhenFresh,
// write-visible metrics) are held until unlockApply has dropped the lock,
// and run there, on this goroutine: a callback may call back into the
// informer (RecordWrite, AddEventHandler, AddIndexers, ...) without
// deadlocking it. Callers hold no other lock of the informer.
func (f *FreshInformer) lockApply() {
	f.blockDeltas.Lock()
	f.tracker.HoldCallbacks()
}

// unlockApply ends lockApply and runs the callbacks it held.
func (f *FreshInformer) unlockApply() {
	f.blockDeltas.Unlock()
	f.tracker.RunHeldCallbacks()
}

// declareFound declares the regressions found while applying, outside
// blockDeltas (the user's callback may call back into the informer), then
// releases the handlers and waiters the regressing list reached: a handler
// that sees a key go back, or a caller told "fresh" after a lost write,
// finds the regression already declared.
func (f *FreshInformer) declareFound() {
	f.blockDeltas.Lock()
	declare, resume, barrier := f.declare, f.resumeAfterDeclare, f.declareBarrier
	f.declare, f.resumeAfterDeclare, f.declareBarrier = nil, false, nil
	f.blockDeltas.Unlock()
	for _, r := range declare {
		f.guard.DeclareRegression(r)
	}
	if barrier != nil {
		close(barrier)
	}
	if resume {
		f.tracker.Resume()
	}
}

func (f *FreshInformer) apply(d toolscache.Delta, isInInitialList bool) error {
	switch d.Type {
	case toolscache.Bookmark:
		info, _ := d.Object.(toolscache.BookmarkInfo)
		f.bookmarks.Add(1)
		if rv, err := freshness.ParseRV(info.ResourceVersion); err == nil {
			f.observe(rv)
		}
		return nil
	case toolscache.ReplacedAll:
		info, ok := d.Object.(toolscache.ReplacedAllInfo)
		if !ok {
			return fmt.Errorf("ReplacedAll delta holds %T", d.Object)
		}
		return f.replaceAll(info, isInInitialList)
	case toolscache.SyncAll:
		for _, obj := range f.indexer.List() {
			f.processor.distribute(notification{kind: updateNotification, oldObj: obj, newObj: obj}, true)
		}
		return nil
	case toolscache.Deleted:
		return f.delete(d.Object)
	default: // Added, Updated; Sync and Replaced come only from non-atomic queues
		return f.upsert(d.Object, isInInitialList)
	}
}

// unstamped switches the informer to plain mode for an event whose object
// has no resource version at all (the Guard let it through for that
// reason): such a stream comes from no API server but from a fake
// clientset, and nothing about it can be called fresh. The next comparable
// list ends plain mode. err is ParseRV's error for "".
func (f *FreshInformer) unstamped(rv string, err error) {
	if rv == "" && err != nil {
		f.startOnEvent = false
		if !f.incomparable.Load() {
			f.markIncomparable(errUnstamped(err))
		}
	}
}

// errUnstamped tells a caller whose wait fails for want of resource
// versions where they went: a fake clientset, and which fake to use.
func errUnstamped(err error) error {
	return fmt.Errorf("objects carry no resource version, so they did not come from an API server (client-go's fake clientsets stamp none: package freshtest has fakes that do): %w", err)
}

// upsert applies an added or updated object unless it is older than the
// cached one.
func (f *FreshInformer) upsert(obj any, isInInitialList bool) error {
	old, exists, err := f.indexer.Get(obj)
	if err != nil {
		return err
	}
	newRVs := resourceVersion(obj)
	newRV, newErr := freshness.ParseRV(newRVs)
	f.unstamped(newRVs, newErr)
	if !exists {
		// Nothing cached to compare with, but a stream's resource versions
		// only grow: an add older than what the cache applied is out of
		// order (an object deleted since would come back to life).
		if f.behindStream(newRV, newErr) {
			f.reject("add", obj, newRVs, f.applied.String())
			return nil
		}
		if err := f.indexer.Add(obj); err != nil {
			return err
		}
		if newErr == nil {
			f.observeEvent(newRV)
		}
		f.processor.distribute(notification{kind: addNotification, newObj: obj, initialList: isInInitialList}, false)
		return nil
	}
	oldRVs := resourceVersion(old)
	if f.older(newRV, newErr, oldRVs) {
		f.reject("update", obj, newRVs, oldRVs)
		return nil
	}
	if newRVs != oldRVs && f.behindStream(newRV, newErr) {
		f.reject("update", obj, newRVs, f.applied.String())
		return nil
	}
	if err := f.indexer.Update(obj); err != nil {
		return err
	}
	if newErr == nil {
		f.observeEvent(newRV)
	}
	// An unchanged resource version is a resync or a duplicate: only
	// handlers due for a resync hear of it, as with client-go's informer.
	f.processor.distribute(notification{kind: updateNotification, oldObj: old, newObj: obj}, newRVs == oldRVs)
	return nil
}

// delete applies a deletion unless the cached object is newer than the
// deleted state (the object was recreated or updated after that state).
func (f *FreshInformer) delete(obj any) error {
	old, exists, err := f.indexer.Get(obj)
	if err != nil {
		return err
	}
	tombstone, isTombstone := obj.(toolscache.DeletedFinalStateUnknown)
	if isTombstone {
		obj = tombstone.Obj // the last state known, or nil
	}
	delRVs := resourceVersion(obj)
	delRV, delErr := freshness.ParseRV(delRVs)
	if !isTombstone {
		f.unstamped(delRVs, delErr)
	}
	if exists && obj != nil {
		if oldRVs := resourceVersion(old); f.older(delRV, delErr, oldRVs) {
			f.reject("delete", obj, delRVs, oldRVs)
			return nil
		}
	}
	if !exists && !isTombstone && delErr == nil && !f.incomparable.Load() && delRV.Compare(f.applied) <= 0 {
		// The key is gone already; a deletion not newer than the stream
		// (every event has a revision of its own) is a duplicate or a
		// replay of one that handlers have heard of.
		f.reject("delete", obj, delRVs, f.applied.String())
		return nil
	}
	if isTombstone {
		obj = tombstone
	}
	if err := f.indexer.Delete(obj); err != nil {
		return err
	}
	if !isTombstone && delErr == nil { // a tombstone's state is not the deletion's resource version
		f.observeEvent(delRV)
	}
	f.processor.distribute(notification{kind: deleteNotification, oldObj: obj}, false)
	return nil
}

// replaceAll applies a list: the indexer holds exactly the listed objects
// afterwards, handlers hear of deletions first, then of additions and
// updates, as with client-go's informer. A list is the server's state and is
// applied whole; if it moves keys back to older states than cached, or is
// itself older than the cache, that is declared as a regression (once per
// list) unless the Guard already declared it.
func (f *FreshInformer) replaceAll(info toolscache.ReplacedAllInfo, isInInitialList bool) error {
	type change struct{ old, new any }
	changes := make([]change, 0, len(info.Objects))
	listed := make(map[string]struct{}, len(info.Objects))
	var back listRegression
	listRV, listErr := freshness.ParseRV(info.ResourceVersion)
	checkWrites := f.written.len() > 0 && listErr == nil
	for _, obj := range info.Objects {
		key, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			return err
		}
		listed[key] = struct{}{}
		old, _, _ := f.indexer.GetByKey(key)
		changes = append(changes, change{old: old, new: obj})
		switch {
		case old != nil && f.olderQuiet(resourceVersion(obj), resourceVersion(old)):
			back.add(key, &back.keys)
		case checkWrites && f.written.lost(key, resourceVersion(obj), listRV):
			back.add(key, &back.lostWrites)
		}
	}
	var gone []toolscache.DeletedFinalStateUnknown
	for _, key := range f.indexer.ListKeys() {
		if _, ok := listed[key]; !ok {
			if old, exists, _ := f.indexer.GetByKey(key); exists {
				gone = append(gone, toolscache.DeletedFinalStateUnknown{Key: key, Obj: old})
			}
		}
	}
	if err := f.indexer.Replace(info.Objects, info.ResourceVersion); err != nil {
		return err
	}
	slices.Sort(back.sample) // a watch-list's objects come in no set order
	f.observeList(info.ResourceVersion, back)
	if len(f.declare) > 0 && f.declareBarrier == nil {
		// Handlers hear of keys going back only once the regression is
		// declared (declareFound lifts the barrier).
		f.declareBarrier = make(chan struct{})
		f.processor.distribute(notification{kind: barrierNotification, newObj: f.declareBarrier}, false)
	}
	for _, g := range gone {
		f.processor.distribute(notification{kind: deleteNotification, oldObj: g}, false)
	}
	for _, c := range changes {
		if c.old == nil {
			f.processor.distribute(notification{kind: addNotification, newObj: c.new, initialList: isInInitialList}, false)
			continue
		}
		same := resourceVersion(c.old) == resourceVersion(c.new)
		f.processor.distribute(notification{kind: updateNotification, oldObj: c.old, newObj: c.new}, same)
	}
	return nil
}

// behindStream reports whether an event at rv is older than what the cache
// applied: a stream's resource versions only grow, so it is out of order,
// whether or not its key is cached.
func (f *FreshInformer) behindStream(rv freshness.RV, err error) bool {
	return err == nil && !f.incomparable.Load() && rv.Compare(f.applied) < 0
}

// observeEvent advances freshness to an applied event's or bookmark's
// resource version. blockDeltas is held.
func (f *FreshInformer) observeEvent(rv freshness.RV) {
	f.recent.add(rv)
	f.observe(rv)
}

// observe advances freshness to an applied resource version; while a
// declared restore waits for its relist, only that list moves it.
// blockDeltas is held.
func (f *FreshInformer) observe(rv freshness.RV) {
	if f.incomparable.Load() && f.startOnEvent {
		// The first comparable resource version after a list at "0":
		// the stream is comparable from here on.
		f.startOnEvent = false
		f.incomparable.Store(false)
		f.applied = rv
		f.tracker.Reset(rv)
		return
	}
	if f.incomparable.Load() || f.restoring {
		return
	}
	if rv.Compare(f.applied) > 0 {
		f.applied = rv
	}
	f.tracker.Advance(rv)
}

// listRegression counts the keys a list moved back: cached keys listed at
// older states, and keys listed older than a recorded write the list
// covers (lostwrites.go).
type listRegression struct {
	keys, lostWrites int
	sample           []string // up to reflector.MaxRegressionSample of them
}

func (b *listRegression) add(key string, count *int) {
	*count++
	if len(b.sample) < reflector.MaxRegressionSample {
		b.sample = append(b.sample, key)
	}
}

// observeList moves freshness to an applied list's resource version. A list
// older than the cache reaches here only under a regression the Guard
// declared (or, should the Guard have missed it, one declared here): the
// cache now holds that older state, so freshness follows it down, or a
// later write with a resource version below the old high would look fresh
// too soon. back counts the keys the list moved to older states than
// cached or written. A regression found here is declared before waiters
// for the list's resource version are released (handleBatch), so a caller
// told "fresh" can tell from the regression count whether it lost a write.
// blockDeltas is held.
func (f *FreshInformer) observeList(s string, back listRegression) {
	rv, err := freshness.ParseRV(s)
	if s == "0" {
		// No position (a fake source listing nothing; API servers never
		// list at "0"): waits block until the first comparable event or
		// bookmark starts freshness.
		f.incomparable.Store(true)
		f.startOnEvent = true
		f.applied = freshness.RV{}
		f.recent.reset()
		f.tracker.Reset(freshness.RV{})
		return
	}
	if err != nil {
		if s == "" {
			err = errUnstamped(err)
		}
		f.markIncomparable(err)
		return
	}
	f.startOnEvent = false
	declared := f.guard.TakeDeclared(s)
	wasIncomparable := f.incomparable.Swap(false)
	prev := f.applied
	found := func(reason reflector.RegressionReason) {
		f.declare = append(f.declare, reflector.Regression{Reason: reason, ListResourceVersion: s, Floor: prev.String(),
			Keys: back.keys, WritesLost: back.lostWrites, SampleKeys: back.sample})
		declared = true
	}
	switch {
	case wasIncomparable || f.restoring:
		// Starting over: after plain mode there is nothing to compare
		// with, and a restore was declared when it was proven.
		f.tracker.Reset(rv)
	case rv.Compare(prev) < 0:
		if !declared {
			found(reflector.RegressionStaleList)
		}
		f.tracker.Reset(rv)
	case declared || (back.keys == 0 && back.lostWrites == 0):
		f.tracker.Advance(rv)
	default:
		if back.keys > 0 {
			found(reflector.RegressionKeysWentBack)
		} else {
			found(reflector.RegressionWritesLost)
		}
		f.tracker.Suspend()
		f.tracker.Advance(rv)
		f.resumeAfterDeclare = true
	}
	if rv.Compare(prev) < 0 || f.restoring || back.keys > 0 || back.lostWrites > 0 {
		f.written.reset() // the history was rewritten: old writes say nothing of it
	} else {
		f.written.pruneReached(rv)
	}
	f.applied = rv
	f.restoring = false
	f.recent.reset()
}

// markIncomparable switches the informer to plain mode until a list's
// resource version is comparable again: the server serves resource versions
// that cannot be ordered (some aggregated API servers), so no freshness can
// be claimed. Single events with malformed resource versions do not get
// here: the Guard counts and skips them.
func (f *FreshInformer) markIncomparable(err error) {
	if f.incomparable.CompareAndSwap(false, true) {
		logIncomparable(f.logger, err) // scope.go
		f.tracker.SetIncomparable(err)
		f.applied = freshness.RV{}
		f.recent.reset()
	}
}

// olderQuiet reports whether rv is older than cachedRV, both comparable.
func (f *FreshInformer) olderQuiet(rv, cachedRV string) bool {
	in, err1 := freshness.ParseRV(rv)
	cached, err2 := freshness.ParseRV(cachedRV)
	return err1 == nil && err2 == nil && in.Compare(cached) < 0
}

// older reports whether an incoming state is older than the cached one.
// Resource versions that cannot be ordered pass (counted).
func (f *FreshInformer) older(in freshness.RV, inErr error, cachedRV string) bool {
	cached, err := freshness.ParseRV(cachedRV)
	if inErr != nil || err != nil {
		f.incomparableObjects.Add(1)
		return false
	}
	return in.Compare(cached) < 0
}

func (f *FreshInformer) reject(what string, obj any, rv, cachedRV string) {
	f.outOfOrder.Add(1)
	if logger := f.logger.V(4); logger.Enabled() {
		logger.Info("Rejected an out-of-order "+what+": older than the cached object", "object", klog.KObj(asMeta(obj)), "resourceVersion", rv, "cachedResourceVersion", cachedRV)
	}
}

func resourceVersion(obj any) string {
	if m, err := meta.Accessor(obj); err == nil {
		return m.GetResourceVersion()
	}
	return ""
}

func asMeta(obj any) klog.KMetadata {
	if m, err := meta.Accessor(obj); err == nil {
		return m
	}
	return nil
}

// AddEventHandler adds a handler with the informer's default resync period.
func (f *FreshInformer) AddEventHandler(handler toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return f.AddEventHandlerWithOptions(handler, toolscache.HandlerOptions{})
}

// AddEventHandlerWithResyncPeriod adds a handler with its own resync period.
func (f *FreshInformer) AddEventHandlerWithResyncPeriod(handler toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return f.AddEventHandlerWithOptions(handler, toolscache.HandlerOptions{ResyncPeriod: &resync})
}

// AddEventHandlerWithOptions adds a handler. Added after the informer
// started, it first receives the cached objects as initial-list adds; its
// registration's HasSynced turns true once it has handled them all.
func (f *FreshInformer) AddEventHandlerWithOptions(handler toolscache.ResourceEventHandler, options toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return nil, fmt.Errorf("handler %v was not added to shared informer because it has stopped already", handler)
	}
	logger := ptr.Deref(options.Logger, klog.Background())
	resync := ptr.Deref(options.ResyncPeriod, f.defaultHandlerResync)
	if resync > 0 && resync < minimumResyncPeriod {
		logger.Info("Warning: resync period is too small; using the minimum", "resyncPeriod", resync, "minimum", minimumResyncPeriod)
		resync = minimumResyncPeriod
	}
	if resync > 0 && resync < f.resyncCheckPeriod && !f.started {
		f.resyncCheckPeriod = resync
		f.processor.resyncCheckPeriodChanged(logger, resync)
	}
	l := newListener(logger, handler, resync, effectiveResync(logger, resync, f.resyncCheckPeriod), f.clock.Now())
	if !f.started {
		f.processor.addListener(l)
		return l, nil
	}

	f.blockDeltas.Lock()
	defer f.blockDeltas.Unlock()
	f.processor.addListener(l)
	for _, obj := range f.indexer.List() {
		l.add(notification{kind: addNotification, newObj: obj, initialList: true})
	}
	select {
	case <-f.synced: // synced before this handler joined: its initial list is queued
		l.synced.UpstreamHasSynced()
	default: // the informer's sync will tell it
	}
	return l, nil
}

// RemoveEventHandler removes a handler added to this informer; pending
// notifications for it are dropped.
func (f *FreshInformer) RemoveEventHandler(handle toolscache.ResourceEventHandlerRegistration) error {
	l, ok := handle.(*listener)
	if !ok {
		return fmt.Errorf("registration %T was not made by a FreshInformer", handle)
	}
	f.processor.removeListener(l)
	return nil
}

// GetStore returns the informer's indexer as a Store.
func (f *FreshInformer) GetStore() toolscache.Store { return f.GetIndexer() }

// GetIndexer returns the informer's indexer. Its
// LastStoreSyncResourceVersion reports LastObservedResourceVersion (the
// applied, monotonic resource version, whatever client-go's AtomicFIFO
// feature gate says) while resource versions can be ordered, and what
// client-go's store reports otherwise.
func (f *FreshInformer) GetIndexer() toolscache.Indexer { return indexerView{f.indexer, f} }

type indexerView struct {
	toolscache.Indexer
	f *FreshInformer
}

// LastStoreSyncResourceVersion is LastObservedResourceVersion, or, while
// the informer is in plain mode (resource versions it cannot order, or a
// list at "0" before the first event), what client-go's store reports:
// the resource version of the last list or object it stored.
func (v indexerView) LastStoreSyncResourceVersion() string {
	if v.f.incomparable.Load() {
		return v.Indexer.LastStoreSyncResourceVersion()
	}
	return v.f.LastObservedResourceVersion()
}

// AddIndexers adds indexers to the informer's indexer.
func (f *FreshInformer) AddIndexers(indexers toolscache.Indexers) error {
	if f.IsStopped() { // f.mu before blockDeltas, as everywhere
		return errors.New("indexer was not added because it has stopped already")
	}
	f.blockDeltas.Lock()
	defer f.blockDeltas.Unlock()
	return f.indexer.AddIndexers(indexers)
}

// GetController returns a view of the informer as a Controller; running it
// does nothing (run the informer instead).
func (f *FreshInformer) GetController() toolscache.Controller { return controllerView{f} }

type controllerView struct{ f *FreshInformer }

func (controllerView) Run(<-chan struct{})                        {}
func (controllerView) RunWithContext(context.Context)             {}
func (v controllerView) HasSynced() bool                          { return v.f.HasSynced() }
func (v controllerView) HasSyncedChecker() toolscache.DoneChecker { return v.f.HasSyncedChecker() }
func (v controllerView) LastSyncResourceVersion() string          { return v.f.LastSyncResourceVersion() }

// HasSynced reports whether the initial list has been applied.
func (f *FreshInformer) HasSynced() bool {
	select {
	case <-f.synced:
		return true
	default:
		return false
	}
}

// HasSyncedChecker is HasSynced as a toolscache.DoneChecker.
func (f *FreshInformer) HasSyncedChecker() toolscache.DoneChecker { return syncedChecker{f} }

type syncedChecker struct{ f *FreshInformer }

func (c syncedChecker) Name() string          { return c.f.description }
func (c syncedChecker) Done() <-chan struct{} { return c.f.synced }

// LastSyncResourceVersion is the resource version the Reflector last
// received (not necessarily applied yet; see LastObservedResourceVersion).
func (f *FreshInformer) LastSyncResourceVersion() string {
	f.mu.Lock()
	c := f.controller
	f.mu.Unlock()
	if c == nil {
		return ""
	}
	return c.LastSyncResourceVersion()
}

// SetWatchErrorHandler sets the handler called when a list or watch fails;
// before Run only.
func (f *FreshInformer) SetWatchErrorHandler(handler toolscache.WatchErrorHandler) error {
	return f.SetWatchErrorHandlerWithContext(func(_ context.Context, r *toolscache.Reflector, err error) { handler(r, err) })
}

// SetWatchErrorHandlerWithContext is SetWatchErrorHandler with a context;
// before Run only.
func (f *FreshInformer) SetWatchErrorHandlerWithContext(handler toolscache.WatchErrorHandlerWithContext) error {
	return f.beforeStart(func() { f.watchErrorHandler = handler })
}

// SetTransform sets a function applied to every object before it is cached
// and delivered; before Run only.
func (f *FreshInformer) SetTransform(handler toolscache.TransformFunc) error {
	return f.beforeStart(func() { f.transform = handler })
}

// beforeStart applies a setting that the informer reads when it starts.
func (f *FreshInformer) beforeStart(set func()) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started {
		return errors.New("informer has already started")
	}
	set()
	return nil
}

// IsStopped reports whether the informer has stopped.
func (f *FreshInformer) IsStopped() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stopped
}
