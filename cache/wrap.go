package cache

import (
	"context"

	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/internal/wrapped"
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
//     informer applies what it receives. (Use NewSharedIndexInformer for
//     both.)
//   - Resource versions that cannot be ordered, as the FreshInformer
//     treats them: a single object with a malformed resource version is
//     skipped (counted in IncomparableObjects, logged at V(4)) and freshness
//     goes on from the others. Only a store whose own resource version (a
//     list's or a bookmark's) cannot be ordered makes WaitForFreshness fail
//     at once with freshness.ErrIncomparable, until the store reaches a
//     comparable resource version again (a comparable relist, event or
//     bookmark); so do objects without any resource version (client-go's
//     fake clientsets stamp none), as the FreshInformer's plain mode does.
//     Wrap tells a single object's malformed resource version from a
//     list's by the objects its handler was given: a malformed store
//     resource version that is one of theirs (of the last 16) is a single
//     object's. The handler hears of an object just after the store
//     applied it, so a wait that reads the store in between fails with
//     ErrIncomparable; waits succeed again as soon as the handler has seen
//     the object.
//   - Waiters are released with freshness.ErrStopped when the context given
//     to Wrap ends.
type WrappedInformer struct {
	toolscache.SharedIndexInformer
	// tracker learns what the wrapped informer applied and decides when a
	// wait returns (internal/wrapped).
	tracker *wrapped.Tracker
}

// ErrAtomicFIFODisabled is matched (with errors.Is) by Wrap's error when
// client-go's AtomicFIFO feature gate is off: the wrapped informer then
// applies lists in pieces, and no freshness could be claimed safely.
var ErrAtomicFIFODisabled = wrapped.ErrAtomicFIFODisabled

// Wrap adds WaitForFreshness to informer. Pass the context the informer runs
// with: when it ends, waiters are released and Wrap's handler is removed.
// It fails with ErrAtomicFIFODisabled while client-go's AtomicFIFO feature
// gate is off (the gate is read once, by client-go, when the informer
// starts: do not switch it later).
func Wrap(ctx context.Context, informer toolscache.SharedIndexInformer) (*WrappedInformer, error) {
	t, err := wrapped.Watch(ctx, informer)
	if err != nil {
		return nil, err
	}
	return &WrappedInformer{SharedIndexInformer: informer, tracker: t}, nil
}

// IncomparableObjects counts the objects the wrapped informer stored whose
// resource version cannot be ordered: skipped, as the FreshInformer skips
// single events with malformed resource versions.
func (w *WrappedInformer) IncomparableObjects() uint64 { return w.tracker.IncomparableObjects() }

// WaitForFreshness blocks until the wrapped informer's indexer has applied
// rv, ctx ends, or Wrap's context ends; see WrappedInformer for what it can
// and cannot see. Errors are FreshInformer.WaitForFreshness's.
func (w *WrappedInformer) WaitForFreshness(ctx context.Context, rv string) error {
	return w.tracker.WaitForFreshness(ctx, rv)
}

// LastObservedResourceVersion returns the highest resource version known to
// be applied; see WrappedInformer for what it can see.
func (w *WrappedInformer) LastObservedResourceVersion() string {
	return w.tracker.LastObservedResourceVersion()
}
