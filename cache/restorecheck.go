package cache

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/reflector"
)

// probeTimeout bounds one restore verification probe.
const probeTimeout = 10 * time.Second

// recentCapacity is how many applied event resource versions an informer
// remembers to recognise its own recorded writes.
const recentCapacity = 1024

// recentRVs remembers the resource versions of the last applied events, in
// the order applied (non-decreasing: older events are rejected), so that a
// recorded write below the cache's resource version can be told apart: one
// the stream delivered is fine, one it never delivered may come from a
// server restored to an older revision. Only values that fit in 64 bits are
// kept. Not safe for concurrent use (FreshInformer holds applyMu).
type recentRVs struct {
	ring  [recentCapacity]uint64
	next  int // where the next value goes
	count int
}

func (r *recentRVs) add(rv freshness.RV) {
	n, ok := rv.Uint64()
	if !ok {
		return
	}
	r.ring[r.next] = n
	r.next = (r.next + 1) % recentCapacity
	if r.count < recentCapacity {
		r.count++
	}
}

func (r *recentRVs) reset() { r.next, r.count = 0, 0 }

// contains reports whether rv was among the remembered values.
func (r *recentRVs) contains(rv freshness.RV) bool {
	n, ok := rv.Uint64()
	if !ok || r.count == 0 {
		return false
	}
	first := (r.next - r.count + recentCapacity) % recentCapacity
	at := func(i int) uint64 { return r.ring[(first+i)%recentCapacity] }
	i := sort.Search(r.count, func(i int) bool { return at(i) >= n })
	return i < r.count && at(i) == n
}

// restoreChecks runs restore verification probes one at a time, on the informer's
// run context. While one is in flight the tracker is suspended: no
// WaitForFreshness or AfterFreshness caller is told "fresh" until the server
// has answered (the cache may have reached their RV only on a history the
// server lost). Safe for concurrent use.
type restoreChecks struct {
	tracker *freshness.Tracker

	mu      sync.Mutex      // guards the fields below; taken before the tracker's
	ctx     context.Context // the run context; nil before start and after stop
	running bool            // a probe is in flight (the tracker is suspended)
	again   bool            // a suspicious write came while a probe ran
	probes  uint64
	wg      sync.WaitGroup
}

func (p *restoreChecks) start(ctx context.Context) {
	p.mu.Lock()
	p.ctx = ctx
	p.mu.Unlock()
}

func (p *restoreChecks) stop() {
	p.mu.Lock()
	p.ctx = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// launch runs verify unless a probe is in flight (then one more runs after
// it) or the informer is not running.
func (p *restoreChecks) launch(verify func(context.Context)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx == nil {
		return
	}
	if p.running {
		p.again = true
		return
	}
	p.running = true
	p.tracker.Suspend()
	ctx := p.ctx
	p.wg.Go(func() {
		defer p.tracker.Resume()
		for {
			p.mu.Lock()
			p.probes++
			p.mu.Unlock()
			pctx, cancel := context.WithTimeout(ctx, probeTimeout)
			verify(pctx)
			cancel()
			p.mu.Lock()
			if !p.again || p.ctx == nil {
				p.running = false
				p.mu.Unlock()
				return
			}
			p.again = false
			p.mu.Unlock()
		}
	})
}

func (p *restoreChecks) count() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.probes
}

// reached reports, without blocking, whether the cache has reached rv and
// no restore verification probe is in flight (CheckFresh's test: while a
// probe runs, a write below the cache may not be in it; the probe suspends
// the tracker).
func (f *FreshInformer) reached(rv freshness.RV) bool {
	return f.tracker.Reached(rv)
}

// checkWrite is told of a write's resource version (RecordWrite). A write
// below what the cache applied that the stream never delivered may come
// from a server restored to an older revision (etcd restored without
// --bump-revision): a consistent probe tells, and WaitForFreshness callers
// wait for its answer instead of being told "fresh" by the old history.
func (f *FreshInformer) checkWrite(rv freshness.RV) {
	if f.incomparable.Load() {
		return
	}
	// While no watch is open (the Reflector backs off or relists after a
	// stream ended) or one cannot be started (the server is down or
	// restarting), a write below the cache is suspicious even at a
	// resource version the stream delivered: a server back from a restore
	// without --bump-revision hands those out again, and no stream vouches
	// that the informer still watches the history it applied.
	outage := f.guard.WatchFailing() || !f.guard.WatchOpen()
	f.applyMu.Lock()
	suspicious := !f.restoring && f.tracker.Compare(rv) > 0 && (outage || !f.recent.contains(rv))
	f.applyMu.Unlock()
	if suspicious {
		f.restoreChecks.launch(f.verifyServer)
	}
}

// verifyAfterOutage checks the server once its watch could be started again
// after failing: a server that was down may come back from a restored etcd
// without a bumped revision, and a watch resumed from the old resource
// version would then wait, silently, for the old history to be rewritten.
// One consistent read tells (a restore is declared as by checkWrite).
func (f *FreshInformer) verifyAfterOutage() {
	if !f.incomparable.Load() {
		f.restoreChecks.launch(f.verifyServer)
	}
}

// verifyServer asks the server for its current resource version with a
// consistent read. Below the floor, the server's history went back: the
// informer declares it, forgets its freshness (waits block until the
// relist is applied) and relists from the restored server.
func (f *FreshInformer) verifyServer(ctx context.Context) {
	floor := f.guard.Floor()
	if floor.IsZero() {
		return
	}
	got, err := f.ServerResourceVersion(ctx)
	if err != nil {
		f.logger.V(2).Info("Restore verification probe failed", "err", err)
		return
	}
	server, err := freshness.ParseRV(got)
	if err != nil || server.AtLeast(floor) {
		return
	}
	f.lockApply()
	f.restoring = true
	f.recent.reset()
	f.tracker.Reset(freshness.RV{})
	f.unlockApply()
	f.guard.BeginRestore(reflector.Regression{Reason: reflector.RegressionServerBehind, ListResourceVersion: got, Floor: floor.String()})
}

// parseInitialFloor validates Options.InitialFloor ("" for none).
func parseInitialFloor(s string) (freshness.RV, error) {
	if s == "" {
		return freshness.RV{}, nil
	}
	rv, err := freshness.ParseRV(s)
	if err != nil {
		return freshness.RV{}, fmt.Errorf("initial floor: %w", err)
	}
	return rv, nil
}
