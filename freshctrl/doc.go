// Package freshctrl brings freshinformer to controller-runtime: a manager
// opts in with two fields,
//
//	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
//		NewCache:  freshctrl.NewCache,
//		NewClient: freshctrl.NewClient,
//	})
//
// and every informer of its cache is a freshinformer cache.FreshInformer
// (guarded against out-of-order updates and stale relists, with
// WaitForFreshness and per-informer metrics on controller-runtime's
// metrics registry), while its client's cached reads reflect the writes
// made through it.
//
// # How each informer learns its scope
//
// controller-runtime builds its caches (one per namespace of
// DefaultNamespaces or ByObject.Namespaces, one per ByObject selector, one
// cluster-wide) and calls one NewInformer hook for all of them, with a
// ListerWatcher whose closures hold the namespace and selectors where
// nobody can read them. freshctrl gives the cache an HTTP client whose
// transport recognises a marked request context; the hook calls the
// ListerWatcher's List once with that context, and the transport records
// the request's URL and ends it with an error, inside the process: nothing
// is sent. The URL is what the server would have been asked for: path
// namespace, labelSelector and fieldSelector, so the scope is exact for
// typed, unstructured and metadata-only informers alike, whatever
// controller-runtime's defaulting made of the options. The informer is
// named after it ("ns=team-a", "ns=team-a,labels=app=web",
// "metadata:*") in logs and in the metrics' name label. The name comes
// from the scope alone, never from creation order, so series keep their
// identity across restarts; a second cache of the same scope in the
// process reports together with the first (package metrics), so scrapes
// never see duplicate series.
//
// # Read-your-writes, compared with controller-runtime's own
//
// The client records its writes with the root module's package
// readyourwrites, the same implementation client-go controllers use (see
// NewClient). controller-runtime v0.25 has an experimental
// CacheOptions.EnableReadYourWritesConsistency. This package differs on
// each point where that falls short:
//
//   - Watermark: it watches handler events for one resource version per
//     resource; bookmarks never advance it. freshctrl waits on the
//     informer's applied resource version, which bookmarks advance too, so
//     a write whose event the informer's selector filters out is still
//     passed by the next bookmark.
//   - Bounds: it waits until the request's context ends. freshctrl bounds
//     each read (Options.Timeout, default 10s; WaitTimeout per request)
//     and fails with a *readyourwrites.NotFreshError naming the resource, the informer,
//     the key, the target and the reached resource version.
//   - Scopes: it keeps one watermark per resource, which it documents as
//     wrong when a resource has more than one namespace configured.
//     freshctrl waits per informer: a Get waits for the informer of the
//     key's namespace, a List of all namespaces for each namespace's
//     informer for its own writes.
//   - Writes outside the cache: it waits for an event that never comes
//     until the context ends. freshctrl checks each write against each
//     informer's scope and does not wait for one no informer can see.
//   - Opt-out: the same per-request client.DisableReadYourWritesConsistency
//     option works here, on reads and writes (controller-runtime v0.24,
//     which freshctrl also supports, has none).
//   - Metrics: one wait histogram for all resources; freshctrl reports per
//     informer (wait duration and outcome, write-to-visible latency, lag,
//     guards), see package metrics.
//   - Busy controllers: FailIfNotFresh and a Requeuer re-queue a request
//     exactly when the cache catches up instead of holding a worker.
//
// A write that has not returned when a read starts is concurrent with it
// and is not waited for (controller-runtime's option waits for it).
//
// # Unit tests
//
// Package fake (freshctrl/fake) is to controller-runtime's fake client
// what package freshtest is to client-go's fake clientsets: its
// NewClientBuilder, with the With options of controller-runtime's, builds
// this package's client over a Cache of FreshInformers on a fake API
// server, so a reconciler's unit test runs the reconciler as a manager
// does: its cached reads reflect its own writes, a FailIfNotFresh read
// fails with a *readyourwrites.NotFreshError while the cache is behind, and a Requeuer
// parks the request until the cache catches up. PauseInformers holds the
// cache behind the server to test that path. On controller-runtime's own
// fake client there is no cache: FailIfNotFresh never fails and WhenFresh
// never takes the request, so that path never runs in a test.
//
// # Drop-in details
//
// The cache answers NeedLeaderElection() == false, as controller-runtime's
// does, so a cache added with mgr.Add runs on standby replicas too.
// cache.Options.NewInformer is honoured (see NewCache for what an informer
// that is not a FreshInformer gives up). NewClient takes any cache reader;
// read-your-writes needs NewCache's. Before the cache starts, reads fail
// with controller-runtime's ErrCacheNotStarted, as they would without
// freshctrl, and RemoveInformer forgets the informer here too.
//
// # Callbacks and goroutines
//
// Every function freshctrl runs on someone else's goroutine, and what it
// may do there:
//
//   - The informer hook it gives controller-runtime (and through it a
//     cache.Options.NewInformer hook of yours) runs on the goroutine that
//     first asks for an informer (GetInformer, a read, IndexField), under
//     controller-runtime's informer map lock: it must not call back into
//     the cache. freshctrl's part sends one list request that its own
//     transport records and stops inside the process.
//   - That transport's RoundTrip runs on whatever goroutine sends the
//     request (the informers' reflectors, probes); it only looks at the
//     request's context.
//   - The client's writes and reads go through package readyourwrites
//     (its records, its eviction, its checks and waits) on the goroutine
//     that writes or reads; its delete proofs read informer indexers and
//     resource versions only. Nothing it runs is a callback of freshctrl's.
//   - A Requeuer's freshness callback runs on the informer goroutine that
//     applies the event or bookmark (or answers its probe), or at once on
//     WhenFresh's goroutine; its MaxPark timer on a timer goroutine; both
//     only take the Requeuer's lock and add to the controller's queue. Its
//     Start leaves one goroutine that waits for Start's context to end.
//   - A foreign informer wrapped with cache.Wrap gets one event handler,
//     run by that informer's handler goroutine, which records resource
//     versions only, and one goroutine that ends with the cache's context
//     or RemoveInformer.
package freshctrl
