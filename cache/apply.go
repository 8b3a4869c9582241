package cache

import (
	"fmt"
	"slices"

	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/handlers"
	"github.com/freshinformer/freshinformer/reflector"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/klog/v2"
)

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

// applyRun applies deltas in order under applyMu until one fails or
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

// lockApply takes applyMu for a section that may move the tracker. The
// freshness callbacks such a section releases (AfterFreshness, WhenFresh,
// write-visible metrics) are held until unlockApply has dropped the lock,
// and run there, on this goroutine: a callback may call back into the
// informer (RecordWrite, AddEventHandler, AddIndexers, ...) without
// deadlocking it. Callers hold no other lock of the informer.
func (f *FreshInformer) lockApply() {
	f.applyMu.Lock()
	f.tracker.HoldCallbacks()
}

// unlockApply ends lockApply and runs the callbacks it held.
func (f *FreshInformer) unlockApply() {
	f.applyMu.Unlock()
	f.tracker.RunHeldCallbacks()
}

// declareFound declares the regressions found while applying, outside
// applyMu (the user's callback may call back into the informer), then
// releases the handlers and waiters the regressing list reached: a handler
// that sees a key go back, or a caller told "fresh" after a lost write,
// finds the regression already declared.
func (f *FreshInformer) declareFound() {
	f.applyMu.Lock()
	declare, resume, barrier := f.declare, f.resumeAfterDeclare, f.declareBarrier
	f.declare, f.resumeAfterDeclare, f.declareBarrier = nil, 0, nil
	f.applyMu.Unlock()
	for _, r := range declare {
		f.guard.DeclareRegression(r)
	}
	if barrier != nil {
		close(barrier)
	}
	for range resume {
		f.tracker.Resume()
	}
}

// holdUntilDeclared suspends the tracker until declareFound has declared
// the regressions found so far, so that no waiter the regressing change
// reaches is released before. applyMu is held.
func (f *FreshInformer) holdUntilDeclared() {
	f.tracker.Suspend()
	f.resumeAfterDeclare++
}

func (f *FreshInformer) apply(d toolscache.Delta, isInInitialList bool) error {
	if f.restoring && d.Type != toolscache.ReplacedAll && d.Type != toolscache.SyncAll {
		// A restore was declared: what the queue still holds from before
		// its relist (lists included, below) is of the history the server
		// lost, or of a watch resumed on the restored one: the relist
		// replaces it all. Applied, it would show handlers states the
		// relist takes back.
		return nil
	}
	switch d.Type {
	case toolscache.Bookmark:
		info, _ := d.Object.(toolscache.BookmarkInfo)
		f.bookmarks.Add(1)
		if rv, err := freshness.ParseRV(info.ResourceVersion); err == nil {
			f.observe(rv)
		}
		return nil
	case toolscache.ReplacedAll:
		f.listsTaken++
		admitted := f.guard.TakeList()
		if f.restoring && !admitted.Relist {
			// Queued before the restore was declared: of the lost history.
			return nil
		}
		if admitted.Relist {
			defer func() {
				if f.restoring { // not applied (a key error, a panicking IndexFunc): ask again
					f.guard.RelistForRestore()
				}
			}()
		}
		info, ok := d.Object.(toolscache.ReplacedAllInfo)
		if !ok {
			return fmt.Errorf("ReplacedAll delta holds %T", d.Object)
		}
		return f.replaceAll(info, admitted.Declared, isInInitialList)
	case toolscache.SyncAll:
		for _, obj := range f.indexer.List() {
			f.processor.Distribute(handlers.Notification{Kind: handlers.Update, OldObj: obj, NewObj: obj}, true)
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
	if f.zoneEvent(handlers.Update, obj, newRV, newErr) {
		return nil
	}
	if !exists {
		// Nothing cached to compare with, but a stream's resource versions
		// only grow and every event has one of its own: an add not newer
		// than what the cache applied is a replay (an object deleted since
		// would come back to life; its deletion may have been malformed, so
		// that freshness stayed at the add's own resource version).
		if f.notNewerThanStream(newRV, newErr) {
			f.reject("add", obj, newRVs, f.tracker.Current().String())
			return nil
		}
		if err := f.indexer.Add(obj); err != nil {
			return err
		}
		f.cachedKeys.Add(1)
		if newErr == nil {
			f.observeEvent(newRV)
		}
		f.processor.Distribute(handlers.Notification{Kind: handlers.Add, NewObj: obj, InitialList: isInInitialList}, false)
		return nil
	}
	oldRVs := resourceVersion(old)
	if f.older(newRV, newErr, oldRVs) {
		f.reject("update", obj, newRVs, oldRVs)
		return nil
	}
	if newRVs != oldRVs && f.behindStream(newRV, newErr) {
		f.reject("update", obj, newRVs, f.tracker.Current().String())
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
	f.processor.Distribute(handlers.Notification{Kind: handlers.Update, OldObj: old, NewObj: obj}, newRVs == oldRVs)
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
		if f.zoneEvent(handlers.Delete, obj, delRV, delErr) {
			return nil
		}
	}
	if exists && obj != nil {
		if oldRVs := resourceVersion(old); f.older(delRV, delErr, oldRVs) {
			f.reject("delete", obj, delRVs, oldRVs)
			return nil
		}
	}
	if exists && !isTombstone && f.behindStream(delRV, delErr) {
		// Out of order whatever the cached state, which may be malformed
		// and so not comparable with it: a replay of an older deletion.
		f.reject("delete", obj, delRVs, f.tracker.Current().String())
		return nil
	}
	if !exists && !isTombstone && f.notNewerThanStream(delRV, delErr) {
		// The key is gone already; a deletion not newer than the stream
		// (every event has a revision of its own) is a duplicate or a
		// replay of one that handlers have heard of.
		f.reject("delete", obj, delRVs, f.tracker.Current().String())
		return nil
	}
	if !exists && !isTombstone && delErr != nil && delRVs != "" {
		// The key is gone already and the deletion's resource version is
		// malformed (the Guard lets such events through), so it cannot be
		// ordered: a duplicate of one applied, say. Handlers' views follow
		// the indexer, so none of them holds the key: nothing to tell.
		// (Unstamped objects, from fake clientsets, are delivered as
		// client-go does.)
		if logger := f.logger.V(4); logger.Enabled() {
			logger.Info("Skipped a deletion of an object not cached, with a malformed resource version", "object", klog.KObj(asMeta(obj)), "resourceVersion", delRVs)
		}
		return nil
	}
	if isTombstone {
		obj = tombstone
	}
	if err := f.indexer.Delete(obj); err != nil {
		return err
	}
	if exists {
		f.cachedKeys.Add(-1)
	}
	if !isTombstone && delErr == nil { // a tombstone's state is not the deletion's resource version
		f.observeEvent(delRV)
	}
	f.processor.Distribute(handlers.Notification{Kind: handlers.Delete, OldObj: obj}, false)
	return nil
}

// replaceAll applies a list: the indexer holds exactly the listed objects
// afterwards, handlers hear of deletions first, then of additions and
// updates, as with client-go's informer. A list is the server's state and is
// applied whole; if it moves keys back to older states than cached (a
// deleted key brought back included), or is itself older than the cache,
// that is declared as a regression (once per list) unless the Guard already
// declared it.
func (f *FreshInformer) replaceAll(info toolscache.ReplacedAllInfo, declared, isInInitialList bool) error {
	type change struct{ old, new any }
	changes := make([]change, 0, len(info.Objects))
	listed := make(map[string]struct{}, len(info.Objects))
	var back listRegression
	listRV, listErr := freshness.ParseRV(info.ResourceVersion)
	checkWrites := f.written.len() > 0 && listErr == nil
	// Where the cache stood: it applied every event up to there (none to
	// trust in plain mode, or while a declared restore waits for this list).
	var reached freshness.RV
	if !f.incomparable.Load() && !f.restoring {
		reached = f.tracker.Current()
	}
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
		case old == nil && passed(resourceVersion(obj), reached):
			// Not cached, at a state the cache had passed: the cache
			// applied that state's event, so it applied the key's deletion
			// too, and the list brings the key back (etcd restored, with a
			// bumped revision, to before the deletion).
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
	f.cachedKeys.Store(int64(len(listed)))
	// The list is the state at its resource version: no zone behind it.
	f.endZone()
	slices.Sort(back.sample) // a watch-list's objects come in no set order
	f.observeList(info.ResourceVersion, back, declared)
	if len(f.declare) > 0 && f.declareBarrier == nil {
		// Handlers hear of keys going back only once the regression is
		// declared (declareFound lifts the barrier).
		f.declareBarrier = make(chan struct{})
		f.processor.Distribute(handlers.Notification{Kind: handlers.Barrier, NewObj: f.declareBarrier}, false)
	}
	for _, g := range gone {
		f.processor.Distribute(handlers.Notification{Kind: handlers.Delete, OldObj: g}, false)
	}
	for _, c := range changes {
		if c.old == nil {
			f.processor.Distribute(handlers.Notification{Kind: handlers.Add, NewObj: c.new, InitialList: isInInitialList}, false)
			continue
		}
		same := resourceVersion(c.old) == resourceVersion(c.new)
		f.processor.Distribute(handlers.Notification{Kind: handlers.Update, OldObj: c.old, NewObj: c.new}, same)
	}
	return nil
}

// behindStream reports whether an event at rv is older than what the
// stream delivered: a stream's resource versions only grow, so it is out of
// order, whether or not its key is cached. applyMu is held.
func (f *FreshInformer) behindStream(rv freshness.RV, err error) bool {
	return err == nil && !f.incomparable.Load() && f.streamCompare(rv) > 0
}

// notNewerThanStream reports whether an event at rv is not newer than what
// the stream delivered. For a key the cache does not hold, that is a replay
// or a duplicate: every event has a resource version of its own. applyMu
// is held.
func (f *FreshInformer) notNewerThanStream(rv freshness.RV, err error) bool {
	return err == nil && !f.incomparable.Load() && f.streamCompare(rv) >= 0
}

// streamCompare compares the stream's position with rv: the applied
// resource version's, or, behind a snapshot that moved it further, the
// newest the stream delivered (snapshot.go). applyMu is held.
func (f *FreshInformer) streamCompare(rv freshness.RV) int {
	if !f.zone.end.IsZero() {
		return f.zone.stream.Compare(rv)
	}
	return f.tracker.Compare(rv)
}

// observeEvent advances freshness to an applied event's or bookmark's
// resource version. applyMu is held.
func (f *FreshInformer) observeEvent(rv freshness.RV) {
	f.recent.add(rv)
	f.observe(rv)
}

// observe advances freshness to an applied resource version; while a
// declared restore waits for its relist, only that list moves it.
// applyMu is held.
func (f *FreshInformer) observe(rv freshness.RV) {
	f.streamAt(rv)
	if f.incomparable.Load() && f.startOnEvent {
		// The first comparable resource version after a list at "0":
		// the stream is comparable from here on.
		f.startOnEvent = false
		f.incomparable.Store(false)
		f.tracker.Reset(rv)
		return
	}
	if f.incomparable.Load() || f.restoring {
		return
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
// applyMu is held.
func (f *FreshInformer) observeList(s string, back listRegression, declared bool) {
	defer f.outage.listed(&f.tracker, f.listsTaken) // once the tracker holds the list's RV
	restoring := f.restoring
	f.restoring = false // this is the relist (apply drops the others)
	rv, err := freshness.ParseRV(s)
	if s == "0" {
		// No position (a fake source listing nothing; API servers never
		// list at "0"): waits block until the first comparable event or
		// bookmark starts freshness.
		f.incomparable.Store(true)
		f.startOnEvent = true
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
	f.zone.stream = rv
	wasIncomparable := f.incomparable.Swap(false)
	var prev freshness.RV // what the cache had applied; none in plain mode
	if !wasIncomparable {
		prev = f.tracker.Current()
	}
	found := func(reason reflector.RegressionReason) {
		f.declare = append(f.declare, reflector.Regression{Reason: reason, ListResourceVersion: s, Floor: prev.String(),
			Keys: back.keys, WritesLost: back.lostWrites, SampleKeys: back.sample})
		declared = true
	}
	switch {
	case wasIncomparable || restoring:
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
		f.holdUntilDeclared()
		f.tracker.Advance(rv)
	}
	if rv.Compare(prev) < 0 || restoring || back.keys > 0 || back.lostWrites > 0 {
		f.written.reset() // the history was rewritten: old writes say nothing of it
	} else {
		f.written.pruneReached(rv)
	}
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
		f.recent.reset()
	}
}

// passed reports whether rv is comparable and not newer than reached (none
// when zero).
func passed(rv string, reached freshness.RV) bool {
	in, err := freshness.ParseRV(rv)
	return err == nil && !reached.IsZero() && in.Compare(reached) <= 0
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
