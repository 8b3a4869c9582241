// Package cache provides FreshInformer, a client-go SharedIndexInformer that
// knows how fresh its cache is: it tracks the highest resource version (RV)
// its indexer has applied and lets a caller wait until the cache is at least
// that fresh (WaitForFreshness), without ever moving the cache back in time.
// NewSharedInformerFactory makes them as client-go's factory does (the
// machinery is in package informers); package readyourwrites builds
// read-your-writes for reconcilers on top.
//
// # The pipeline, and where each step lives
//
// A resource version enters, is applied, is awaited and is exported here:
//
//	API server
//	   │ list / watch-list / watch         requests raised to the floor;
//	   ▼                                    lists ask for NotOlderThan
//	Reflector (client-go)
//	   │ Replace, Add/Update/Delete, Bookmark
//	   ▼
//	guarded queue (internal/guard:          ENTERS: refuses lists older than
//	Guard + an atomic RealFIFO)             the floor, skips implausible RVs,
//	   │                                    raises the delivered floor
//	   ▼
//	apply (apply.go: one goroutine,         APPLIED: rejects events older than
//	stream order, under applyMu)            the cached object or the tracker;
//	   │                                    declares keys a list moves back
//	   ▼
//	indexer ──▶ tracker ──▶ handlers       AWAITED: wait.go (WaitForFreshness,
//	            (freshness.Tracker)          Sync, AfterFreshness) wakes here;
//	                                         internal/handlers delivers to them
//
// EXPORTED: metrics.go hands measurements to a MetricsProvider (package
// metrics makes Prometheus series of them). RVs also enter off the stream:
// writes the caller records (recordwrite.go, lostwrites.go), the restore
// check (restorecheck.go) and the quiet-resource probe (quietprobe.go,
// snapshot.go).
// informer.go builds and runs the informer, shared_informer.go holds the
// rest of client-go's SharedIndexInformer, wrap.go wraps an informer built
// elsewhere, options.go is the one place defaults are set.
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
//   - a list's RV, once the whole list has replaced the indexer;
//   - an RV the quiet-resource probe proved the stream holds nothing below,
//     or a snapshot's RV when the cache holds exactly that snapshot's state.
//
// It never moves back, with one exception: a declared regression (the server
// went back in time, see below) resets it to the accepted list's RV, or, when
// a restore check proves the server is behind, to none until the relist is
// applied; until then, what the queue still holds from before that relist,
// lists included, is dropped (it is of the lost history, and the relist
// replaces it).
// While a restore check is in flight, a list's regression waits to
// be declared, or a list or watch request has failed (or a watch the server
// ended well before its timeout is resumed) and no consistent read sent,
// nor list requested, after it has answered (an outage: the server may come
// back from a restored etcd), the tracker is suspended (freshness.Tracker.Suspend): no
// wait is told "fresh" until the question is settled.
//
// The guard's floor is the highest RV the queue has delivered (or a probe
// proved); an older event or bookmark never lowers it. A list older than
// the floor is refused and retried; a consistent list below it, a list that
// brings keys back to older states, a list past a write recorded with
// RecordWrittenObject that holds the written key older (the write was lost),
// a recorded write confirmed below it, and older lists served for longer
// than AcceptRegressionAfter are declared regressions: logged at error level,
// counted (Stats.Regressions), reported to the OnRegression callback, never
// silent, and declared before the waiters the regressing list releases. A
// single event with a malformed RV is counted and applied without advancing
// freshness; a bookmark with one, and an event or bookmark with an
// implausible RV (see reflector.Plausible), is counted and skipped. Only a
// list RV that cannot be ordered, or events with no RV at all (a fake
// clientset's), switch the informer to a plain informer, until a comparable
// list arrives.
//
// # Quiet resources
//
// An informer's applied RV moves with its own stream. On a resource nothing
// writes, the next bookmark comes about a minute later, so a wait for an RV
// returned by a write to another resource would take that long. When waits
// have made no progress for the probe delay, the informer proves freshness
// with the server, by one of two routes (quietprobe.go, snapshot.go).
//
// The snapshot route, for informers of up to WithSnapshotProbeLimit objects
// (DefaultSnapshotProbeLimit) and for any informer of a resource that gets
// no bookmarks, after DefaultSnapshotProbeDelay: one
// consistent list through the informer's ListerWatcher (same namespace and
// selectors; served from the apiserver's watch cache on Kubernetes 1.31+,
// from etcd for resources without one), of at most one object more than
// the cache holds, compared key by key with the cache under applyMu. Every
// write gives its object an RV of its own, so if the list holds exactly
// the cached keys at the cached RVs, the cache holds the state at the
// list's RV L, and the tracker and the guard's floor move to L: one round
// trip. Any difference proves nothing, and the bookmark route follows,
// reusing L. What a snapshot cannot show: a key created and deleted between
// the applied RV and L is in neither, yet its events are still on the
// informer's stream. Those events (RVs above what the stream delivered and
// up to L) are not faults: the indexer, which already holds a newer state,
// is left alone, and handlers hear of them as client-go's informer would
// tell them (add, update, delete, in order; a key whose deletion the
// stream skips, because its watch resumed past L, leaves with a tombstone
// once the stream passes L). ProbeStats.BehindSnapshot counts them. Until
// the stream passes L, events are ordered against what it delivered, not
// against L. Sync takes the same route: on a small informer it is that one
// list.
//
// The bookmark route, for larger informers, after DefaultQuietProbeDelay:
//
//  1. A consistent list with limit=1 through the informer's ListerWatcher
//     gives the server's current RV R (a quorum read; on Kubernetes 1.31+ it
//     also brings the apiserver's watch cache for the resource up to R).
//  2. An auxiliary watch through the same ListerWatcher (same namespace and
//     selectors) from the applied RV A, with bookmarks and a 3 s timeout: the
//     apiserver sends a bookmark to such a watcher about 2 s before its
//     deadline. A bookmark B after events e1 < ... < ek proves there is no
//     event in (ek, B] (or in (A, B] without events), and the events it
//     shows are ones the informer's own stream delivers too.
//  3. Once the tracker has applied ek (at once if there were no events; an
//     event received but still queued is waited for), the tracker advances
//     to B and the guard's floor rises with it. So the applied RV only
//     moves past events that are already in the indexer: guarantee 1 holds.
//
// Resources the apiserver serves without a watch cache never get bookmarks.
// A large informer's first probe learns it (its auxiliary watch ends
// without one) and has the informer relist, the list's RV, at least R,
// becoming the applied one in stream order; from then on its probes take
// the snapshot route, which lists as much as a relist without the
// Reflector's backoff. Cost:
// nothing while no wait is pending (no goroutine, no timer); while waits
// are pending, one timer per informer, and at most one probe at a time
// however many callers wait.
//
// The restore check (restorecheck.go) reads the same snapshot, of up to the
// snapshot limit's objects (DefaultSnapshotProbeLimit where the route is
// off), without moving the tracker where the route is off: a key listed at an RV up to the applied one that
// the cache does not hold at that RV shows the server's history went back,
// even when new writes have carried a restored server past the floor.
//
// # Glossary
//
// Resource version positions, oldest to newest as a change travels:
//
//   - newest known (NewestKnownResourceVersion): the newest RV the informer
//     knows the server reached: from its stream, from recorded writes, from
//     probes. The lag metric is the distance to it.
//   - delivered: the newest RV the queue has handed on (the guard's own).
//   - floor: where requests must start and lists must reach: the delivered
//     RV, or one a probe proved (internal/guard).
//   - last sync (LastSyncResourceVersion): client-go's: what the Reflector
//     last received, applied or not.
//   - applied, or last observed (LastObservedResourceVersion; the
//     indexer's LastStoreSyncResourceVersion reports the same; the
//     tracker's Current): the newest RV the indexer holds everything up to.
//     It is the one high-water mark: waits compare against it.
//
// Sync: HasSynced means the initial list is applied (client-go's sense);
// Sync(ctx) is a read barrier (fresh as the server was when called);
// a resync re-delivers cached objects to handlers (client-go's sense).
//
// Probe: a request off the informer's own stream. The quiet-resource probe
// (quietprobe.go, ProbeStats) proves a quiet stream fresh; the restore check
// (restorecheck.go, Stats.RestoreProbes) asks whether the server went back
// in time; ServerResourceVersion is the consistent read both start with.
//
// Scope: what an informer lists: a namespace and label and field selectors
// (Selector). Two informers of one resource with different scopes see
// different objects and have their own freshness.
//
// # Concurrency and lock order
//
// FreshInformer is safe for concurrent use. WaitForFreshness,
// LastObservedResourceVersion, Stats and the indexer's read methods may be
// called from any goroutine; event handlers run on one goroutine per handler,
// as with client-go; freshness callbacks (AfterFreshness, write-visible
// metrics) run with no informer lock held and may call back into it.
//
// Locks are taken in this order, never the reverse:
//
//	FreshInformer.mu → applyMu → handlers.Processor.mu → Listener.mu
//	                   applyMu → Guard.mu, Tracker.mu
//	afterFreshCall.mu → quietProbe.mu → Guard.mu, Tracker.mu
//	applyMu → outage.mu → Tracker.mu
//	restore check probe.Runner.mu → Tracker.mu (Suspend; Resume runs after it)
//	quietProbe.mu → its probe.Runner.mu
//	writeVisibility.mu → Tracker.mu, metrics.Provider.mu
//
// Guard.mu, Tracker.mu and newestMu are leaves: none calls out while held
// (the tracker runs callbacks after unlocking; the guard declares
// regressions after unlocking).
package cache
