// Package cache provides FreshInformer, a client-go SharedIndexInformer that
// knows how fresh its cache is: it tracks the highest resource version (RV)
// its indexer has applied and lets a caller wait until the cache is at least
// that fresh (WaitForFreshness), without ever moving the cache back in time.
// NewSharedInformerFactory makes them as client-go's factory does (the
// machinery is in internal/factory); package readyourwrites builds
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
//	stream order, under applyMu)            the cached object or the stream;
//	   │                                    DECLARES a list that moves keys
//	   │                                    back: counted, then OnRegression,
//	   ▼                                    before the indexer holds it
//	indexer ──▶ trust ──▶ handlers         AWAITED: wait.go (WaitForFreshness,
//	   ▲          ▲ (internal/trust)         Sync, AfterFreshness) wakes here;
//	   │ read     │ evidence                 internal/handlers delivers to them
//	   └──────────┴── provers               PROVEN off the stream: snapshot
//	                  (internal/prove:      compare, bookmark probe, restore
//	                  their own consistent  check, recorded-write check; read
//	                  lists and watches)    and told under applyMu (probes.go)
//
// EXPORTED: metrics.go hands measurements to a MetricsProvider (package
// metrics makes Prometheus series of them). RVs enter off the stream only
// through internal/prove: the quiet-resource probe's two routes (a
// snapshot compared key by key, a bookmark of an auxiliary watch), Sync's
// read, the restore check, and the check of the writes the caller records
// (recordwrite.go, lostwrites.go; kept in internal/recorded). The prover
// sees the informer through a narrow interface, which probes.go implements
// (proverOwner; cacheView, the cache under applyMu). The snapshot zone
// (internal/snapshotzone) is the apply path's side of a snapshot proof:
// its rules are there, in one place.
//
// informer.go builds and runs the informer, shared_informer.go holds the
// rest of client-go's SharedIndexInformer (its run state:
// internal/lifecycle), wrap.go wraps an informer built elsewhere
// (internal/wrapped), options.go is the one place defaults are set.
//
// Every change is written to the indexer before its resource version
// reaches the trust state, and that before handlers hear of the change:
// when WaitForFreshness(rv) returns nil, every event up to rv that the
// informer's selector admits is in the indexer. The waits a batch of
// changes releases wake once it is applied and its handlers were told,
// with no lock held: readied last, a woken wait runs ahead of the
// handlers' deliveries instead of behind them. A list that moves the
// cache back (a declared regression) goes, in this order: counted
// (Stats.Regressions) and logged; reported to OnRegression (with applyMu
// released, as the callback may call the informer); written to the
// indexer; submitted to the trust state; told to handlers. So a reader who
// sees an older state in the indexer and then reads Stats.Regressions, or
// what OnRegression counted, finds the step back declared. A restore found
// off the stream (a probe, Sync or a restore check reading the server
// below the floor) is declared once applyMu is released; the apply
// goroutine writes nothing more to the indexer until that declaration has
// ended (awaitDeclarations), so the relist it asks for keeps that order.
//
// # When a wait returns
//
// One type decides it (internal/trust): the informer's trust state, under
// one lock. Evidence enters it through one method (Submit), as one of
// eight kinds, and one function (publishLocked) says what waits see,
// failing a wait too large for the server included. Evidence is stamped
// with the epoch (regressions found) and the failures seen when its
// request was sent; evidence from an older epoch is void.
//
//	evidence    submitted by                          what it does
//	──────────  ────────────────────────────────────  ──────────────────────────────────
//	Stream      apply.go: an applied event or         applied moves up; no RV: plain
//	            bookmark
//	List        apply.go: an applied list             applied is the list's; at "0":
//	                                                  syncing; not comparable: plain
//	Proof       the probes: a snapshot matched, or    applied moves to its end (a gap's
//	            a bookmark proved a gap               once applied reaches its start)
//	Read        the probes, Sync, restore checks:     answered: an outage before it
//	            a consistent read                     ends; behind waits: they fail
//	                                                  TooLarge; restored: restoring
//	Regression  found and declared (apply.go), or     held until declared; proofs in
//	            admitted below the floor (Guard)      flight void
//	Failure     the Guard: a request failed, a        outage: held until a list or read
//	            stream broke early                    requested after it answers (or the
//	                                                  resumed stream passes the floor)
//	Check       a restore check, or a relist for an   held while one is in flight
//	            event the snapshot zone cannot place
//	Run         Run begins (or Start is about to),    the start grace ends; stopped
//	            Run returns
//
// What the queue hands on is decided there too: an event or a list
// requested before a declared restore is dropped, and its relist told
// apart (Taken); an event is placed ahead of, at or behind the stream
// (Placed), which the apply path rejects as out of order by its kind.
// A wrapped informer (Wrap) has a trust state of its own, told only
// Stream and List evidence (from its handler and its store) and Run's.
//
//	state       waits see                       transitions (evidence)
//	─────────   ─────────────────────────────   ──────────────────────────────────
//	not started a wait waits for Run for the    Run begins, or a factory's Start
//	            start grace, then fails:        is about to run it ▶ syncing
//	            ErrNotStarted                   (Run)
//	syncing     nothing reached                 first comparable list ▶ trusted
//	                                            (after a list at "0": first event
//	                                            or bookmark with a comparable RV;
//	                                            List, Stream)
//	trusted     applied, unless in doubt        restore proven ▶ restoring (Read)
//	            (an outage, a check, a          comparable list ▶ trusted (at its
//	            regression being declared)      RV; below applied: declared)
//	restoring   nothing reached; queued events  its relist applied ▶ trusted
//	            and older lists dropped         (List)
//	plain       every wait fails                comparable list ▶ trusted (List)
//	(any)                                       list at "0" ▶ syncing (List)
//	(any)                                       list RV not comparable, or a
//	                                            listed object without an RV
//	                                            (a fake clientset's) ▶ plain
//	                                            (List)
//	(any but                                    event without an RV, or a
//	restoring)                                  deletion at its object's own
//	                                            RV (a fake clientset's) ▶
//	                                            plain (Stream)
//	(any)       stopped: ErrStopped             Run returned (final; Run)
//
// A restore is proven by a consistent read below the floor when it was
// sent, by keys a snapshot lists at states the cache had passed but does
// not hold, or by writes a restore check shows lost; a list that moves
// keys back, or an older list accepted after AcceptRegressionAfter, is a
// regression the cache follows at once (it stays trusted, at the list's
// resource version, once the regression is declared).
//
// A wait for rv returns nil exactly when the state is trusted, applied is
// at least rv, and nothing puts applied in doubt:
//
//   - an outage: a list or watch request failed, or the server ended a
//     watch well before its timeout (an apiserver shutting down ends its
//     streams, and may come back from a restored etcd), and no list
//     requested after it has been applied, nor a consistent read sent
//     after it answered. After a failed request the stream relists first
//     (on the watch path, without the Reflector's backoff; a list, not a
//     watch-list, from 128 KiB of objects: options.go), or, for an
//     informer larger than the restore check's snapshot, runs the check.
//     A stream that only ended early resumes (behind a load balancer on
//     another apiserver); the outage ends when the resumed stream applies
//     past the floor it ended at, or a consistent read of limit 1 sent once
//     the watch is taken (one per resource for informers sharing a
//     ServerReads) shows the server did not go back (a balancer may hold
//     the watch while every apiserver is down, for a restored etcd);
//   - a restore check in flight: a recorded write below applied that the
//     stream never delivered (RecordWrite) may come from a server
//     restored without --bump-revision; or a relist an event the snapshot
//     zone could not place asked for (internal/snapshotzone);
//   - a regression found and not yet declared.
//
// Applied moves to an applied event's RV, to a bookmark's (every event in
// front of it is applied, the queue being FIFO), to a list's once it has
// replaced the indexer, to a snapshot's RV when the cache holds exactly
// that snapshot's state, and to a bookmark proof's end once applied has
// reached its start (see Quiet resources). It never moves back, except to
// a list's RV under a declared regression, and to none while restoring.
// In plain, every wait fails with an error matching
// freshness.ErrIncomparable; after Stop, with freshness.ErrStopped. Before
// Run begins (or a factory's Start is about to run the informer), a wait
// waits for it for a start grace of about a second (options.go,
// defaultStartGrace), then fails with freshness.ErrNotStarted, or, when its
// context ends first, with an error matching both; a check says
// freshness.ErrNotFresh until that grace has passed since the informer was
// first waited for or checked. A consistent read sent after a wait began
// that answers below its target fails it with
// freshness.ErrTooLargeResourceVersion. LastObservedResourceVersion (and
// the indexer's LastStoreSyncResourceVersion) reports applied, held or not.
//
// The guard's floor is the highest RV the queue has delivered or a proof
// reached; an older event or bookmark never lowers it. A list older than
// the floor is refused and retried; a consistent list below it, a list that
// brings keys back to older states, a list past a write recorded with
// RecordWrittenObject that holds the written key older (the write was lost),
// a recorded write confirmed below it, and older lists served for longer
// than AcceptRegressionAfter are declared regressions: logged at error level,
// counted (Stats.Regressions), reported to the OnRegression callback, never
// silent, and declared before any wait the regressing list reaches is
// released. A single event with a malformed RV is counted and applied
// without advancing freshness; a bookmark with one, and an event or
// bookmark with an implausible RV (see reflector.Plausible), is counted and
// skipped. Only a list RV that cannot be ordered, or what only a fake
// clientset sends (objects with no RV at all, a deletion at its object's
// own RV: writes sharing one), switch the informer to plain, until a
// comparable list arrives.
//
// # Quiet resources
//
// An informer's applied RV moves with its own stream. On a resource nothing
// writes, the next bookmark comes about a minute later, so a wait for an RV
// returned by a write to another resource would take that long. When waits
// have made no progress for the probe delay, the informer proves freshness
// with the server, by one of two routes (internal/prove says how each
// proof holds). On a busy resource the stream keeps moving and meets the
// waits; a target it has not reached within a second of moving
// (probe.StuckAfter) is probed for all the same, since it may be beyond
// the server, which only a consistent read shows.
//
//   - The snapshot route, for informers of up to WithSnapshotProbeLimit
//     objects and for any informer of a resource that gets no bookmarks,
//     after DefaultSnapshotProbeDelay: one consistent list through the
//     informer's ListerWatcher, of at most one object more than the cache
//     holds, compared key by key with the cache under applyMu. If it holds
//     exactly the cached keys at the cached RVs, applied and the guard's
//     floor move to its RV L: one round trip. Keys created and deleted
//     between applied and L are in neither: handlers still hear of their
//     events, the indexer does not (ProbeStats.BehindSnapshot; the snapshot
//     zone, whose rules internal/snapshotzone gives). Sync takes the same
//     route.
//   - The bookmark route, for larger informers, after
//     DefaultQuietProbeDelay: a consistent limit=1 list gives the server's
//     RV; an auxiliary watch from applied, with bookmarks and a 3 s
//     timeout, gets a bookmark that proves the stream holds no event up to
//     it beyond those it shows; applied moves to it once those are in the
//     indexer (about a second). A resource served without a watch cache
//     gets no bookmarks: its informer relists once, and takes the snapshot
//     route from then on.
//
// Cost: nothing while no wait is pending (no goroutine, no timer); while
// waits are pending, one timer per informer, and at most one probe at a
// time however many callers wait. Every consistent read a probe, Sync or a
// restore check sends is also evidence: one below the floor when it was
// sent declares a restore, and waits that joined before it for targets
// above it fail with freshness.ErrTooLargeResourceVersion. No probe is sent
// while none could release a wait (an outage, a restore); probes back off
// while waits stay pending, and after a relist that followed a failed
// request, wait as long as that relist took (at most 5 s). The restore
// check reads the same snapshot (up to the snapshot limit, or
// DefaultSnapshotProbeLimit where the route is off) without moving applied.
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
//     indexer's LastStoreSyncResourceVersion reports the same): the newest
//     RV the indexer holds everything up to. It is the one high-water mark:
//     waits compare against it (see "When a wait returns").
//
// Sync: HasSynced means the initial list is applied (client-go's sense);
// Sync(ctx) is a read barrier (fresh as the server was when called);
// a resync re-delivers cached objects to handlers (client-go's sense).
//
// Probe: a request off the informer's own stream. The quiet-resource probe
// (internal/prove, ProbeStats) proves a quiet stream fresh; the restore check
// (internal/prove, Stats.RestoreProbes) asks whether the server went back in
// time; ServerResourceVersion is the consistent read both start with.
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
// A FreshInformer has eight locks, taken in this order, never the reverse:
//
//	lifecycle.State.mu → applyMu → handlers.Processor.mu → Listener.mu
//	                     applyMu → Guard.mu → trust (its waiter set's lock)
//	                     applyMu → prove.Prover.mu (a relist after a failure)
//	prove.Prover.mu (its probe Scheduler's and Runners') → Guard.mu, trust
//	recorded.Timer.mu → trust
//
// Outside them: recorded.Timer.mu is taken before a metrics provider's
// lock (write-to-visible samples); a WrappedInformer's lock before the
// wrapped store's and its trust's (internal/wrapped); the leaf locks of a
// ServerReads (internal/probe) with none of the informer's held.
//
// The trust's lock is a leaf. Nothing calls out while holding a lock:
// the freshness callbacks a step releases, and the
// regressions it finds, are run and declared once applyMu is released
// (unlockApply, which the apply goroutine waits for before it writes the
// indexer again; a list's regressions before the list is applied, applyMu
// released meanwhile: declareFound); the Guard declares what it finds
// after unlocking.
package cache
