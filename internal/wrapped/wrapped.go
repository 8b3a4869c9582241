// Package wrapped waits for freshness on an informer built elsewhere
// (cache.Wrap): it learns the resource versions the wrapped informer's
// store has applied from what that informer shows (the objects handed to
// one event handler, and the store's own resource version) and tells them
// to a trust state of its own (internal/trust), which decides when a wait
// returns. What it can and cannot see is documented on
// cache.WrappedInformer.
package wrapped

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
	"github.com/freshinformer/freshinformer/internal/resources"
	"github.com/freshinformer/freshinformer/internal/rvwait"
	"github.com/freshinformer/freshinformer/internal/trust"
)

// Tracker is the freshness of one wrapped informer.
type Tracker struct {
	informer toolscache.SharedIndexInformer
	logger   klog.Logger

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
	stream       trust.Stream // comparableAgain's evidence, reused
}

// maxMalformedRVs bounds the malformed object resource versions a Tracker
// remembers to recognise in the store's resource version.
const maxMalformedRVs = 16

// New returns a Tracker of informer, with nothing observed yet. It is
// running (Wrap is given a running informer, or one about to be): its
// waits have no start to wait for.
func New(informer toolscache.SharedIndexInformer, logger klog.Logger) *Tracker {
	t := &Tracker{informer: informer, logger: logger}
	t.trust.Submit(trust.Run{})
	return t
}

// ErrAtomicFIFODisabled is cache.ErrAtomicFIFODisabled: Watch's error
// while client-go's AtomicFIFO feature gate is off.
var ErrAtomicFIFODisabled = errors.New("freshinformer: Wrap needs client-go's AtomicFIFO feature gate on: with it off, lists reach the indexer in pieces")

// Watch returns a Tracker of informer (cache.Wrap), logging through ctx's
// logger: its handler observes every object the informer stores until ctx
// ends; then waiters are released with freshness.ErrStopped and the
// handler is removed. It fails with ErrAtomicFIFODisabled while client-go's
// AtomicFIFO feature gate is off.
func Watch(ctx context.Context, informer toolscache.SharedIndexInformer) (*Tracker, error) {
	if !clientgofeatures.FeatureGates().Enabled(clientgofeatures.AtomicFIFO) {
		return nil, ErrAtomicFIFODisabled
	}
	t := New(informer, klog.FromContext(ctx))
	if err := t.watch(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// watch adds the Tracker's handler to the informer, and removes it when
// ctx ends, releasing waiters.
func (t *Tracker) watch(ctx context.Context) error {
	reg, err := t.informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.Observe(obj) },
		UpdateFunc: func(_, obj any) { t.Observe(obj) },
		DeleteFunc: func(obj any) {
			if _, ok := obj.(toolscache.DeletedFinalStateUnknown); !ok {
				t.Observe(obj)
			}
		},
	})
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		due, _ := t.trust.Submit(trust.Run{Stopped: true})
		due.Run()
		_ = t.informer.RemoveEventHandler(reg)
	}()
	return nil
}

// Observe takes in the resource version of an object the wrapped informer
// has just stored. It runs on the Tracker's handler goroutine (client-go's
// listener for that handler, one event at a time) and takes t.mu; it
// calls only the store and the trust state under it.
func (t *Tracker) Observe(obj any) {
	s := resources.ResourceVersion(obj)
	rv, err := freshness.ParseRV(s)
	var due rvwait.Due
	t.mu.Lock()
	defer func() {
		t.mu.Unlock()
		due.Run()
	}()
	if err != nil {
		t.incomparableObjects.Add(1)
		if logger := t.logger.V(4); logger.Enabled() {
			logger.Info("Skipped an object whose resource version cannot be ordered", "object", klog.KObj(resources.Meta(obj)), "resourceVersion", s)
		}
		if !slices.Contains(t.malformed, s) {
			if len(t.malformed) == maxMalformedRVs {
				t.malformed = slices.Delete(t.malformed, 0, 1)
			}
			t.malformed = append(t.malformed, s)
		}
		switch {
		case s == "":
			due = t.setIncomparable(s, err) // not from an API server: nothing is fresh
		case t.incomparable && t.cause == s: // a wait read the store before we heard of this object
			due = t.comparableAgain(t.trust.View().Applied)
		}
	} else {
		due = t.comparableAgain(rv)
	}
	due = append(due, t.advanceFromStoreLocked()...)
}

// IncomparableObjects counts the objects the wrapped informer stored whose
// resource version cannot be ordered.
func (t *Tracker) IncomparableObjects() uint64 { return t.incomparableObjects.Load() }

// Pending returns how many callers are blocked in WaitForFreshness.
func (t *Tracker) Pending() int { return t.trust.View().Pending }

// WaitForFreshness blocks until the wrapped informer's indexer has applied
// rv, ctx ends, or Watch's context ends.
func (t *Tracker) WaitForFreshness(ctx context.Context, rv string) error {
	target, err := freshness.ParseRV(rv)
	if err != nil {
		return err
	}
	t.advanceFromStore()
	return t.trust.Wait(ctx, target)
}

// LastObservedResourceVersion returns the highest resource version known
// to be applied.
func (t *Tracker) LastObservedResourceVersion() string {
	t.advanceFromStore()
	return t.trust.View().Shown.String()
}

// advanceFromStore takes in the store's own resource version, which covers
// bookmarks and lists: no handler sees those.
func (t *Tracker) advanceFromStore() {
	t.mu.Lock()
	due := t.advanceFromStoreLocked()
	t.mu.Unlock()
	due.Run()
}

// advanceFromStoreLocked is advanceFromStore with t.mu held. A comparable
// store resource version moves the position (and ends an incomparable spell:
// the store has applied everything up to it). A malformed one is a single
// object's if the handler has seen an object with it (there is a
// comparable position to go on from); otherwise it is a list's or a
// bookmark's, and waits fail as incomparable.
func (t *Tracker) advanceFromStoreLocked() rvwait.Due {
	s := t.informer.GetIndexer().LastStoreSyncResourceVersion()
	stored, err := freshness.ParseRV(s)
	if s == "" {
		if t.informer.HasSynced() { // listed without a resource version: a fake clientset's
			return t.setIncomparable(s, err)
		}
		return nil // else nothing listed yet
	}
	switch {
	case err == nil:
		return t.comparableAgain(stored)
	case t.incomparable:
		// Still incomparable: the cause stays until the store is comparable
		// or the handler explains it.
	case slices.Contains(t.malformed, s) && !t.trust.View().Applied.IsZero():
		// A single object's: skipped, counted in Observe.
	default:
		return t.setIncomparable(s, err)
	}
	return nil
}

// setIncomparable fails waits from now on, because of the resource version
// s: the trust state turns plain, as on a list whose resource version
// cannot be ordered. t.mu is held.
func (t *Tracker) setIncomparable(s string, err error) rvwait.Due {
	if t.incomparable {
		return nil
	}
	t.incomparable, t.cause = true, s
	trust.LogPlain(t.logger, err)
	due, _ := t.trust.Submit(trust.List{Unordered: err})
	return due
}

// comparableAgain advances the position to rv, an object's or the
// store's: Stream evidence; ending an incomparable spell, it is the
// position at rv even if older, as a list's is: List evidence. t.mu is
// held.
func (t *Tracker) comparableAgain(rv freshness.RV) rvwait.Due {
	if !t.incomparable {
		t.stream = trust.Stream{RV: rv} // boxed afresh, one allocation an event
		due, _ := t.trust.Submit(&t.stream)
		return due
	}
	t.logger.V(2).Info("Resource versions can be ordered again; WaitForFreshness works again", "resourceVersion", rv.String(), "incomparable", t.cause)
	t.incomparable, t.cause = false, ""
	due, _ := t.trust.Submit(trust.List{RV: rv})
	return due
}
