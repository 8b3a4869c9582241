package cache

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	clientgofeatures "k8s.io/client-go/features"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/rvwait"
	"github.com/freshinformer/freshinformer/internal/trust"
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
	logger klog.Logger

	incomparableObjects atomic.Uint64

	// trust decides when a wait returns, as a FreshInformer's does
	// (internal/trust): a wrapped informer submits only Stream and List
	// evidence (what its handler and its store show) and Run's.
	trust trust.Trust

	// mu guards the fields below, and makes each reading of the store and
	// the evidence it gives one step; it is taken before the trust's lock
	// (and the store's, which is a leaf).
	mu sync.Mutex
	// malformed are the last malformed resource versions of objects the
	// handler was given, newest last (at most maxMalformedRVs).
	malformed []string
	// incomparable is set while waits fail (the trust state is plain);
	// cause is the store resource version that made it so ("" for an
	// object without any: client-go's fake clientsets stamp none).
	incomparable bool
	cause        string
}

// maxMalformedRVs bounds the malformed object resource versions Wrap
// remembers to recognise in the store's resource version.
const maxMalformedRVs = 16

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
	w := newWrapped(informer, klog.FromContext(ctx))
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
		due, _ := w.trust.Submit(trust.Run{Stopped: true})
		due.Run()
		_ = informer.RemoveEventHandler(reg)
	}()
	return w, nil
}

// newWrapped returns informer wrapped, with nothing observed yet. It is
// running (Wrap is given a running informer, or one about to be): its
// waits have no start to wait for.
func newWrapped(informer toolscache.SharedIndexInformer, logger klog.Logger) *WrappedInformer {
	w := &WrappedInformer{SharedIndexInformer: informer, logger: logger}
	w.trust.Submit(trust.Run{})
	return w
}

// observe takes in the resource version of an object the wrapped informer
// has just stored. It runs on Wrap's handler goroutine (client-go's
// listener for that handler, one event at a time) and takes w.mu; it
// calls only the store and the trust state under it.
func (w *WrappedInformer) observe(obj any) {
	s := resourceVersion(obj)
	rv, err := freshness.ParseRV(s)
	var due rvwait.Due
	w.mu.Lock()
	defer func() {
		w.mu.Unlock()
		due.Run()
	}()
	if err != nil {
		w.incomparableObjects.Add(1)
		if logger := w.logger.V(4); logger.Enabled() {
			logger.Info("Skipped an object whose resource version cannot be ordered", "object", klog.KObj(asMeta(obj)), "resourceVersion", s)
		}
		if !slices.Contains(w.malformed, s) {
			if len(w.malformed) == maxMalformedRVs {
				w.malformed = slices.Delete(w.malformed, 0, 1)
			}
			w.malformed = append(w.malformed, s)
		}
		switch {
		case s == "":
			due = w.setIncomparable(s, err) // not from an API server: nothing is fresh
		case w.incomparable && w.cause == s: // a wait read the store before we heard of this object
			due = w.comparableAgain(w.trust.View().Applied)
		}
	} else {
		due = w.comparableAgain(rv)
	}
	due = append(due, w.advanceFromStoreLocked()...)
}

// IncomparableObjects counts the objects the wrapped informer stored whose
// resource version cannot be ordered: skipped, as the FreshInformer skips
// single events with malformed resource versions.
func (w *WrappedInformer) IncomparableObjects() uint64 { return w.incomparableObjects.Load() }

// WaitForFreshness blocks until the wrapped informer's indexer has applied
// rv, ctx ends, or Wrap's context ends; see WrappedInformer for what it can
// and cannot see. Errors are FreshInformer.WaitForFreshness's.
func (w *WrappedInformer) WaitForFreshness(ctx context.Context, rv string) error {
	target, err := freshness.ParseRV(rv)
	if err != nil {
		return err
	}
	w.advanceFromStore()
	return w.trust.Wait(ctx, target)
}

// LastObservedResourceVersion returns the highest resource version known to
// be applied; see WrappedInformer for what it can see.
func (w *WrappedInformer) LastObservedResourceVersion() string {
	w.advanceFromStore()
	return w.trust.View().Shown.String()
}

// advanceFromStore takes in the store's own resource version, which covers
// bookmarks and lists: no handler sees those.
func (w *WrappedInformer) advanceFromStore() {
	w.mu.Lock()
	due := w.advanceFromStoreLocked()
	w.mu.Unlock()
	due.Run()
}

// advanceFromStoreLocked is advanceFromStore with w.mu held. A comparable
// store resource version moves the position (and ends an incomparable spell:
// the store has applied everything up to it). A malformed one is a single
// object's if the handler has seen an object with it (there is a
// comparable position to go on from); otherwise it is a list's or a
// bookmark's, and waits fail as incomparable.
func (w *WrappedInformer) advanceFromStoreLocked() rvwait.Due {
	s := w.GetIndexer().LastStoreSyncResourceVersion()
	stored, err := freshness.ParseRV(s)
	if s == "" {
		if w.HasSynced() { // listed without a resource version: a fake clientset's
			return w.setIncomparable(s, err)
		}
		return nil // else nothing listed yet
	}
	switch {
	case err == nil:
		return w.comparableAgain(stored)
	case w.incomparable:
		// Still incomparable: the cause stays until the store is comparable
		// or the handler explains it.
	case slices.Contains(w.malformed, s) && !w.trust.View().Applied.IsZero():
		// A single object's: skipped, counted in observe.
	default:
		return w.setIncomparable(s, err)
	}
	return nil
}

// setIncomparable fails waits from now on, because of the resource version
// s: the trust state turns plain, as on a list whose resource version
// cannot be ordered. w.mu is held.
func (w *WrappedInformer) setIncomparable(s string, err error) rvwait.Due {
	if w.incomparable {
		return nil
	}
	w.incomparable, w.cause = true, s
	logIncomparable(w.logger, err) // scope.go
	due, _ := w.trust.Submit(trust.List{Unordered: err})
	return due
}

// comparableAgain advances the position to rv, an object's or the
// store's: Stream evidence; ending an incomparable spell, it is the
// position at rv even if older, as a list's is: List evidence. w.mu is
// held.
func (w *WrappedInformer) comparableAgain(rv freshness.RV) rvwait.Due {
	if !w.incomparable {
		due, _ := w.trust.Submit(trust.Stream{RV: rv})
		return due
	}
	w.logger.V(2).Info("Resource versions can be ordered again; WaitForFreshness works again", "resourceVersion", rv.String(), "incomparable", w.cause)
	w.incomparable, w.cause = false, ""
	due, _ := w.trust.Submit(trust.List{RV: rv})
	return due
}
