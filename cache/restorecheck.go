package cache

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/probe"
	"github.com/freshinformer/freshinformer/reflector"
)

// probeTimeout bounds one restore verification probe.
const probeTimeout = 10 * time.Second

// outageCheckMaxInterval caps the interval at which the restore check asks
// a server that does not answer during an outage: waits are released at
// most this long after it is back. A refused connection costs little.
const outageCheckMaxInterval = time.Second

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

// newRestoreChecks returns the informer's restore check runner: one check
// (one consistent read) in flight at a time, on the informer's run context.
// While one is in flight the tracker is suspended: no WaitForFreshness or
// AfterFreshness caller is told "fresh" until the server has answered (the
// cache may have reached their RV only on a history the server lost).
func newRestoreChecks(t *freshness.Tracker) *probe.Runner {
	return &probe.Runner{OnStart: t.Suspend, OnIdle: t.Resume}
}

// launchRestoreCheck runs verifyServer unless a check is in flight, in
// which case one more follows it (a suspicious write came meanwhile).
func (f *FreshInformer) launchRestoreCheck() {
	f.restoreChecks.Run(f.checkRestore, true)
}

// checkRestore runs verifyServer until the server answers, while an
// outage holds waits back (they must not wait forever on one lost read),
// or once otherwise. An answer to a read sent before the last failed
// request proves nothing of the server after it, nor one that a
// regression voided: the check asks again.
func (f *FreshInformer) checkRestore(ctx context.Context) {
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: outageCheckMaxInterval}
	for {
		failures, watches := f.outage.failed(), f.guard.Stats().Watches
		rctx, cancel := context.WithTimeout(ctx, probeTimeout)
		res := f.verifyServer(rctx)
		cancel()
		if held := f.outage.answered(&f.tracker, res == checkAnswered, failures, watches); !held && res != checkVoided {
			return
		}
		t := time.NewTimer(backoff.Step())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-f.outage.wake:
			t.Stop()
		case <-t.C:
		}
	}
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
		f.launchRestoreCheck()
	}
}

// outage holds waits back after a list or watch request failed to reach
// the server, or the Reflector resumed a watch the server ended well before
// its timeout (an apiserver that shuts down ends its watches, and may be
// back before the Reflector asks again): the server may be down or
// restarting, and the one the
// informer reaches next may come from an etcd restored without a bumped
// revision, which hands out again resource versions the cache applied on
// the history it lost. Until a consistent read sent after the last failure
// (the restore check) or a list requested after it shows otherwise, no
// wait is told "fresh" on the strength of that history. Ordinary watch
// expiries (410 Gone) do not begin one.
type outage struct {
	// mu guards the fields below. Only Tracker.mu (Suspend, Resume) is
	// taken under it; it is taken under applyMu (observeList) or alone.
	mu       sync.Mutex
	on       bool   // the tracker is suspended for the outage
	failures uint64 // requests failed; a read sent before the last proves nothing after it
	// afterLists is how many lists the Guard had queued at the last
	// failure: those may still be on their way to the cache, and say
	// nothing of the server after it.
	afterLists uint64
	// answeredAt is the Guard's watch request count when the last read
	// that answered was sent: a watch requested after it may have reached
	// a server that restarted since (verifyAfterOutage).
	answeredAt uint64
	// wake cuts the check's retry backoff short (the watch was started
	// again: the server is back). Buffered, one slot; not guarded.
	wake chan struct{}
}

// answeredSince reports whether a read sent since the Guard counted
// watches watch requests has answered.
func (o *outage) answeredSince(watches uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.answeredAt >= watches
}

// holding reports whether an outage holds waits: no read sent after the
// last failure has answered yet.
func (o *outage) holding() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.on
}

// fail records a failed request and reports whether it began an outage
// (the tracker is then suspended).
func (o *outage) fail(t *freshness.Tracker, listsQueued uint64) (begun bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failures++
	o.afterLists = listsQueued
	if o.on {
		return false
	}
	o.on = true
	t.Suspend()
	return true
}

// failed reports how many requests have failed.
func (o *outage) failed() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.failures
}

// answered records the restore check's outcome: a read sent after failures
// failed requests and watches watch requests answered (or did not), and
// reports whether an outage still holds waits. Resume may run the
// tracker's callbacks: the caller holds no informer lock.
func (o *outage) answered(t *freshness.Tracker, answered bool, failures, watches uint64) (held bool) {
	o.mu.Lock()
	if answered {
		o.answeredAt = max(o.answeredAt, watches)
	}
	end := o.on && answered && o.failures == failures
	if end {
		o.on = false
	}
	held = o.on
	o.mu.Unlock()
	if end {
		t.Resume()
	}
	return held
}

// listed records that the cache applied the n-th list the Guard queued:
// a list requested after the last failure ends an outage (the server
// answered, and the cache holds its state). applyMu is held, with the
// tracker's callbacks.
func (o *outage) listed(t *freshness.Tracker, n uint64) {
	o.mu.Lock()
	end := o.on && n > o.afterLists
	if end {
		o.on = false
		t.Resume()
	}
	o.mu.Unlock()
}

// end ends an outage whatever answered (the informer is a plain one: it
// tells no wait "fresh" anyway).
func (o *outage) end(t *freshness.Tracker) {
	o.mu.Lock()
	end := o.on
	o.on = false
	o.mu.Unlock()
	if end {
		t.Resume()
	}
}

// beginOutage runs when a list or watch request failed, or a watch that
// ended early is resumed (the Guard's OnRequestFailed, on the Reflector's
// goroutine): see outage. The check
// it starts retries until the server answers, so that waits are released
// one round trip after it is back, whatever the Reflector's own retry
// backoff.
func (f *FreshInformer) beginOutage() {
	if f.incomparable.Load() {
		return
	}
	if f.outage.fail(&f.tracker, f.guard.ListsQueued()) {
		f.launchRestoreCheck()
	}
}

// verifyAfterOutage runs when a watch could be started again after a
// failed request (the Guard's OnWatchResumed): a server that was down may
// come back from a restored etcd without a bumped revision, and a watch
// resumed from the old resource version would then wait, silently, for the
// old history to be rewritten. A check tells (a restore is declared as by
// checkWrite): the outage's own, woken from its backoff, if it has not
// answered yet; none if a read sent since this watch was requested has
// answered, or a restore was declared (its relist follows); else a new one
// (the server may have restarted again while the Reflector backed off).
// The Reflector waits for its answer.
func (f *FreshInformer) verifyAfterOutage(ctx context.Context) {
	if f.incomparable.Load() {
		f.outage.end(&f.tracker)
		return
	}
	f.lockApply()
	restoring := f.restoring
	f.unlockApply()
	switch {
	case restoring:
		return
	case f.outage.holding():
		select {
		case f.outage.wake <- struct{}{}:
		default:
		}
	case f.outage.answeredSince(f.guard.Stats().Watches):
		return
	default:
		f.launchRestoreCheck()
	}
	// The Reflector waits (its watch is not read meanwhile) so that a
	// restore the check declares is relisted at once; a server that does
	// not answer holds it back at most probeTimeout.
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	f.restoreChecks.WaitIdle(ctx)
}

// verifyServer asks the server, with a consistent read, whether its
// history went back: its resource version below the floor, or (from a
// snapshot of up to restoreCheckKeys objects) keys listed at states the
// cache had passed but does not hold, which new writes on a restored
// server cannot hide. With no floor (before the first list, or while a
// declared restore waits for its relist) there is no history to lose: it
// answers without a read. Either is declared: the
// informer forgets its freshness (waits block until the relist is
// applied) and relists from the restored server. It reports what the
// read showed.
func (f *FreshInformer) verifyServer(ctx context.Context) checkResult {
	floor := f.guard.Floor()
	if floor.IsZero() {
		return checkAnswered
	}
	gen := f.guard.Stats().Regressions
	var server freshness.RV
	var back listRegression
	var err error
	if n := f.restoreCheckKeys(); n > 0 {
		var s snapshot
		if s, err = f.listSnapshot(ctx, int64(n)); err == nil {
			server = s.rv
			if server.AtLeast(floor) {
				_, back = f.applySnapshot(s, gen, f.snapshotLimit >= 0)
			}
		}
	} else {
		server, err = f.serverResourceVersion(ctx)
	}
	if err != nil {
		f.logger.V(2).Info("Restore verification probe failed", "err", err)
		return checkNoAnswer
	}
	if !server.AtLeast(floor) {
		f.beginRestore(reflector.RegressionServerBehind, server, listRegression{}, gen)
	} else {
		f.declareWentBack(server, back, gen)
	}
	// A regression declared meanwhile voids the read (beginRestore and
	// applySnapshot ignore it): unless it is a restore, whose relist every
	// wait now waits for, the server has not answered for the cache's
	// present history.
	if f.guard.Stats().Regressions != gen {
		f.lockApply()
		restoring := f.restoring
		f.unlockApply()
		if !restoring {
			return checkVoided
		}
	}
	return checkAnswered
}

// checkResult is what a restore check's read showed.
type checkResult int

const (
	checkNoAnswer checkResult = iota // the server did not answer
	checkVoided                      // a regression declared meanwhile voids the read
	checkAnswered                    // the server answered for the cache's history, or a restore was declared
)

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

// declareWentBack declares what a snapshot at server showed (applySnapshot:
// keys gone back, or writes lost), if anything. gen is the guard's
// regression count when the snapshot was asked for.
func (f *FreshInformer) declareWentBack(server freshness.RV, back listRegression, gen uint64) {
	switch {
	case back.keys > 0:
		f.beginRestore(reflector.RegressionKeysWentBack, server, back, gen)
	case back.lostWrites > 0:
		f.beginRestore(reflector.RegressionWritesLost, server, back, gen)
	}
}

// beginRestore declares that the server's history went back, shown by a
// read at server, and has the informer start over from the server's state:
// freshness is forgotten (every wait blocks until the relist is applied),
// and what the stream still carries from before the relist is dropped
// (apply.go).
// gen is the guard's regression count when the read was sent: a
// regression declared since (this restore, found by another read, or a
// list's) voids it, so that Sync, a quiet probe and the check, which may
// each find one restore, declare it once.
func (f *FreshInformer) beginRestore(reason reflector.RegressionReason, server freshness.RV, back listRegression, gen uint64) {
	floor := f.guard.Floor()
	f.lockApply()
	if f.restoring || f.guard.Stats().Regressions != gen {
		f.unlockApply()
		return
	}
	f.restoring = true
	f.recent.reset()
	f.endZone()
	f.tracker.Reset(freshness.RV{})
	f.unlockApply()
	slices.Sort(back.sample)
	f.guard.BeginRestore(reflector.Regression{Reason: reason, ListResourceVersion: server.String(), Floor: floor.String(),
		Keys: back.keys, WritesLost: back.lostWrites, SampleKeys: back.sample})
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
