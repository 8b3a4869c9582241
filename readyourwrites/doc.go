// Package readyourwrites lets a reconciler read its own writes from
// freshinformer caches (cache.FreshInformer). After each write made on
// behalf of an owner (the object a reconciler works on), it records what
// the server returned; before reading, the reconciler blocks until every
// cache that holds what it wrote is fresh (EnsureFresh), checks without
// blocking and requeues (CheckFresh, as kube-controller-manager's
// consistency store does), or asks to be called back (WhenFresh, which
// package requeue builds on). Package writes records the writes of a
// client-go clientset without touching each write call, and freshctrl's
// client records the writes made through it the same way, so one
// implementation serves client-go and controller-runtime controllers.
//
// # What it proves
//
// A write is proven read once every informer it was routed to has applied
// its resource version (cache.FreshInformer.CheckFreshness, WaitForFreshness): an
// informer's applied resource version only moves past events that are in
// its indexer, so a read from that informer after the check reflects the
// write or something newer. A write is routed to every informer of its
// resource whose scope (namespace, label and field selectors) admits the
// written object, and to every one that still holds the object's key: a
// write that moves an object out of a selector reaches that informer as a
// delete at the write's resource version. A write no informer will ever
// see fails at Record (cache.ErrNotWatched, or cache.ErrNoInformer when the
// resource has no informer): waiting for it would only time out.
//
// # How deletes are proven
//
// A delete has no resource version of its own to wait for when the DELETE
// answered with a status, and an object held back by finalizers stays in
// the cache, terminating. So a delete is proven by what the cache holds:
// it is fresh once the informer no longer holds the object (same key and
// UID: a recreated object does not count) or holds it terminating at or
// past the resource version the delete's response carried. While it does
// not, a wait looks again after each step the informer applies: first at
// the delete's own resource version when the cache is behind it, then at
// the next resource version past the cache's. Nothing polls and the server
// is not asked for anything (the informer's quiet-resource probe bounds a
// wait on a resource nothing else writes to, as for any
// WaitForFreshness).
//
// # Bounds
//
// Only the newest resource version per owner and informer is kept, a
// recreated owner (new UID) starts clean, and an owner's deletes per
// informer are a set that drops the deletes its cache shows whenever it has
// doubled. Records are kept for at most Options.MaxOwners owners (least
// recently used evicted first), and an owner with nothing recorded or
// checked for Options.OwnerIdleTimeout is evicted at the next call. Eviction
// never makes a check claim freshness it could not claim before: what the
// caches show already is forgotten; what they do not show yet is folded,
// per informer, into one record for every owner of the evicted owner's
// kind (the newest resource version written, and the deletes not shown),
// which every later check of an owner of that kind waits for too, until the
// cache shows it. Folded records are bounded by the kinds of owners times
// the informers, plus the deletes their caches do not show yet (each an
// object still cached). An informer that has stopped will never show
// anything: what was folded for it is dropped, and an informer that has
// stopped and that the source no longer lists (removed, as
// controller-runtime's RemoveInformer does) is not waited for.
//
// # Where callbacks run
//
// WhenFresh's callback runs on whichever goroutine makes the last cache
// fresh: the informer's goroutine that applies the event or bookmark, or
// answers its quiet-resource probe, once the informer has released its
// locks; or at once on the caller's goroutine when nothing is pending or an
// informer cannot catch up. No lock of the ReadYourWrites or of an informer
// is held while it runs, so it may call back (Record, CheckFresh,
// WhenFresh).
//
// # Locks
//
// A ReadYourWrites has one mutex, which guards its records (the owners,
// their least-recently-used order, and what evicted owners left). Under
// it, it calls into informers only to read them: CheckFreshness, IsStopped, and
// its indexer's GetByKey, which take the informer's own locks. So the lock
// order is ReadYourWrites before the informer's locks (its own mutex, its
// tracker's and its indexer's), and the informer never calls into a
// ReadYourWrites while holding one of its own: freshness callbacks run
// after it released them. The InformerSource (a factory, freshctrl's
// registry) is called with the mutex released, so a source may take locks
// of its own. Nothing blocks or waits under the mutex: Record reports a
// write to its informers (RecordWrittenObject) before taking it, and
// EnsureFresh waits with it released. A WhenFresh call's own state (see
// freshNotice) has a mutex that is never held while calling out, not even
// into the ReadYourWrites.
package readyourwrites
