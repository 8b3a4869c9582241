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

	"github.com/freshinformer/freshinformer/internal/detector"
	"github.com/freshinformer/freshinformer/internal/guard"
	"github.com/freshinformer/freshinformer/internal/handlers"
	"github.com/freshinformer/freshinformer/internal/lifecycle"
	"github.com/freshinformer/freshinformer/internal/prove"
	"github.com/freshinformer/freshinformer/internal/recorded"
	"github.com/freshinformer/freshinformer/internal/rvwait"
	"github.com/freshinformer/freshinformer/internal/snapshotzone"
	"github.com/freshinformer/freshinformer/internal/trust"
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
	cfg       config   // what the constructor decided; never changes
	counts    counters // Stats' own
	indexer   toolscache.Indexer
	trust     trust.Trust // the one place that decides when a wait returns (internal/trust)
	guard     *guard.Guard
	processor *handlers.Processor
	metrics   InformerMetrics // nil without WithMetrics
	// prover proves freshness off the stream (quiet probes, Sync's read)
	// and checks the server for restores (internal/prove, probes.go).
	prover  *prove.Prover
	logger  atomic.Pointer[klog.Logger] // the run's (log)
	visible recorded.Timer              // write-to-visible samples, with metrics

	// applyMu serializes applying deltas (apply.go), proofs and restores
	// with handler and indexer registration, so a late handler sees a
	// consistent initial list; it guards the indexer's writes and the
	// fields below. Taken after the run state's lock, before
	// handlers.Processor.mu, Guard.mu and the trust's lock (doc.go).
	applyMu sync.Mutex
	recent  recorded.Recent        // RVs of recently applied events
	zone    snapshotzone.Zone      // the stream behind a snapshot (internal/snapshotzone)
	due     rvwait.Due             // freshness callbacks released, run once applyMu is released
	stream  trust.Stream           // observe's evidence, reused: boxed afresh, one allocation an event
	declare []reflector.Regression // found; declared once applyMu is released, or before a list applies them (declareFound)
	// declaring is closed once the regressions unlockApply took are
	// declared; the apply goroutine writes nothing to the indexer before
	// (awaitDeclarations).
	declaring chan struct{}
	written   recorded.Keys // recorded writes not yet applied (lostwrites.go)

	// run is whether the informer started or stopped, the settings made
	// before Run, and whether its initial list is applied
	// (internal/lifecycle); its lock is taken before applyMu.
	run *lifecycle.State
}

// config is a FreshInformer's configuration, as its constructor decided
// it from Options (options.go); read without a lock, as it never changes.
type config struct {
	lw           toolscache.ListerWatcher
	objectType   runtime.Object
	description  string
	name         string
	resource     schema.GroupResource
	selector     Selector
	clock        clock.Clock
	onRegression func(reflector.Regression)
	identifier   toolscache.InformerNameAndResource // client-go's informer metrics
	// initialFloorErr is a malformed Options.InitialFloor, logged at start.
	initialFloorErr error
	// staleReads checks reads through GetIndexer against recorded writes;
	// nil (no cost) unless the detector is on.
	staleReads *detector.Detector
}

// counters are the events a FreshInformer counts for Stats.
type counters struct {
	outOfOrder, incomparableObjects, bookmarks atomic.Uint64
	regressions                                atomic.Uint64 // declared
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
	initialFloor, floorErr := parseInitialFloor(options.InitialFloor)
	f := &FreshInformer{
		cfg: config{
			lw:              lw,
			resource:        options.Resource,
			selector:        options.Selector,
			objectType:      exampleObject,
			description:     options.ObjectDescription,
			name:            options.Name,
			clock:           options.Clock,
			identifier:      options.Identifier,
			onRegression:    options.OnRegression,
			initialFloorErr: floorErr,
		},
		indexer:   toolscache.NewIndexer(toolscache.DeletionHandlingMetaNamespaceKeyFunc, options.Indexers, toolscache.WithStoreMetrics(options.Identifier, nil)),
		processor: &handlers.Processor{Clock: options.Clock},
		run:       lifecycle.New(options.ResyncPeriod),
	}
	f.trust.StartGrace = options.internal.startGrace
	f.zone.Init(f.processor, f.indexer, &f.recent, snapshotzone.Hooks{ // held as a restore check holds
		Unplaced: func() { f.submit(trust.Check{}); f.guard.RequestRelist() },
		Listed:   func() { f.submit(trust.Check{Done: true}) },
	})
	f.prover = prove.New(prove.Config{Lister: lw, Clock: options.Clock, Delay: options.QuietProbeDelay,
		SnapshotLimit: options.SnapshotProbeLimit, RestoreCheckByRV: options.internal.restoreCheckByRV,
		Shared: options.ServerReads.reads.For(options.Resource)}, proverOwner{f})
	if mode := detector.FromEnv(); options.DetectStaleReads || mode != detector.Off {
		f.detectStaleReads(options, mode == detector.Halt)
	}
	f.guard = guard.New(guard.Options{
		Trust:                 &f.trust,
		Owner:                 guardOwner{f},
		InitialFloor:          initialFloor,
		ConsistentInitialList: options.ConsistentInitialList,
		AcceptRegressionAfter: options.AcceptRegressionAfter,
		Clock:                 options.Clock,
		StreamClock:           options.internal.streamClock,
		ListAfterFailure:      func() bool { return f.listIsCompressed(options.internal.listCompressedBytes) },
	})
	if options.Metrics != nil {
		f.metrics = options.Metrics.InformerMetrics(f)
	}
	return f
}

// listIsCompressed reports whether a list of the informer's objects would
// take at least limit bytes in protobuf (see listCompressedBytes).
func (f *FreshInformer) listIsCompressed(limit int) bool {
	return guard.ListIsCompressed(f.indexer, limit)
}

// starting tells the informer its factory's Start is about to run it, so
// that a wait right after Start does not find it never started.
func (f *FreshInformer) starting() { f.trust.Submit(trust.Run{}) }

// log returns the logger of the informer's run (klog.Background before it).
func (f *FreshInformer) log() klog.Logger {
	if l := f.logger.Load(); l != nil {
		return *l
	}
	return klog.Background()
}

// Name returns the informer's name (WithName), "" if unnamed.
func (f *FreshInformer) Name() string { return f.cfg.name }

// Resource returns the listed resource (WithResource, or guessed).
func (f *FreshInformer) Resource() schema.GroupResource { return f.cfg.resource }

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
	// RestoreProbes counts the restore checks: consistent reads that
	// verify a recorded write below the cache's resource version (see
	// RecordWrite), or a server whose stream broke before the watch of a
	// large informer resumes.
	RestoreProbes uint64
	// PendingWaiters is how many callers are blocked in WaitForFreshness.
	PendingWaiters int
}

// Stats returns the informer's counters.
func (f *FreshInformer) Stats() Stats {
	s := Stats{
		Stats:               f.guard.Stats(),
		OutOfOrderRejected:  f.counts.outOfOrder.Load(),
		IncomparableObjects: f.counts.incomparableObjects.Load(),
		Bookmarks:           f.counts.bookmarks.Load(),
		RestoreProbes:       f.prover.Stats().RestoreChecks,
		PendingWaiters:      f.trust.View().Pending,
	}
	s.Regressions = f.counts.regressions.Load()
	return s
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
	if f.cfg.name != "" {
		logger = klog.LoggerWithValues(logger, "informer", f.cfg.name)
	}
	logger = klog.LoggerWithValues(logger, "resource", f.cfg.resource.String())
	controller, queue := f.begin(ctx, logger)
	if controller == nil {
		logger.Info("Warning: FreshInformer has already run; running it again is not allowed")
		return
	}

	stopProcessor := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { f.processor.Run(stopProcessor) })
	wg.Go(func() {
		select {
		case <-ctx.Done():
		case <-controller.HasSyncedChecker().Done():
			f.applyMu.Lock()
			f.run.MarkSynced()
			f.processor.UpstreamSynced()
			f.applyMu.Unlock()
		}
	})
	if period := f.run.ResyncCheckPeriod(); period > 0 {
		wg.Go(func() { f.processor.RunResyncs(ctx, period, queue.Resync, f.log()) })
	}

	controller.RunWithContext(ctx)

	f.run.Stop()
	f.prover.Stop()
	due, _ := f.trust.Submit(trust.Run{Stopped: true})
	due.Run()
	close(stopProcessor)
	wg.Wait()
	if f.metrics != nil {
		f.metrics.Stopped()
	}
}

// begin marks the informer running and builds its controller over the
// guarded queue and ListerWatcher, with the run state's lock held; it
// returns a nil controller if the informer has run before.
func (f *FreshInformer) begin(ctx context.Context, logger klog.Logger) (controller toolscache.Controller, queue toolscache.Queue) {
	controller = f.run.Begin(func(transform toolscache.TransformFunc, onWatchError toolscache.WatchErrorHandlerWithContext) toolscache.Controller {
		f.trust.Submit(trust.Run{})
		f.logger.Store(&logger)
		f.guard.SetLogger(logger)
		if f.cfg.staleReads != nil {
			f.cfg.staleReads.Started(logger) // says, once, that it is on
		}
		if f.cfg.initialFloorErr != nil {
			logger.Error(f.cfg.initialFloorErr, "Ignoring the initial floor: not a comparable resource version")
		}
		f.prover.Start(ctx)
		queue = f.guard.NewQueue(toolscache.RealFIFOOptions{
			Logger:                &logger,
			Name:                  f.cfg.description,
			KeyFunction:           toolscache.MetaNamespaceKeyFunc,
			Transformer:           transform,
			Identifier:            f.cfg.identifier,
			UnlockWhileProcessing: clientgofeatures.FeatureGates().Enabled(clientgofeatures.UnlockWhileProcessingFIFO),
		})
		return toolscache.New(&toolscache.Config{
			Queue:             queue,
			ListerWatcher:     f.guard.ListerWatcher(f.cfg.lw),
			Process:           f.handleDeltas,
			ProcessBatch:      f.handleBatch,
			ObjectType:        f.cfg.objectType,
			ObjectDescription: f.cfg.description,
			// Resyncs run on the informer's clock (RunResyncs), not the
			// Reflector's real one: WithClock drives them as client-go's
			// informer clock does.
			WatchErrorHandlerWithContext: f.guard.WatchErrorHandler(onWatchError),
		})
	})
	return controller, queue
}
