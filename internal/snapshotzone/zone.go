// Package snapshotzone is the apply path's side of a snapshot proof: the
// one place a FreshInformer treats the stretch of its stream that a
// snapshot moved the applied resource version past. Its rules, and why:
//
//   - What it is. A snapshot that holds exactly the cached keys at the
//     cached resource versions moves the applied resource version to its
//     own, L, past events the stream has not delivered yet (internal/prove;
//     cache's cacheView.Proved calls Begin). Every write gives its object
//     a resource version of its own, so those events, in (stream, L], can
//     only concern keys created and deleted again before L: keys the
//     snapshot shows gone and the indexer never holds.
//   - The indexer. It already holds the state at L, so a zone event leaves
//     it alone (Event): applied, it would bring back a key the server
//     deleted. Such an event is neither out of order nor a fault; it is
//     counted (ProbeStats.BehindSnapshot).
//   - Handlers. They hear of zone events as client-go's informer would
//     tell them (add, update, delete, in order), since its handlers hear of
//     every change the stream carries. A key whose deletion the stream
//     skips (its watch resumed past L) leaves their view with a tombstone
//     once the stream passes L (End), as a relist would tell them.
//     This is the one place handlers hear of a key the indexer never held.
//     client-go's handlers hear of every event its stream carries, each
//     once it is applied; here the indexer is already past these events.
//     Dropping them would keep "handlers hear only what the indexer held",
//     but handlers that count or react to changes (creations, say) would
//     miss objects client-go's would have told them of, and only because a
//     probe ran: the zone keeps handlers' view the stream's.
//   - Ordering. Until the stream passes L, events are ordered against what
//     the stream delivered (Stream; the apply path's placed), not against
//     the applied L: an event in the zone is newer than the stream,
//     however far applied has moved.
//   - Unplaced events. An event with a malformed resource version, of a
//     key not cached, cannot be placed: in (stream, L], it is of a key
//     the server deleted before L, and applied it would put a state older
//     than L in an indexer that waits up to L already trust; past L, it is
//     the key's newest state. The zone applies nothing and tells nobody:
//     it asks its owner for a relist, which settles the key either way,
//     and waits are held until the list is applied (Hooks).
//   - The end. A list, a restore, or the stream reaching L ends the zone
//     (End); an event of a zone key applied outside the zone (past L)
//     takes the key out of it (Unghost), so handlers' view of it follows
//     the indexer from then on.
//
// All of it runs under the informer's apply lock, on the apply path.
package snapshotzone

import (
	"sync/atomic"

	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/handlers"
	"github.com/freshinformer/freshinformer/internal/recorded"
)

// Zone is the stretch of an informer's stream that a snapshot moved the
// applied resource version past: events in (stream, end] change keys
// created and deleted again before the snapshot. Under the informer's
// apply lock, but for Behind.
type Zone struct {
	stream freshness.RV   // the newest resource version the stream delivered
	end    freshness.RV   // the snapshot's; zero when the stream is past it
	ghosts map[string]any // zone keys' newest states, for handlers' old objects
	behind atomic.Uint64  // zone events (ProbeStats.BehindSnapshot); read without the lock

	// relisting: an unplaced event asked for a relist (Hooks.Unplaced),
	// and no list was applied since.
	relisting bool

	handlers *handlers.Processor // told of zone events
	indexer  toolscache.Indexer  // read: a cached key is not a zone key
	recent   *recorded.Recent    // told of zone events' resource versions
	hooks    Hooks
}

// Hooks are what the zone asks of its owner, under the apply lock.
type Hooks struct {
	// Unplaced: an event could not be placed (see the package
	// documentation); relist, and hold waits until Listed.
	Unplaced func()
	// Listed: the list Unplaced asked for (or a later one) is applied.
	Listed func()
}

// Init gives the zone the informer's handlers, indexer, recently applied
// resource versions and hooks, before the informer runs.
func (z *Zone) Init(p *handlers.Processor, indexer toolscache.Indexer, recent *recorded.Recent, hooks Hooks) {
	z.handlers, z.indexer, z.recent, z.hooks = p, indexer, recent, hooks
}

// Begin opens the zone up to end, a snapshot's resource version that
// moved the applied one (the cache holds the snapshot's state).
func (z *Zone) Begin(end freshness.RV) { z.end = end }

// Behind counts the zone events (ProbeStats.BehindSnapshot); it may be
// called without the apply lock.
func (z *Zone) Behind() uint64 { return z.behind.Load() }

// Stream returns the newest resource version the stream delivered while
// a zone is open, against which events are placed; zero when none is.
func (z *Zone) Stream() freshness.RV {
	if z.end.IsZero() {
		return freshness.RV{}
	}
	return z.stream
}

// Listed records that a list at rv was applied: the stream is there, and
// no zone is behind it (End was called).
func (z *Zone) Listed(rv freshness.RV) {
	z.stream = rv
	if z.relisting {
		z.relisting = false
		z.hooks.Listed()
	}
}

// StreamAt records that the stream delivered rv (an event, a bookmark, a
// list), ending the zone once it is past the snapshot.
func (z *Zone) StreamAt(rv freshness.RV) {
	if rv.Compare(z.stream) > 0 {
		z.stream = rv
	}
	if !z.end.IsZero() && z.stream.Compare(z.end) >= 0 {
		z.End()
	}
}

// End ends the zone. A zone key whose deletion handlers never heard of
// (the watch resumed past it) is deleted from their view with a
// tombstone, as a relist would; a handler added since gets it too, though
// it never heard of the key (the indexer never held it).
func (z *Zone) End() {
	for key, obj := range z.ghosts {
		z.handlers.Distribute(handlers.Notification{Kind: handlers.Delete, OldObj: toolscache.DeletedFinalStateUnknown{Key: key, Obj: obj}}, false)
	}
	z.end, z.ghosts = freshness.RV{}, nil
}

// Unghost takes obj's key out of the zone's keys when an event of it is
// applied outside the zone (past the snapshot, or a malformed deletion):
// from then on handlers' view of the key follows that event, and the
// zone's end owes them no tombstone for it. It returns the
// key's state handlers hold, if it was a zone key.
func (z *Zone) Unghost(obj any) (state any, ok bool) {
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

// Event handles a watch event at rv if it lies in the zone and its key is
// not cached: the cache's state already includes it (see the package
// documentation), so the indexer is left alone and handlers hear of it as
// client-go's would. It is neither out of order nor a fault. An add or
// update of a key not cached, with a malformed resource version, while the
// zone is open is unplaced: the zone drops it and asks for a relist
// (Hooks). It reports whether the event was the zone's.
func (z *Zone) Event(kind handlers.Kind, obj any, rv freshness.RV, rvErr error) bool {
	if z.end.IsZero() || rvErr == nil && (rv.Compare(z.stream) <= 0 || rv.Compare(z.end) > 0) {
		return false
	}
	key, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return false
	}
	if _, cached, _ := z.indexer.GetByKey(key); cached {
		// Not a key the snapshot showed gone: the stream brought it
		// (with a malformed resource version). Applied as any event.
		return false
	}
	if rvErr != nil {
		if kind == handlers.Delete { // nothing to apply: the apply path tells a zone key's handlers
			return false
		}
		if !z.relisting {
			z.relisting = true
			z.hooks.Unplaced()
		}
		return true
	}
	z.behind.Add(1)
	z.recent.Add(rv)
	old, known := z.ghosts[key]
	switch kind {
	case handlers.Delete:
		delete(z.ghosts, key)
		z.handlers.Distribute(handlers.Notification{Kind: handlers.Delete, OldObj: obj}, false)
	default:
		if z.ghosts == nil {
			z.ghosts = map[string]any{}
		}
		z.ghosts[key] = obj
		if known {
			z.handlers.Distribute(handlers.Notification{Kind: handlers.Update, OldObj: old, NewObj: obj}, false)
		} else {
			z.handlers.Distribute(handlers.Notification{Kind: handlers.Add, NewObj: obj}, false)
		}
	}
	z.StreamAt(rv)
	return true
}
