package cache

import "github.com/freshinformer/freshinformer/freshness"

// What package readyourwrites needs of an informer beyond its other
// exported methods: a check, without blocking, of what WaitForFreshness
// waits for, and whether the informer was ever started (a wait on one never
// started could only time out). Both read state under the informer's own
// locks and call nothing else: they may be called from freshness callbacks
// and while holding locks of the caller's that the informer never takes.

// IsFresh reports, without blocking, whether WaitForFreshness(ctx, rv)
// would return nil at once: the cache has applied rv and no restore
// verification probe is in flight (see RecordWrite; while one is, a write
// below the cache may not be in it). It is false for a malformed rv, and
// while the informer's resource versions cannot be ordered.
func (f *FreshInformer) IsFresh(rv string) bool {
	target, err := freshness.ParseRV(rv)
	return err == nil && f.trust.Reached(target) // false while waits are held
}

// HasStarted reports whether the informer was ever run (Run or
// RunWithContext), stopped since or not. Until it is, nothing reaches its
// cache and a wait for freshness could only time out.
func (f *FreshInformer) HasStarted() bool { return f.started.Load() }
