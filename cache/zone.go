package cache

import (
	"sync/atomic"

	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/handlers"
)

// The snapshot zone: the one place the apply path treats the stream behind
// a snapshot. Its rules, and why:
//
//   - What it is. A snapshot that holds exactly the cached keys at the
//     cached resource versions moves the applied resource version to its
//     own, L, past events the stream has not delivered yet (internal/prove,
//     cacheView.Proved sets end). Every write gives its object a resource
//     version of its own, so those events, in (stream, L], can only concern
//     keys created and deleted again before L: keys the snapshot shows
//     gone and the indexer never holds.
//   - The indexer. It already holds the state at L, so a zone event leaves
//     it alone (zoneEvent): applied, it would bring back a key the server
//     deleted. Such an event is neither out of order nor a fault; it is
//     counted (ProbeStats.BehindSnapshot).
//   - Handlers. They hear of zone events as client-go's informer would
//     tell them (add, update, delete, in order), since its handlers hear of
//     every change the stream carries. A key whose deletion the stream
//     skips (its watch resumed past L) leaves their view with a tombstone
//     once the stream passes L (endZone), as a relist would tell them.
//     This is the one place handlers hear of a key the indexer never held.
//     client-go's handlers hear of every event its stream carries, each
//     once it is applied; here the indexer is already past these events.
//     Dropping them would keep "handlers hear only what the indexer held",
//     but handlers that count or react to changes (creations, say) would
//     miss objects client-go's would have told them of, and only because a
//     probe ran: the zone keeps handlers' view the stream's.
//   - Ordering. Until the stream passes L, events are ordered against what
//     the stream delivered (stream), not against the applied L
//     (streamCompare in apply.go): an event in the zone is newer than the
//     stream, however far applied has moved.
//   - The end. A list, a restore, or the stream reaching L ends the zone
//     (endZone); an event of a zone key applied outside the zone (a
//     malformed resource version, or past L) takes the key out of it
//     (unghost), so handlers' view of it follows the indexer from then on.
//
// All of it runs under applyMu, on the apply path.

// snapshotZone is the stretch of the informer's stream that a snapshot
// moved the applied resource version past: events in (stream, end] change
// keys created and deleted again before the snapshot. Under applyMu.
type snapshotZone struct {
	stream freshness.RV   // the newest resource version the stream delivered
	end    freshness.RV   // the snapshot's; zero when the stream is past it
	ghosts map[string]any // zone keys' newest states, for handlers' old objects
	behind atomic.Uint64  // zone events (ProbeStats.BehindSnapshot); read without applyMu
}

// streamAt records that the stream delivered rv (an event, a bookmark, a
// list), ending the zone once it is past the snapshot. applyMu is held.
func (f *FreshInformer) streamAt(rv freshness.RV) {
	z := &f.zone
	if rv.Compare(z.stream) > 0 {
		z.stream = rv
	}
	if !z.end.IsZero() && z.stream.Compare(z.end) >= 0 {
		f.endZone()
	}
}

// endZone ends the snapshot zone. A zone key whose deletion handlers never
// heard of (the watch resumed past it) is deleted from their view with a
// tombstone, as a relist would; a handler added since gets it too, though
// it never heard of the key (the indexer never held it). applyMu is held.
func (f *FreshInformer) endZone() {
	z := &f.zone
	for key, obj := range z.ghosts {
		f.processor.Distribute(handlers.Notification{Kind: handlers.Delete, OldObj: toolscache.DeletedFinalStateUnknown{Key: key, Obj: obj}}, false)
	}
	z.end, z.ghosts = freshness.RV{}, nil
}

// unghost takes obj's key out of the zone's keys when an event of it is
// applied outside the zone (its resource version is malformed, or past
// the snapshot): from then on handlers' view of the key follows that
// event, and the zone's end owes them no tombstone for it. It returns the
// key's state handlers hold, if it was a zone key. applyMu is held.
func (f *FreshInformer) unghost(obj any) (state any, ok bool) {
	z := &f.zone
	if len(z.ghosts) == 0 {
		return nil, false
	}
	key, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return nil, false
	}
	state, ok = z.ghosts[key]
	delete(z.ghosts, key)
	return state, ok
}

// zoneEvent handles a watch event at rv if it lies in the snapshot zone
// and its key is not cached: the cache's state already includes it (see
// the package comment above), so the indexer is left alone and handlers hear of it
// as client-go's would. It is neither out of order nor a fault. It reports
// whether the event was the zone's. applyMu is held.
func (f *FreshInformer) zoneEvent(kind handlers.Kind, obj any, rv freshness.RV, rvErr error) bool {
	z := &f.zone
	if rvErr != nil || z.end.IsZero() || rv.Compare(z.stream) <= 0 || rv.Compare(z.end) > 0 {
		return false
	}
	key, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return false
	}
	if _, cached, _ := f.indexer.GetByKey(key); cached {
		// Not a key the snapshot showed gone: the stream brought it
		// (with a malformed resource version). Applied as any event.
		return false
	}
	z.behind.Add(1)
	f.recent.Add(rv)
	old, known := z.ghosts[key]
	switch kind {
	case handlers.Delete:
		delete(z.ghosts, key)
		f.processor.Distribute(handlers.Notification{Kind: handlers.Delete, OldObj: obj}, false)
	default:
		if z.ghosts == nil {
			z.ghosts = map[string]any{}
		}
		z.ghosts[key] = obj
		if known {
			f.processor.Distribute(handlers.Notification{Kind: handlers.Update, OldObj: old, NewObj: obj}, false)
		} else {
			f.processor.Distribute(handlers.Notification{Kind: handlers.Add, NewObj: obj}, false)
		}
	}
	f.streamAt(rv)
	return true
}
