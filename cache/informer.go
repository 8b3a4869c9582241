package cache

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgofeatures "k8s.io/client-go/features"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/guard"
	"github.com/freshinformer/freshinformer/internal/handlers"
	"github.com/freshinformer/freshinformer/internal/probe"
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
	processor   *handlers.Processor
	metrics     InformerMetrics // nil without WithMetrics
	quietDelay  time.Duration   // WithQuietProbeDelay
	// snapshotLimit is WithSnapshotProbeLimit's, defaulted (negative:
	// off); cachedKeys counts the indexer's keys (kept by apply.go) so
	// that routing a probe costs no scan of the indexer.
	snapshotLimit    int
	restoreCheckByRV bool // Options.internal.restoreCheckByRV
	cachedKeys       atomic.Int64
	quiet            quietProbe // bounded freshness on quiet resources (quietprobe.go)

	newestMu    sync.Mutex      // guards newestWrite; a leaf
	newestWrite freshness.RV    // the newest RecordWrite
	visible     writeVisibility // write-to-visible samples, with metrics (metrics.go)

	// applyMu serializes applying deltas (apply.go) with handler and
	// indexer registration, so a late handler sees a consistent initial
	// list; it guards the indexer's writes and the fields below. Taken
	// after mu, before handlers.Processor.mu, Guard.mu and Tracker.mu (doc.go).
	applyMu   sync.Mutex
	logger    klog.Logger  // set at start; read under applyMu
	restoring bool         // a restore was declared: freshness waits for the relist; under applyMu
	recent    recentRVs    // RVs of recently applied events; under applyMu
	zone      snapshotZone // the stream behind a snapshot (snapshot.go); under applyMu
	// listsTaken counts the lists taken from the queue, applied or
	// dropped: the n-th is the n-th the Guard queued. Under applyMu.
	listsTaken   uint64
	incomparable atomic.Bool // the last list's RV cannot be ordered
	// startOnEvent: the last list was at "0" (a fake source with nothing
	// in it; API servers never list at "0"), so freshness starts at the
	// first comparable event or bookmark after it. Under applyMu.
	startOnEvent  bool
	restoreChecks *probe.Runner          // restore verification (restorecheck.go)
	outage        outage                 // waits held after a failed request (restorecheck.go)
	declare       []reflector.Regression // found while applying; declared once applyMu is released
	// resumeAfterDeclare counts the suspensions (holdUntilDeclared) of a
	// list or snapshot that brought a regression: declareFound resumes
	// the tracker that many times once the regressions are declared. A
	// snapshot may find one while a list's waits to be declared.
	resumeAfterDeclare int
	// declareBarrier holds the handlers' notifications from that list
	// back until the regression is declared.
	declareBarrier chan struct{}
	written        writtenKeys // recorded writes not yet applied (lostwrites.go)

	mu                   sync.Mutex // guards the fields below; taken before applyMu
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
	options = options.withDefaults(exampleObject)
	f := &FreshInformer{
		lw:                   lw,
		resource:             options.Resource,
		selector:             options.Selector,
		objectType:           exampleObject,
		description:          options.ObjectDescription,
		name:                 options.Name,
		clock:                options.Clock,
		indexer:              toolscache.NewIndexer(toolscache.DeletionHandlingMetaNamespaceKeyFunc, options.Indexers),
		processor:            &handlers.Processor{Clock: options.Clock},
		resyncCheckPeriod:    options.ResyncPeriod,
		defaultHandlerResync: options.ResyncPeriod,
		synced:               make(chan struct{}),
		logger:               klog.Background(),
		quietDelay:           options.QuietProbeDelay,
		snapshotLimit:        options.SnapshotProbeLimit,
		restoreCheckByRV:     options.internal.restoreCheckByRV,
	}
	f.restoreChecks = newRestoreChecks(&f.tracker)
	f.outage.wake = make(chan struct{}, 1)
	initialFloor, floorErr := parseInitialFloor(options.InitialFloor)
	f.initialFloorErr = floorErr
	f.guard = guard.New(guard.Options{
		InitialFloor:          initialFloor,
		ConsistentInitialList: options.ConsistentInitialList,
		AcceptRegressionAfter: options.AcceptRegressionAfter,
		OnRegression:          options.OnRegression,
		OnWatchResumed:        f.verifyAfterOutage,
		OnRequestFailed:       f.beginOutage,
		Clock:                 options.Clock,
		StreamClock:           options.internal.streamClock,
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
		RestoreProbes:       f.restoreChecks.Runs(),
		PendingWaiters:      f.tracker.Pending(),
	}
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
	f.applyMu.Lock()
	f.logger = logger
	f.applyMu.Unlock()
	f.guard.SetLogger(logger)
	if f.initialFloorErr != nil {
		logger.Error(f.initialFloorErr, "Ignoring the initial floor: not a comparable resource version")
	}
	f.restoreChecks.Start(ctx)
	f.quiet.runner.Start(ctx)
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
	wg.Go(func() { f.processor.Run(stopProcessor) })
	wg.Go(func() {
		select {
		case <-ctx.Done():
		case <-controller.HasSyncedChecker().Done():
			f.applyMu.Lock()
			close(f.synced)
			f.processor.UpstreamSynced()
			f.applyMu.Unlock()
		}
	})

	if f.resyncCheckPeriod > 0 {
		wg.Go(func() { f.resyncLoop(ctx, queue, f.resyncCheckPeriod) })
	}

	controller.RunWithContext(ctx)

	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
	f.restoreChecks.Stop()
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
		if f.processor.ShouldResync() {
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
