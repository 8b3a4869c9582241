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
// "metadata:*") in logs and in the metrics' name label; a second informer
// with the same resource and name in the process gets "#2", so scrapes
// never see duplicate series.
//
// # Read-your-writes, compared with controller-runtime's own
//
// controller-runtime v0.25 has an experimental
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
//     and fails with a *NotFreshError naming the resource, the informer,
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
//     option works here, on reads and writes.
//   - Metrics: one wait histogram for all resources; freshctrl reports per
//     informer (wait duration and outcome, write-to-visible latency, lag,
//     guards), see package metrics.
//   - Busy controllers: FailIfNotFresh and a Requeuer re-queue a request
//     exactly when the cache catches up instead of holding a worker.
//
// A write that has not returned when a read starts is concurrent with it
// and is not waited for (controller-runtime's option waits for it).
package freshctrl
