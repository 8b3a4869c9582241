// Package cache provides FreshInformer, a client-go SharedIndexInformer that
// knows how fresh its cache is, and drop-in informer factories built on it.
//
// # The pipeline
//
//	API server
//	   │ list / watch-list / watch        (requests raised to the floor,
//	   ▼                                   lists ask for NotOlderThan)
//	Reflector (client-go)
//	   │ Replace, Add/Update/Delete, Bookmark
//	   ▼
//	guarded queue (reflector.Guard + an atomic RealFIFO)
//	   │   refuses lists older than the floor; skips events and bookmarks
//	   │   whose RV is implausible, bookmarks whose RV is malformed; raises the
//	   │   delivered part of the floor
//	   ▼
//	apply (one goroutine, stream order, under one lock)
//	   │   rejects events older than the cached object or than the
//	   │   applied RV; declares keys that a list moves back
//	   ▼
//	indexer ──▶ tracker ──▶ handlers
//	            (WaitForFreshness waiters wake here)
//
// Every change is written to the indexer before the tracker moves, and the
// tracker moves before handlers hear of the change: when WaitForFreshness(rv)
// returns nil, every event up to rv that the informer's selector admits is in
// the indexer.
//
// # When the resource version advances
//
// The tracker (LastObservedResourceVersion, and the indexer's
// LastStoreSyncResourceVersion) moves to:
//
//   - an applied event's RV, once the object is in (or out of) the indexer;
//   - a bookmark's RV, once every event in front of it on the stream has been
//     applied (the queue is FIFO, so that is when the bookmark is reached);
//   - a list's RV, once the whole list has replaced the indexer.
//
// It never moves back, with one exception: a declared regression (the server
// went back in time, see below) resets it to the accepted list's RV, or, when
// a probe proves the server is behind, to none until the relist is applied.
//
// The guard's floor is the highest RV the queue has delivered or the indexer
// has applied; an older event or bookmark never lowers it. A list older than
// the floor is refused and retried; a consistent list below it, a list that
// brings keys back to older states, a list past a write recorded with
// RecordWrittenObject that holds the written key older (the write was lost),
// a recorded write confirmed below it, and older lists served for longer
// than AcceptRegressionAfter are declared regressions: logged at error level,
// counted (Stats.Regressions), reported to the OnRegression callback, never
// silent, and declared before the waiters the regressing list releases. A single event with a
// malformed RV is counted and applied without advancing freshness; a
// bookmark with one, and an event or bookmark with an implausible RV (see
// reflector.Plausible), is counted and skipped. Only a list RV that cannot
// be ordered, or events with no RV at all (a fake clientset's), switch the
// informer to a plain informer, until a comparable list arrives.
//
// # Concurrency
//
// FreshInformer is safe for concurrent use. WaitForFreshness,
// LastObservedResourceVersion, Stats and the indexer's read methods may be
// called from any goroutine; event handlers run on one goroutine per handler,
// as with client-go.
package cache
