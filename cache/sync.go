package cache

import (
	"context"
	"fmt"

	"github.com/freshinformer/freshinformer/freshness"
)

// Sync is a read barrier: it returns once the cache reflects everything the
// server had committed when Sync was called, the client-side counterpart of
// the apiserver's consistent reads from its watch cache (KEP-2340). After a
// nil return, the indexer's Get and List show every change to the
// informer's objects committed before the call, on a busy resource and on
// a quiet one alike.
//
// It reads the server's current resource version with one consistent
// limit=1 list through the informer's ListerWatcher (same namespace and
// selectors; served from the apiserver's watch cache on Kubernetes 1.31+),
// then waits for it with WaitForFreshness. Cost per call: that one request;
// if the informer's stream does not reach the resource version within the
// probe delay (a quiet resource), one freshness probe adds an auxiliary
// watch (one request, ending within 3 s), reusing Sync's list. On a
// resource served without a watch cache the probe is a relist of the
// informer instead. Concurrent Sync calls share one probe.
//
// Errors: the list's error, wrapped, or WaitForFreshness's.
func (f *FreshInformer) Sync(ctx context.Context) error {
	f.quiet.requests.Add(1)
	rv, err := f.serverResourceVersion(ctx)
	if err != nil {
		return fmt.Errorf("freshinformer: reading the current resource version of %s: %w", f.resource, err)
	}
	return f.WaitForFreshness(ctx, rv.String())
}

// AfterFreshness arranges for fn to run once the cache has applied rv,
// with nil, or once it cannot get there, with an error matching
// freshness.ErrStopped or freshness.ErrIncomparable (at once, on the
// caller's goroutine, when rv is malformed or already reached). It is
// WaitForFreshness without a blocked goroutine, for a workqueue that
// re-adds a key when the cache catches up. fn runs on the goroutine that
// applied the event or bookmark (or answered a probe), after the informer
// has released its locks, so it may call back into the informer and the
// library (RecordWrite, ReadYourWrites, AddEventHandler, AfterFreshness,
// ...); it should be quick, since the informer applies nothing more until
// it returns. A panic in fn goes up to client-go's process loop, which
// reports it through utilruntime; the other callbacks still run. It
// counts as a pending wait, so a quiet resource is
// probed for it as for WaitForFreshness, and like WaitForFreshness it is
// held back while a restore verification probe is in flight (see
// RecordWrite). stop calls fn off and reports whether it did (false once
// fn has run or is running).
func (f *FreshInformer) AfterFreshness(rv string, fn func(error)) (stop func() bool) {
	target, err := freshness.ParseRV(rv)
	if err != nil {
		fn(err)
		return func() bool { return false }
	}
	return f.afterFresh(target, fn)
}
