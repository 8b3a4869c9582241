package cache

import (
	"context"
	"errors"

	clientgofeatures "k8s.io/client-go/features"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/freshness"
)

// WrappedInformer is an informer built elsewhere (handed out by another
// library, say) with WaitForFreshness added. It is still that informer: every
// SharedIndexInformer method is the wrapped one's.
//
// It keeps fewer guarantees than a FreshInformer, because it cannot see the
// wrapped informer's queue:
//
//   - Safe freshness holds: the resource versions it learns are of objects
//     already in the indexer (those handed to its event handler, which
//     client-go calls after the indexer write) and the indexer's own
//     LastStoreSyncResourceVersion (written under the store's lock, in stream
//     order). Both are trustworthy only with client-go's AtomicFIFO feature
//     gate on: with it off a list reaches the indexer one object at a time,
//     handlers hear of the first objects before the rest are stored, and a
//     wait could return before the list is whole. Wrap therefore refuses to
//     wrap while the gate is off (ErrAtomicFIFODisabled); use
//     NewSharedIndexInformer, whose own queue is atomic whatever the gate.
//   - Prompt wake-up holds for watch events. Bookmarks and list resource
//     versions reach no handler: they count only when WaitForFreshness is
//     called, so a pending waiter on a quiet resource wakes at the next
//     event, not at the bookmark.
//   - No out-of-order rejection and no stale-relist guard: the wrapped
//     informer applies what it receives. (If you build that informer
//     yourself, wrap its ListerWatcher with reflector.Guard for the latter,
//     or use NewSharedIndexInformer.)
//   - Malformed resource versions fail WaitForFreshness with
//     freshness.ErrIncomparable; waiters are released with
//     freshness.ErrStopped when the context given to Wrap ends.
type WrappedInformer struct {
	toolscache.SharedIndexInformer
	tracker freshness.Tracker
}

// ErrAtomicFIFODisabled is matched (with errors.Is) by Wrap's error when
// client-go's AtomicFIFO feature gate is off: the wrapped informer then
// applies lists in pieces, and no freshness could be claimed safely.
var ErrAtomicFIFODisabled = errors.New("freshinformer: Wrap needs client-go's AtomicFIFO feature gate on: with it off, lists reach the indexer in pieces")

// Wrap adds WaitForFreshness to informer. Pass the context the informer runs
// with: when it ends, waiters are released and Wrap's handler is removed.
// It fails with ErrAtomicFIFODisabled while client-go's AtomicFIFO feature
// gate is off (the gate is read once, by client-go, when the informer
// starts: do not switch it later).
func Wrap(ctx context.Context, informer toolscache.SharedIndexInformer) (*WrappedInformer, error) {
	if !clientgofeatures.FeatureGates().Enabled(clientgofeatures.AtomicFIFO) {
		return nil, ErrAtomicFIFODisabled
	}
	w := &WrappedInformer{SharedIndexInformer: informer}
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.observe(obj) },
		UpdateFunc: func(_, obj any) { w.observe(obj) },
		DeleteFunc: func(obj any) {
			if _, ok := obj.(toolscache.DeletedFinalStateUnknown); !ok {
				w.observe(obj)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	go func() {
		<-ctx.Done()
		w.tracker.Stop()
		_ = informer.RemoveEventHandler(reg)
	}()
	return w, nil
}

func (w *WrappedInformer) observe(obj any) {
	rv, err := freshness.ParseRV(resourceVersion(obj))
	if err != nil {
		w.tracker.SetIncomparable(err)
		return
	}
	w.tracker.Advance(rv)
}

// WaitForFreshness blocks until the wrapped informer's indexer has applied
// rv, ctx ends, or Wrap's context ends; see WrappedInformer for what it can
// and cannot see. Errors are FreshInformer.WaitForFreshness's.
func (w *WrappedInformer) WaitForFreshness(ctx context.Context, rv string) error {
	target, err := freshness.ParseRV(rv)
	if err != nil {
		return err
	}
	w.advanceFromStore()
	return w.tracker.WaitRV(ctx, target)
}

// LastObservedResourceVersion returns the highest resource version known to
// be applied; see WrappedInformer for what it can see.
func (w *WrappedInformer) LastObservedResourceVersion() string {
	w.advanceFromStore()
	return w.tracker.Current().String()
}

// advanceFromStore takes in the store's own resource version, which covers
// bookmarks and lists: no handler sees those.
func (w *WrappedInformer) advanceFromStore() {
	if stored, err := freshness.ParseRV(w.GetIndexer().LastStoreSyncResourceVersion()); err == nil {
		w.tracker.Advance(stored)
	}
}
