// Package fake gives controller-runtime reconcilers' unit tests freshctrl's
// client on a fake API server, so read-your-writes, FailIfNotFresh and
// Requeuer are as real in a test as they are with a manager:
//
//	c := fake.NewClientBuilder().WithObjects(parent).Build() // was: controller-runtime's fake.NewClientBuilder()
//	defer c.Stop()
//	r := &MyReconciler{Client: c}
//	_, err := r.Reconcile(ctx, req)
//
// With controller-runtime's own fake client there is no cache: every read
// is the tracker's, so a reconciler's stale-cache paths never run,
// FailIfNotFresh never fails and Requeuer.WhenFresh has nothing to take.
// Here the client is what freshctrl.NewClient builds for a manager:
//
//   - Writes go to controller-runtime's fake client (its With options
//     apply: status subresources, indexes, interceptors) over a
//     freshtest.Tracker, so they get resource versions from one counter
//     for every kind, UIDs, conflicts on stale resource versions, and
//     finalizer handling, as on a server.
//   - Reads come from a freshctrl.Cache (controller-runtime's cache with
//     the given cache.Options: namespaces, selectors, transforms) whose
//     FreshInformers list and watch that server, and wait for the client's
//     own earlier writes. A reconciler that lists its children right after
//     creating one sees it, every time.
//   - The server's watches send bookmarks, as a server's watch cache does,
//     so an informer of a kind nobody writes still reaches the server's
//     newest resource version: reads after deletes and DeleteAllOf, which
//     wait for it, end.
//   - PauseInformers holds the informers behind the server until
//     ResumeInformers, so a test can drive the stale-cache path: a
//     FailIfNotFresh read fails with a *readyourwrites.NotFreshError, a
//     Requeuer parks the request and puts it back in the queue once the
//     informers resume (see the examples). PauseInformersFor resumes them
//     by itself after a while.
//   - Reconcile runs a reconciler to completion, as its controller would:
//     Requeue and RequeueAfter results run it again at once (no real time
//     is waited for), a request parked with the Client's Requeuer (a
//     started freshctrl.Requeuer, for the reconciler's WhenFresh) runs
//     again once the cache has caught up, an error ends it, and a
//     reconciler that never settles fails with a *NotSettledError after
//     MaxReconciles rounds (see the Client.Reconcile example).
//   - FailOnStaleReads turns the stale-read detector on (package
//     stalereads) and fails the test with each read through the cache
//     that returns older state than the Client's own earlier write: with
//     the informers paused, a test shows which reads of a reconciler are
//     stale (those that do not wait: the Cache's own, or those made with
//     client.DisableReadYourWritesConsistency).
//   - Server is the fake server's own client: another actor's writes,
//     uncached reads.
//
// The cache runs informers: Stop the Client at the end of the test.
//
// Differences from a real API server, beyond those of controller-runtime's
// fake: lists ignore paging; field selectors of the cache's scope are
// applied on metadata.name and metadata.namespace only (a selector on any
// other field is ignored, as freshtest does); an object that an update
// moves out of an informer's label selector is not deleted from that
// informer (a server sends a DELETED event); kinds must be in the scheme.
package fake
