package cache

import (
	"fmt"
	"slices"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/guard"
	"github.com/freshinformer/freshinformer/internal/handlers"
	"github.com/freshinformer/freshinformer/internal/listdiff"
	"github.com/freshinformer/freshinformer/internal/resources"
	"github.com/freshinformer/freshinformer/internal/trust"
	"github.com/freshinformer/freshinformer/reflector"
)

// handleDeltas is the controller's Process function: it applies one queue
// item to the indexer, submits its resource version to the trust state,
// then notifies handlers.
func (f *FreshInformer) handleDeltas(obj any, isInInitialList bool) error {
	deltas, ok := obj.(toolscache.Deltas)
	if !ok {
		return fmt.Errorf("freshinformer: queue item is %T, not Deltas", obj)
	}
	return f.handleBatch(deltas, isInInitialList)
}

// handleBatch is the controller's ProcessBatch function: a run of
// changes to distinct keys, popped from the queue at once (client-go's
// InOrderInformersBatchProcess), applied in order. A list that moves the
// cache back is declared before the indexer holds it (declareFound); then
// the callbacks the batch released run, once applyMu is released.
func (f *FreshInformer) handleBatch(deltas []toolscache.Delta, isInInitialList bool) error {
	f.applyMu.Lock()
	defer f.unlockApply() // also when a transform or IndexFunc panics
	f.awaitDeclarations()
	for _, d := range deltas {
		if err := f.apply(d, isInInitialList); err != nil {
			f.log().Error(err, "Failed to apply a change to the cache", "type", d.Type)
			return err
		}
	}
	return nil
}

// unlockApply releases applyMu, then declares the regressions found under
// it, wakes the waits released meanwhile and runs the freshness callbacks
// (AfterFreshness, WhenFresh, write-visible metrics), on this goroutine
// and with no informer lock held: a callback may call back into the
// informer. Every section that holds applyMu ends with it. Waits wake
// here, after the batch's handlers were told, so that the scheduler runs
// the last goroutine readied, a woken wait, ahead of their deliveries.
func (f *FreshInformer) unlockApply() {
	declare, due := f.declare, f.due
	f.declare, f.due = nil, nil
	if len(declare) == 0 {
		f.applyMu.Unlock()
		due.Run()
		return
	}
	done := make(chan struct{})
	f.declaring = done
	f.applyMu.Unlock()
	func() {
		defer close(done) // also when OnRegression panics
		for _, r := range declare {
			f.declareRegression(r)
		}
		d, _ := f.trust.Submit(trust.Regression{Step: trust.Declared, N: len(declare)})
		due = append(due, d...)
	}()
	due.Run()
}

// awaitDeclarations holds the apply goroutine until the regressions
// another section found are declared. A restore found off the stream (a
// probe, Sync, a restore check) is declared once applyMu is released, and
// the relist it asks for may be queued meanwhile: it must not reach the
// indexer, nor so handlers, before the restore is counted and reported.
// applyMu is held on entry and on return.
func (f *FreshInformer) awaitDeclarations() {
	for ch := f.declaring; ch != nil; ch = f.declaring {
		f.applyMu.Unlock()
		<-ch
		f.applyMu.Lock()
		if f.declaring == ch {
			f.declaring = nil
		}
	}
}

// declareFound declares the regressions found so far, before the change
// that moves the cache back is written to the indexer: counted, logged and
// reported to OnRegression first, so that a reader who sees an older state
// in the indexer and then reads Stats.Regressions finds it declared.
// OnRegression runs outside the informer's locks, so applyMu is released
// meanwhile: nothing else writes the indexer (only the apply goroutine
// does), and the regression found has voided the proofs that could run
// (trust.Found). applyMu is held on entry and on return.
func (f *FreshInformer) declareFound() {
	declare := f.declare
	f.declare = nil
	func() {
		f.applyMu.Unlock()
		defer f.applyMu.Lock() // also when OnRegression panics
		for _, r := range declare {
			f.declareRegression(r)
		}
	}()
	f.submit(trust.Regression{Step: trust.Declared, N: len(declare)})
}

// submit hands e to the trust state and keeps what it released, for
// unlockApply; it reports whether e counted (trust.Evidence). applyMu held.
func (f *FreshInformer) submit(e trust.Evidence) (taken bool) {
	due, taken := f.trust.Submit(e)
	f.due = append(f.due, due...)
	return taken
}

// found records a regression found under applyMu: every wait is held
// until unlockApply has declared it. rewritten says the cache's history
// changed (a list replaced it), which voids proofs in flight.
func (f *FreshInformer) found(r reflector.Regression, rewritten bool) {
	slices.Sort(r.SampleKeys)
	f.declare = append(f.declare, r)
	f.submit(trust.Regression{Step: trust.Found, Rewritten: rewritten})
}

// declareRegression declares r: an error-level log, Stats.Regressions and
// the OnRegression callback (whose panic is handled as a handler's). It is
// the one path by which a regression is made known.
func (f *FreshInformer) declareRegression(r reflector.Regression) {
	f.counts.regressions.Add(1)
	kv := []any{"reason", r.Reason, "listResourceVersion", r.ListResourceVersion, "floor", r.Floor}
	if r.Refused > 0 {
		kv = append(kv, "refused", r.Refused, "since", r.Since)
	}
	if r.Keys > 0 || r.WritesLost > 0 {
		kv = append(kv, "keys", r.Keys, "writesLost", r.WritesLost, "sampleKeys", r.SampleKeys)
	}
	f.log().Error(nil, "Declared regression: the cache follows the server back in time (etcd restored from a backup?)", kv...)
	if f.cfg.onRegression != nil {
		func() {
			defer utilruntime.HandleCrash()
			f.cfg.onRegression(r)
		}()
	}
}

func (f *FreshInformer) apply(d toolscache.Delta, isInInitialList bool) error {
	switch d.Type {
	case toolscache.ReplacedAll:
		return f.applyList(d, isInInitialList)
	case toolscache.SyncAll:
		for _, obj := range f.indexer.List() {
			f.processor.Distribute(handlers.Notification{Kind: handlers.Update, OldObj: obj, NewObj: obj}, true)
		}
		return nil
	}
	if f.trust.Taken(false, trust.Stamp{}) == trust.Drop {
		// A restore was declared: what the queue still holds from before
		// its relist is of the history the server lost, or of a watch
		// resumed on the restored one: the relist replaces it all.
		return nil
	}
	switch d.Type {
	case toolscache.Bookmark:
		info, _ := d.Object.(toolscache.BookmarkInfo)
		f.counts.bookmarks.Add(1)
		if rv, err := freshness.ParseRV(info.ResourceVersion); err == nil {
			f.observe(rv)
		}
		return nil
	case toolscache.Deleted:
		return f.delete(d.Object)
	default: // Added, Updated; Sync and Replaced come only from non-atomic queues
		return f.upsert(d.Object, isInInitialList)
	}
}

// applyList applies a list taken from the queue, as the trust state
// decides: dropped if requested before a declared restore, and, if it is
// that restore's relist and is not applied after all (a key error, a
// panicking IndexFunc), asked for again.
func (f *FreshInformer) applyList(d toolscache.Delta, isInInitialList bool) error {
	admitted := f.guard.TakeList()
	take := f.trust.Taken(true, admitted.Stamp)
	if take == trust.Drop {
		return nil
	}
	applied := false
	if take == trust.Relist {
		defer func() {
			if !applied {
				f.guard.RequestRelist()
			}
		}()
	}
	info, ok := d.Object.(toolscache.ReplacedAllInfo)
	if !ok {
		return fmt.Errorf("ReplacedAll delta holds %T", d.Object)
	}
	err := f.replaceAll(info, admitted, isInInitialList)
	applied = err == nil
	return err
}

// unstamped switches the informer to plain mode (until the next comparable
// list) for an event whose object has no resource version at all: a fake
// clientset's, which the Guard let through.
func (f *FreshInformer) unstamped(rv string) {
	if rv == "" {
		f.markIncomparable(errFake("objects carry no resource version"), false)
	}
}

// errFake tells a caller whose wait fails for want of ordered resource
// versions where they went: a fake clientset, and which fake to use.
func errFake(what string) error {
	return trust.FromFake{Err: fmt.Errorf("%s: not an API server's (client-go's fake clientsets stamp none, or keep the client's; package freshtest has fakes that stamp their own): %w", what, freshness.ErrIncomparable)}
}

// upsert applies an added or updated object unless older than the cached.
func (f *FreshInformer) upsert(obj any, isInInitialList bool) error {
	old, exists, err := f.indexer.Get(obj)
	if err != nil {
		return err
	}
	newRVs := resources.ResourceVersion(obj)
	newRV, newErr := freshness.ParseRV(newRVs)
	f.unstamped(newRVs)
	if f.zone.Event(handlers.Update, obj, newRV, newErr) {
		return nil
	}
	if !exists {
		// Nothing cached to compare with, but a stream's resource versions
		// only grow and every event has one of its own: an add not newer
		// than what the cache applied is a replay (an object deleted since
		// would come back to life; its deletion may have been malformed, so
		// that freshness stayed at the add's own resource version).
		if place, at := f.placed(newRV, newErr); place == trust.At || place == trust.Behind {
			f.reject("add", obj, newRVs, at.String())
			return nil
		}
		if err := f.indexer.Add(obj); err != nil {
			return err
		}
		f.prover.KeysChanged(1)
		ghost, wasGhost := f.zone.Unghost(obj) // before observeEvent may end the zone
		if newErr == nil {
			f.observeEvent(newRV)
		}
		if wasGhost { // handlers hold the key's state from behind the snapshot
			f.processor.Distribute(handlers.Notification{Kind: handlers.Update, OldObj: ghost, NewObj: obj}, false)
			return nil
		}
		f.processor.Distribute(handlers.Notification{Kind: handlers.Add, NewObj: obj, InitialList: isInInitialList}, false)
		return nil
	}
	oldRVs := resources.ResourceVersion(old)
	if f.older(newRV, newErr, oldRVs) {
		f.reject("update", obj, newRVs, oldRVs)
		return nil
	}
	if place, at := f.placed(newRV, newErr); newRVs != oldRVs && place == trust.Behind {
		f.reject("update", obj, newRVs, at.String())
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
	delRVs := resources.ResourceVersion(obj)
	delRV, delErr := freshness.ParseRV(delRVs)
	if !isTombstone {
		f.unstamped(delRVs)
		if f.zone.Event(handlers.Delete, obj, delRV, delErr) {
			return nil
		}
	}
	if f.staleDelete(obj, old, exists, isTombstone, delRV, delErr) {
		return nil
	}
	// A key created behind a snapshot is in handlers' views, not in the
	// indexer: they hear of its deletion here, once.
	_, wasGhost := f.zone.Unghost(obj)
	if !exists && !wasGhost && !isTombstone && delErr != nil && delRVs != "" {
		// Gone already, and a malformed deletion (the Guard lets it
		// through) cannot be ordered: a duplicate, say. Handlers' views
		// follow the indexer: nothing to tell. (A fake's unstamped deletion
		// is delivered, as client-go does.)
		if logger := f.log().V(4); logger.Enabled() {
			logger.Info("Skipped a deletion of an object not cached, with a malformed resource version", "object", klog.KObj(resources.Meta(obj)), "resourceVersion", delRVs)
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
		f.prover.KeysChanged(-1)
	}
	if !isTombstone && delErr == nil { // a tombstone's state is not the deletion's resource version
		f.observeEvent(delRV)
	}
	f.processor.Distribute(handlers.Notification{Kind: handlers.Delete, OldObj: obj}, false)
	return nil
}

// staleDelete reports whether a deletion of obj (a tombstone's last
// state, or nil) at delRV is out of order, and rejects it: older than the
// cached old, or, for a deletion from the stream, not newer than what the
// stream delivered. applyMu is held.
func (f *FreshInformer) staleDelete(obj, old any, exists, isTombstone bool, delRV freshness.RV, delErr error) bool {
	delRVs := resources.ResourceVersion(obj)
	if exists && obj != nil {
		if oldRVs := resources.ResourceVersion(old); f.older(delRV, delErr, oldRVs) {
			f.reject("delete", obj, delRVs, oldRVs)
			return true
		} else if delRVs == oldRVs && delErr == nil && !isTombstone {
			// A deletion is a write of its own, past the object's last: at the
			// object's own, writes share versions (a fake's) and none can be ordered.
			f.markIncomparable(errFake("a deletion came at its object's own resource version "+delRVs), false)
		}
	}
	// Not newer than the stream, whatever the cached state (which may be
	// malformed, a key created again): every event has a resource version
	// of its own, so this is a duplicate or a replay of one handlers heard.
	if place, at := f.placed(delRV, delErr); !isTombstone && (place == trust.At || place == trust.Behind) {
		f.reject("delete", obj, delRVs, at.String())
		return true
	}
	return false
}

// replaceAll applies a list: the indexer holds exactly the listed objects
// afterwards, handlers hear of deletions first, then of additions and
// updates, as with client-go's informer. A list is the server's state and is
// applied whole; if it moves keys back to older states than cached (a
// deleted key brought back included), or is itself older than the cache,
// that is declared as a regression (once per list) unless the Guard did.
func (f *FreshInformer) replaceAll(info toolscache.ReplacedAllInfo, admitted guard.ListAdmission, isInInitialList bool) error {
	changes, listed, back, err := listdiff.Diff(f.indexer, info, f.listedOver(), &f.written)
	if err != nil {
		return err
	}
	var gone []toolscache.DeletedFinalStateUnknown
	for _, key := range f.indexer.ListKeys() {
		if _, ok := listed[key]; !ok {
			if old, exists, _ := f.indexer.GetByKey(key); exists {
				gone = append(gone, toolscache.DeletedFinalStateUnknown{Key: key, Obj: old})
			}
		}
	}
	// Declared before the indexer moves back, and so before handlers hear
	// of it (doc.go, "When a wait returns").
	if f.listFound(info.ResourceVersion, back, admitted) {
		f.declareFound()
	}
	if err := f.indexer.Replace(info.Objects, info.ResourceVersion); err != nil {
		return err
	}
	f.prover.KeysListed(len(listed))
	// The list is the state at its resource version: no zone behind it.
	f.zone.End()
	f.observeList(info.ResourceVersion, back, admitted)
	for _, g := range gone {
		f.processor.Distribute(handlers.Notification{Kind: handlers.Delete, OldObj: g}, false)
	}
	for _, c := range changes {
		if c.Old == nil {
			f.processor.Distribute(handlers.Notification{Kind: handlers.Add, NewObj: c.New, InitialList: isInInitialList}, false)
			continue
		}
		same := resources.ResourceVersion(c.Old) == resources.ResourceVersion(c.New)
		f.processor.Distribute(handlers.Notification{Kind: handlers.Update, OldObj: c.Old, NewObj: c.New}, same)
	}
	return nil
}

// placed is where the trust state places an event at rv against the
// stream (trust.Trust.Placed): behind it, an event is out of order
// whether or not its key is cached; at it, a replay or a duplicate for a
// key not cached, every event having a resource version of its own. The
// stream's position is the applied one, or, behind a snapshot that moved
// that further, the newest the stream delivered (internal/snapshotzone).
// It returns the position compared with too. applyMu is held.
func (f *FreshInformer) placed(rv freshness.RV, err error) (trust.Place, freshness.RV) {
	return f.trust.Placed(rv, err, f.zone.Stream())
}

// observeEvent advances freshness to an applied event's resource version.
// applyMu is held.
func (f *FreshInformer) observeEvent(rv freshness.RV) {
	f.recent.Add(rv)
	f.observe(rv)
}

// observe submits an applied event's or bookmark's resource version.
// applyMu is held.
func (f *FreshInformer) observe(rv freshness.RV) {
	f.zone.StreamAt(rv)
	f.stream = trust.Stream{RV: rv}
	f.submit(&f.stream)
}

// listFound finds the regression a list at s brings, before it is
// applied: a list older than the cache reaches here only under a
// regression the Guard declared (or, should the Guard have missed it, one
// found here); back counts the keys the list moves to older states than
// cached or written. It reports whether it found one. applyMu is held.
func (f *FreshInformer) listFound(s string, back listdiff.Back, admitted guard.ListAdmission) bool {
	rv, err := freshness.ParseRV(s)
	if s == "0" || err != nil {
		return false
	}
	prev := f.listedOver()
	found := func(reason reflector.RegressionReason) {
		f.found(reflector.Regression{Reason: reason, ListResourceVersion: s, Floor: prev.String(),
			Keys: back.Keys, WritesLost: back.LostWrites, SampleKeys: back.Sample}, true)
	}
	switch {
	case admitted.Regression != nil:
		r := *admitted.Regression // the Guard's findings, and the keys
		r.Keys, r.WritesLost, r.SampleKeys = back.Keys, back.LostWrites, back.Sample
		f.found(r, true)
	case prev.IsZero():
		return false
	case rv.Compare(prev) < 0:
		found(reflector.RegressionStaleList)
	case back.Keys > 0:
		found(reflector.RegressionKeysWentBack)
	case back.LostWrites > 0:
		found(reflector.RegressionWritesLost)
	default:
		return false
	}
	return true
}

// listedOver is what the cache had applied before a list: none to compare
// with when starting over (trust.Trust.Over). applyMu is held.
func (f *FreshInformer) listedOver() freshness.RV { return f.trust.Over() }

// observeList submits an applied list's resource version (its
// regressions were declared before it was applied: listFound). A list
// older than the cache moves freshness down with it, or a later write with
// a resource version below the old high would look fresh too soon.
// applyMu is held.
func (f *FreshInformer) observeList(s string, back listdiff.Back, admitted guard.ListAdmission) {
	f.recent.Reset()
	if s == "0" {
		f.submit(trust.List{AtZero: true, Stamp: admitted.Stamp})
		return
	}
	rv, err := freshness.ParseRV(s)
	if s == "" || back.Unstamped {
		err = errFake("objects carry no resource version")
	}
	if err != nil {
		f.markIncomparable(err, true)
		return
	}
	f.zone.Listed(rv)
	// Taken: the list ended a restore or moved the cache back.
	if rewritten := f.submit(trust.List{RV: rv, Stamp: admitted.Stamp}); rewritten || back.Keys > 0 || back.LostWrites > 0 {
		f.written.Reset() // the history was rewritten: old writes say nothing of it
	} else {
		f.written.PruneReached(rv)
	}
	if admitted.AfterFailure {
		f.prover.Recovered(admitted.Sent) // probes wait for a server just back
	}
}

// markIncomparable switches the informer to plain mode until a list's
// resource version is comparable again: the server serves resource versions
// that cannot be ordered (some aggregated API servers), or a list (list) or
// event without any, so no freshness can be claimed. Single events with
// malformed resource versions do not get here: the Guard counts and skips
// them. It logs once, when the informer becomes plain. applyMu is held.
func (f *FreshInformer) markIncomparable(err error, list bool) {
	var e trust.Evidence = trust.Stream{Unordered: err}
	if list {
		e = trust.List{Unordered: err}
	}
	if f.submit(e) {
		trust.LogPlain(f.log(), err)
		f.recent.Reset()
	}
}

// older reports whether an incoming state is older than the cached one.
// Resource versions that cannot be ordered pass (counted).
func (f *FreshInformer) older(in freshness.RV, inErr error, cachedRV string) bool {
	cached, err := freshness.ParseRV(cachedRV)
	if inErr != nil || err != nil {
		f.counts.incomparableObjects.Add(1)
		return false
	}
	return in.Compare(cached) < 0
}

func (f *FreshInformer) reject(what string, obj any, rv, cachedRV string) {
	f.counts.outOfOrder.Add(1)
	if logger := f.log().V(4); logger.Enabled() {
		logger.Info("Rejected an out-of-order "+what+": older than the cached object", "object", klog.KObj(resources.Meta(obj)), "resourceVersion", rv, "cachedResourceVersion", cachedRV)
	}
}
