package cache

import "github.com/freshinformer/freshinformer/freshness"

// CheckFreshness reports, without blocking, whether WaitForFreshness(ctx,
// rv) would return nil at once: for a controller that requeues a key
// instead of blocking a worker while its cache catches up (as
// kube-controller-manager's consistency checks do), or that hands the key
// to AfterFreshness. Errors: a *freshness.WaitError that unwraps to
// freshness.ErrNotStarted for an informer never run (whatever rv is) once
// the start grace (about a second) has passed since a wait or check first
// found it not started, freshness.ErrNotFresh before,
// freshness.ErrStopped, freshness.ErrIncomparable while the server's
// resource versions cannot be ordered, or freshness.ErrNotFresh when the
// cache is behind rv or cannot vouch for its cache now (see
// WaitForFreshness); one matching freshness.ErrIncomparable when rv is
// malformed. It reads state under the informer's own locks and calls
// nothing else: it may be called from freshness callbacks and event
// handlers.
func (f *FreshInformer) CheckFreshness(rv string) error {
	if err := f.trust.NotStarted(rv); err != nil {
		return err
	}
	target, err := freshness.ParseRV(rv)
	if err != nil {
		return err
	}
	return f.trust.Check(target)
}

// hasStarted reports whether the informer was ever run, stopped since or
// not (Sync of the factories starts only those).
func (f *FreshInformer) hasStarted() bool { return f.trust.Started() }
