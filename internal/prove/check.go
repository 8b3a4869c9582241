package prove

import (
	"context"
	"time"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/trust"
	"github.com/freshinformer/freshinformer/reflector"
)

// checkTimeout bounds one restore check.
const checkTimeout = 10 * time.Second

// checkWrite is told of a write's resource version (RecordWrite). A write
// below what the cache applied that the stream never delivered may come
// from a server restored to an older revision (etcd restored without
// --bump-revision): a restore check tells, and waits are held until it
// answers instead of being told "fresh" by the old history. While an
// outage or a restore holds waits anyway, what ends it tells.
func (p *Prover) checkWrite(rv freshness.RV) {
	v := p.inf.View()
	if v.State != trust.Trusted || v.Applied.Compare(rv) <= 0 || v.Outage {
		return
	}
	var delivered bool
	p.inf.Compare(func(c Cache) { delivered = c.Delivered(rv) })
	if !delivered {
		p.checks.Run(p.runCheck, true) // one more follows a check in flight: it may predate the write
	}
}

// runCheck is one restore check (the Runner's function).
func (p *Prover) runCheck(ctx context.Context) {
	st := p.inf.View().Stamp
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	if !p.CheckServer(ctx, st) {
		return
	}
	p.inf.Answered(st)
	if now := p.inf.View(); now.Stamp.Epoch != st.Epoch && now.State != trust.Restoring {
		// A regression found meanwhile voided what the read showed: it
		// may not speak for the cache's history now. Ask again.
		p.checks.Run(p.runCheck, true)
	}
}

// Resumed is told that the informer's watch resumed, without a relist,
// after a stream the server ended early with no request failed since (an
// apiserver shutting down ends its streams; behind a load balancer another
// one takes the resumed watch). That server may run on a restored etcd
// (a load balancer holds the resumed watch while every apiserver is down,
// and one restarted on a restored etcd takes it silently): the outage
// holds waits until a consistent read of the server's resource version,
// sent after the watch was taken, answers (or the resumed stream applies
// past the floor: trust.Failure). One below the floor is declared a
// restore (consistentRV). The read is shared with the informers of the same
// resource whose watches resumed too (Config.Shared), so that a rollout
// costs one read per resource, not one per informer. If it fails, the
// informer relists.
func (p *Prover) Resumed() { p.resumed.Run(p.runResumeCheck, true) }

// runResumeCheck is the read Resumed asks for (the Runner's function).
func (p *Prover) runResumeCheck(ctx context.Context) {
	st := p.inf.View().Stamp
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	if _, err := p.consistentRV(ctx, st); err != nil {
		if ctx.Err() == nil {
			p.inf.Log().V(2).Info("Check of the server after the watch resumed failed; relisting", "err", err)
			p.requestRelist()
		}
		return
	}
	p.inf.Answered(st)
}

// Resuming decides how the stream resumes after a failed request: the
// server was down, and may have restarted from a restored etcd, whose
// history the resumed watch would not show. An
// informer of up to the restore check's size relists (client-go's
// Reflector does too after an apiserver restart: the restarted watch
// cache has no history to resume from); a larger one runs the restore
// check (one consistent read of the first objects and the server's
// resource version) and resumes if it answers.
func (p *Prover) Resuming(ctx context.Context) (relist bool) {
	if !p.inf.View().Outage {
		return false
	}
	if n := p.restoreCheckKeys(); n == 0 || p.keys.Load() <= int64(n) {
		return true
	}
	p.resumeChecks.Add(1)
	st := p.inf.View().Stamp
	p.inf.Checking()
	defer p.inf.CheckDone()
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	if !p.CheckServer(ctx, st) {
		return true
	}
	p.inf.Answered(st)
	return false
}

// CheckServer asks the server, with a consistent read sent at st, whether
// its history went back: its resource version below the floor, or (from
// a snapshot of up to restoreCheckKeys objects) keys listed at states the
// cache had passed but does not hold, which new writes on a restored
// server cannot hide (CompareSnapshot). Either is declared: the informer
// forgets its freshness (waits block until the relist is applied) and
// relists from the restored server. It reports whether the server
// answered.
func (p *Prover) CheckServer(ctx context.Context, st trust.Stamp) (answered bool) {
	if n := p.restoreCheckKeys(); n > 0 {
		s, err := p.listSnapshot(ctx, int64(n))
		if err != nil {
			p.inf.Log().V(2).Info("Restore check failed", "err", err)
			return false
		}
		p.CompareSnapshot(s, st, p.cfg.SnapshotLimit >= 0)
		return true
	}
	if _, err := p.consistentRV(ctx, st); err != nil {
		p.inf.Log().V(2).Info("Restore check failed", "err", err)
		return false
	}
	return true
}

// consistentRV reads the server's resource version with a consistent read
// (ServerResourceVersion), sent at st. One below the floor when it was
// sent shows the server's history went back: a consistent read never
// answers below what the server delivered before it. That is declared as
// a restore.
func (p *Prover) consistentRV(ctx context.Context, st trust.Stamp) (freshness.RV, error) {
	floor := p.inf.Floor()
	server, err := p.ServerResourceVersion(ctx)
	if err != nil {
		return freshness.RV{}, err
	}
	if !server.AtLeast(floor) {
		r := diff{}.regression(reflector.RegressionServerBehind, server, floor)
		p.inf.Compare(func(c Cache) { c.Restore(r, st) })
	}
	return server, nil
}

// restoreCheckKeys is how many objects the restore check lists and
// compares: the snapshot limit, or its default where the quiet probes'
// snapshot route is off (the check runs after failed requests and
// suspicious writes only, and without the keys a restore that new writes
// outran goes unseen).
func (p *Prover) restoreCheckKeys() int {
	switch {
	case p.cfg.SnapshotLimit >= 0:
		return p.cfg.SnapshotLimit
	case p.cfg.RestoreCheckByRV:
		return 0 // the server's resource version only
	default:
		return DefaultSnapshotLimit
	}
}
