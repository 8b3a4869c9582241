package cache

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/freshinformer/freshinformer/internal/handlers"
	"github.com/freshinformer/freshinformer/internal/trust"

	toolscache "k8s.io/client-go/tools/cache"
)

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
	l, err := f.run.AddHandler(f.processor, handler, options, &f.applyMu, f.indexer.List)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// RemoveEventHandler removes a handler added to this informer; pending
// notifications for it are dropped.
func (f *FreshInformer) RemoveEventHandler(handle toolscache.ResourceEventHandlerRegistration) error {
	l, ok := handle.(*handlers.Listener)
	if !ok {
		return fmt.Errorf("registration %T was not made by a FreshInformer", handle)
	}
	f.processor.RemoveListener(l)
	return nil
}

// GetStore returns the informer's indexer as a Store.
func (f *FreshInformer) GetStore() toolscache.Store { return f.GetIndexer() }

// GetIndexer returns the informer's indexer. Its
// LastStoreSyncResourceVersion reports LastObservedResourceVersion (the
// applied, monotonic resource version, whatever client-go's AtomicFIFO
// feature gate says) while resource versions can be ordered, and what
// client-go's store reports otherwise. With the stale-read detector on
// (WithStaleReadDetection), its reads are checked.
func (f *FreshInformer) GetIndexer() toolscache.Indexer {
	if f.cfg.staleReads != nil {
		return f.cfg.staleReads.View(indexerView{f.indexer, f})
	}
	return indexerView{f.indexer, f}
}

type indexerView struct {
	toolscache.Indexer
	f *FreshInformer
}

// LastStoreSyncResourceVersion is LastObservedResourceVersion, or, while
// the informer is in plain mode (resource versions it cannot order, or a
// list at "0" before the first event), what client-go's store reports:
// the resource version of the last list or object it stored.
func (v indexerView) LastStoreSyncResourceVersion() string {
	if state := v.f.trust.View().State; state == trust.Plain || state == trust.Syncing {
		return v.Indexer.LastStoreSyncResourceVersion()
	}
	return v.f.LastObservedResourceVersion()
}

// AddIndexers adds indexers to the informer's indexer.
func (f *FreshInformer) AddIndexers(indexers toolscache.Indexers) error {
	if f.IsStopped() { // the run state's lock before applyMu, as everywhere
		return errors.New("indexer was not added because it has stopped already")
	}
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	return f.indexer.AddIndexers(indexers)
}

// ResyncKey tells every handler (not only those due for a resync) of the
// object cached under key again, as a resync does, and reports whether it
// is cached: consistency.Store has a skipped owner queued again this way.
func (f *FreshInformer) ResyncKey(key string) bool {
	f.applyMu.Lock()
	defer f.unlockApply()
	obj, ok, _ := f.indexer.GetByKey(key)
	if ok {
		f.processor.Distribute(handlers.Notification{Kind: handlers.Update, OldObj: obj, NewObj: obj}, false)
	}
	return ok
}

// GetController returns a view of the informer as a Controller; running it
// does nothing (run the informer instead).
func (f *FreshInformer) GetController() toolscache.Controller { return controllerView{f} }

type controllerView struct{ f *FreshInformer }

func (controllerView) Run(<-chan struct{}) {}

func (controllerView) RunWithContext(context.Context) {}

func (v controllerView) HasSynced() bool { return v.f.HasSynced() }

func (v controllerView) HasSyncedChecker() toolscache.DoneChecker { return v.f.HasSyncedChecker() }

func (v controllerView) LastSyncResourceVersion() string { return v.f.LastSyncResourceVersion() }

// HasSynced reports whether the initial list has been applied.
func (f *FreshInformer) HasSynced() bool { return f.run.HasSynced() }

// HasSyncedChecker is HasSynced as a toolscache.DoneChecker.
func (f *FreshInformer) HasSyncedChecker() toolscache.DoneChecker {
	return f.run.SyncedChecker(f.cfg.description)
}

// LastSyncResourceVersion is the resource version the Reflector last
// received (not necessarily applied yet; see LastObservedResourceVersion).
func (f *FreshInformer) LastSyncResourceVersion() string { return f.run.LastSyncResourceVersion() }

// SetWatchErrorHandler sets the handler called when a list or watch fails;
// before Run only.
func (f *FreshInformer) SetWatchErrorHandler(handler toolscache.WatchErrorHandler) error {
	return f.SetWatchErrorHandlerWithContext(func(_ context.Context, r *toolscache.Reflector, err error) { handler(r, err) })
}

// SetWatchErrorHandlerWithContext is SetWatchErrorHandler with a context;
// before Run only.
func (f *FreshInformer) SetWatchErrorHandlerWithContext(handler toolscache.WatchErrorHandlerWithContext) error {
	return f.run.SetWatchErrorHandler(handler)
}

// SetTransform sets a function applied to every object before it is cached
// and delivered; before Run only.
func (f *FreshInformer) SetTransform(handler toolscache.TransformFunc) error {
	return f.run.SetTransform(handler)
}

// IsStopped reports whether the informer has stopped.
func (f *FreshInformer) IsStopped() bool { return f.run.Stopped() }
