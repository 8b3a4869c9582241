// Package consistency is kube-controller-manager's consistency store
// (KEP-5647, k8s.io/kubernetes/pkg/controller/util/consistency) on
// freshinformer's informers, with the same method set, so that a controller
// written for upstream's ConsistencyStore (the ReplicaSet, Job, DaemonSet
// and StatefulSet controllers, or a copy of them) takes a *Store unchanged:
//
//	store := consistency.NewStore(factory) // was: consistency.NewConsistencyStore(map[...]LastSyncRVGetter{...})
//
// It is named and shaped after upstream's package so that a
// kube-controller-manager maintainer finds it where they would look, and it
// does not import k8s.io/kubernetes: projects outside k/k can use it
// without copying upstream's store or requiring the kubernetes module.
//
// # What it does better
//
// Upstream's EnsureReady compares each informer's
// LastStoreSyncResourceVersion with the owner's writes and, when a cache
// is behind, returns a *ConsistencyError; the controller hands it to its
// rate-limited workqueue, which retries the key after a backoff that grows
// with every failure (5 ms, 10 ms, 20 ms, ...), whether or not the cache
// has caught up meanwhile. A *Store instead:
//
//   - waits, for at most WithMaxWait (DefaultMaxWait), for the caches to
//     hold the owner's writes before it answers: the wait returns the
//     moment the informer applies the event or bookmark that makes it
//     fresh (nothing polls), so the usual case, a cache a few
//     milliseconds behind, costs no skipped sync and no requeue. The wait
//     sends no request either: a write the Store recorded comes back on
//     the stream of every informer it was routed to (one without label or
//     field selectors), so it waits for that stream alone
//     (FreshInformer.WaitForStream) instead of having the informer probe
//     the server after 20 ms without progress, which under watch lag only
//     asks what the stream is about to deliver. Writes a restore lost are
//     the lost-write check's (below); with that check off, and on
//     informers with selectors, the waits probe as WaitForFreshness does;
//   - with WithOwnerResource, it reads an owner created while it runs
//     from the server once, before the owner's first sync, and that sync
//     waits for the cache to hold the server's copy: the creator may have
//     changed the owner before the lagging watch delivered the creation,
//     and a first sync on the created copy acts on a replaced spec and
//     writes a status the server refuses (409 Conflict). Upstream's store
//     cannot know of writes other than the owner's own;
//   - when it still skips, it keeps a callback on the lagging informers
//     (FreshInformer.AfterStream, likewise without probes) and, the moment
//     they hold the writes, calls WithOnFresh's function (for a controller
//     that can re-add the key to its queue), or, with WithOwnerResource,
//     tells the owner again to its informer's handlers, as a resync does
//     (FreshInformer.ResyncKey): kube-controller-manager's controllers
//     queue an owner on every update event, so the skipped owner is synced
//     then, not after its queue's backoff;
//   - never keeps an owner blocked by a write that an etcd restore made
//     unreachable: once an owner has been skipped for WithLostWriteCheck
//     (DefaultLostWriteCheck), one consistent read through the lagging
//     informer (shared by the owners skipped on it, and sent after their
//     writes) tells whether the server has reached the write; a server
//     below it lost it (freshness.ErrTooLargeResourceVersion), and the
//     owner's records are dropped, logged at error level and counted
//     (OutcomeLost): its sync proceeds on the caches as the informer holds
//     them after the restore it declared. A wait the informer's own probes
//     fail the same way does the same. Upstream's store keeps such an
//     owner skipped until the caches happen to pass the lost resource
//     version (new writes), or the process restarts;
//   - holds every owner's sync, for at most the same bound, while a cache
//     it reads (of a resource written through, or the owners' own) is in
//     doubt: after its stream broke (an apiserver restarting) until it has
//     shown that the server did not go back, and, after an etcd restore,
//     until it has relisted from the restored server. Syncing meanwhile
//     reads one cache already relisted beside another still holding the
//     history the server lost (the ReplicaSet controller then creates pods
//     beyond the need); the skip's *ConsistencyError names the informer in
//     doubt, with WroteRV empty;
//   - says which informer is behind: *ConsistencyError carries upstream's
//     fields (ReadRV, WroteRV, GroupResource) and the informer's scope and
//     name, and matches upstream's own *ConsistencyError type with
//     errors.As, so that the controllers' stale_sync_skips_total still
//     counts its skips;
//   - reports what it does through Metrics (package metrics implements it
//     for Prometheus).
//
// Writes are routed as package readyourwrites routes them: to every
// informer of the written resource that can hold objects of the owner's
// namespace, and reported to them (write-to-visible and lag metrics, the
// restore check of a write the stream never delivers).
//
// Like upstream's store, it fails open where freshness cannot be decided: a
// resource no informer of the source caches, a malformed resource version,
// an informer whose resource versions cannot be ordered (OutcomeIncomparable).
package consistency
