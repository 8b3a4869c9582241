package cache

import (
	"context"
	"slices"
	"time"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/trust"
	"github.com/freshinformer/freshinformer/reflector"
)

// probeTimeout bounds one restore verification probe.
const probeTimeout = 10 * time.Second

// checkWrite is told of a write's resource version (RecordWrite). A write
// below what the cache applied that the stream never delivered may come
// from a server restored to an older revision (etcd restored without
// --bump-revision): a restore check tells, and waits are held until it
// answers instead of being told "fresh" by the old history. While an
// outage or a restore holds waits anyway, what ends it tells.
func (f *FreshInformer) checkWrite(rv freshness.RV) {
	v := f.trust.View()
	if v.State != trust.Trusted || v.Applied.Compare(rv) <= 0 || v.Outage {
		return
	}
	f.applyMu.Lock()
	delivered := f.recent.Contains(rv)
	f.applyMu.Unlock()
	if !delivered {
		f.checks.Run(f.runCheck, true) // one more follows a check in flight: it may predate the write
	}
}

// checkStarting is the restore checks' Runner's OnStart: waits are held
// from the moment a check is asked for until the series of checks ends
// (checkIdle).
func (f *FreshInformer) checkStarting() { f.trust.Checking() }

// checkIdle is the Runner's OnIdle.
func (f *FreshInformer) checkIdle() { f.trust.CheckDone().Run() }

// runCheck is one restore check (the Runner's function).
func (f *FreshInformer) runCheck(ctx context.Context) {
	st := f.trust.View().Stamp
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if !f.checkServer(ctx, st) {
		return
	}
	f.trust.Answered(st).Run()
	if now := f.trust.View(); now.Stamp.Epoch != st.Epoch && now.State != trust.Restoring {
		// A regression found meanwhile voided what the read showed: it
		// may not speak for the cache's history now. Ask again.
		f.checks.Run(f.runCheck, true)
	}
}

// checkServer asks the server, with a consistent read, whether its
// history went back: its resource version below the floor, or (from a
// snapshot of up to restoreCheckKeys objects) keys listed at states the
// cache had passed but does not hold, which new writes on a restored
// server cannot hide (compareSnapshot). Either is declared: the informer
// forgets its freshness (waits block until the relist is applied) and
// relists from the restored server. It reports whether the server
// answered.
func (f *FreshInformer) checkServer(ctx context.Context, st trust.Stamp) (answered bool) {
	if n := f.restoreCheckKeys(); n > 0 {
		s, err := f.listSnapshot(ctx, int64(n))
		if err != nil {
			f.log().V(2).Info("Restore check failed", "err", err)
			return false
		}
		f.compareSnapshot(s, st, f.snapshotLimit >= 0)
		return true
	}
	if _, err := f.consistentRV(ctx, st); err != nil {
		f.log().V(2).Info("Restore check failed", "err", err)
		return false
	}
	return true
}

// consistentRV reads the server's resource version with a consistent read
// (ServerResourceVersion), sent with the stamp st. One below the floor
// when it was sent shows the server's history went back: a consistent
// read never answers below what the server delivered before it. That is
// declared as a restore.
func (f *FreshInformer) consistentRV(ctx context.Context, st trust.Stamp) (freshness.RV, error) {
	floor := f.guard.Floor()
	server, err := f.serverResourceVersion(ctx)
	if err != nil {
		return freshness.RV{}, err
	}
	if !server.AtLeast(floor) {
		f.applyMu.Lock()
		f.beginRestore(reflector.RegressionServerBehind, server, floor, listRegression{}, st)
		f.unlockApply()
	}
	return server, nil
}

// restoreCheckKeys is how many objects the restore check lists and
// compares: the snapshot limit, or its default where the quiet probes'
// snapshot route is off (the check runs after failed requests and
// suspicious writes only, and without the keys a restore that new writes
// outran goes unseen).
func (f *FreshInformer) restoreCheckKeys() int {
	switch {
	case f.snapshotLimit >= 0:
		return f.snapshotLimit
	case f.restoreCheckByRV:
		return 0 // the server's resource version only
	default:
		return DefaultSnapshotProbeLimit
	}
}

// beginRestore declares that the server's history went back, shown by a
// read at server (applyMu held), and has the informer start over from the
// server's state: freshness is forgotten (every wait blocks until the
// relist is applied), what the stream still carries from before the
// relist is dropped (apply.go), and the relist is asked for at once. st is
// the stamp of the read: a regression found since voids it, so that Sync,
// a quiet probe and a check, which may each find one restore, declare it
// once.
func (f *FreshInformer) beginRestore(reason reflector.RegressionReason, server, floor freshness.RV, back listRegression, st trust.Stamp) {
	begun, due := f.trust.Restore(st)
	f.settle(due)
	if !begun {
		return
	}
	f.recent.Reset()
	f.endZone()
	f.written.Reset()
	slices.Sort(back.sample)
	f.declare = append(f.declare, reflector.Regression{Reason: reason, ListResourceVersion: server.String(), Floor: floor.String(),
		Keys: back.keys, WritesLost: back.lostWrites, SampleKeys: back.sample})
	f.guard.RequestRelist()
}
