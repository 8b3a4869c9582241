package cache

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/probe"
)

// The quiet-resource probe: how it proves freshness is told in the package
// documentation (doc.go, "Quiet resources").

// DefaultQuietProbeDelay is how long pending waits must see no progress on
// the informer's stream before it probes the server. The stream delivers a
// write within about a millisecond on a healthy apiserver (p99 under 1 ms
// measured, tens of ms on a loaded machine), so 100 ms of silence while a
// wait is pending means the stream has nothing for it, while the whole
// bounded wait stays well inside the 2.5 s target (the auxiliary watch's
// bookmark takes 1 to 2.25 s).
const DefaultQuietProbeDelay = 100 * time.Millisecond

const (
	// probeWatchTimeoutSeconds is the auxiliary watch's timeoutSeconds.
	// The apiserver schedules the pre-deadline bookmark at deadline-2s and
	// none at all when that is already past, so 3 is the smallest that
	// gets one, about a second after the watch starts.
	probeWatchTimeoutSeconds = 3
	// maxProbeDelay caps the delay between probes while waits stay
	// pending for resource versions the server has not reached.
	maxProbeDelay = 5 * time.Second
	// behindProbeDelay is the delay after a probe found the server behind
	// every pending target: only a server response can name a committed
	// resource version, so such targets come from a restored etcd or are
	// made up, and probing for them often would only cost.
	behindProbeDelay = 30 * time.Second
	// probeRequestTimeout bounds a probe's list and its watch.
	probeRequestTimeout = probeWatchTimeoutSeconds*time.Second + 5*time.Second
	// serverRVReuse is how long a consistent list's resource version
	// (from Sync) stands in for the probe's own list.
	serverRVReuse = time.Second
	// maxStalenessSamples bounds the samples kept for Staleness.
	maxStalenessSamples = 64
)

// WithQuietProbeDelay sets how long pending waits must see no progress on
// the informer's stream before the informer probes the server, on both
// routes (when zero: DefaultSnapshotProbeDelay for an informer small enough
// for the snapshot route, DefaultQuietProbeDelay otherwise). A negative
// delay turns probing off:
// waits on quiet resources then last until the next bookmark (about a
// minute), and Sync is as slow.
func WithQuietProbeDelay(d time.Duration) Option {
	return func(o *Options) { o.QuietProbeDelay = d }
}

// ProbeStats are an informer's freshness-probe counters since it was made.
type ProbeStats struct {
	// Probes counts probes started (one per quiet spell with pending
	// waits, however many callers wait).
	Probes uint64
	// Requests counts the requests probes and Sync sent: consistent
	// limit=1 lists and auxiliary watches.
	Requests uint64
	// Advances counts the times a probe moved the applied resource
	// version forward.
	Advances uint64
	// Relists counts relists requested from the informer's Reflector
	// because the resource gets no bookmarks (no watch cache) or the
	// auxiliary watch found the applied resource version compacted.
	Relists uint64
	// Snapshots counts the snapshots (consistent lists of the informer's
	// objects) that probes and Sync compared with the cache, and
	// SnapshotMatches those that held exactly the cached state, so that
	// the applied resource version moved to theirs.
	Snapshots, SnapshotMatches uint64
	// BehindSnapshot counts the events the informer's stream delivered
	// after a snapshot had moved the applied resource version past them:
	// changes to keys created and deleted again before the snapshot,
	// which the cache never holds but handlers hear of.
	BehindSnapshot uint64
}

// ProbeStats returns the informer's probe counters.
func (f *FreshInformer) ProbeStats() ProbeStats {
	p := &f.quiet
	return ProbeStats{Probes: p.probes.Load(), Requests: p.requests.Load(), Advances: f.trust.View().Advances, Relists: p.relists.Load(),
		Snapshots: p.snapshots.Load(), SnapshotMatches: p.snapshotMatches.Load(), BehindSnapshot: p.behindSnapshot.Load()}
}

// quietProbe is one informer's probe state. Its mutex guards the fields
// below it; taken before the trust's lock (view) and its Runner's.
type quietProbe struct {
	probes, requests, relists                  atomic.Uint64
	snapshots, snapshotMatches, behindSnapshot atomic.Uint64
	// noBookmarks: the resource gets no bookmarks (no watch cache), so the
	// bookmark route is a relist, a full list anyway: the snapshot route,
	// one list of the same size without the Reflector's backoff, is taken
	// whatever the informer's size.
	noBookmarks atomic.Bool
	runner      probe.Runner // the probe in flight; its lock is taken under mu

	// timers counts the armed timer's callback until it has returned or
	// the timer is stopped before firing: stopProbes waits for it, so no
	// callback outlives the informer.
	timers sync.WaitGroup

	mu      sync.Mutex
	waiters int          // waits in their slow path
	timer   *time.Timer  // armed while waits are pending and no probe runs
	armedAt freshness.RV // the applied resource version when armed
	stopped bool
	idle    int // consecutive probes after which waits were still pending

	serverRV   freshness.RV // the newest consistent list's resource version
	serverRVAt time.Time    // when that list's answer came, on the real clock (reuse is about the server's pace)

	// Staleness samples: at time at, the server had committed nothing
	// newer than rv. covered is the newest sample time the cache has
	// reached; samples holds the others, times and resource versions
	// both increasing.
	samples    []stalenessSample
	coveredAt  time.Time
	hasCovered bool
}

type stalenessSample struct {
	at time.Time
	rv freshness.RV
}

// probeDelay is the configured delay, or the default of the route a probe
// would take now; <0 means off.
func (f *FreshInformer) probeDelay() time.Duration {
	switch {
	case f.quietDelay != 0:
		return f.quietDelay
	case f.snapshotRoute():
		return DefaultSnapshotProbeDelay
	default:
		return DefaultQuietProbeDelay
	}
}

// joinWait counts a wait for target in its slow path, and arms the probe
// timer if none is armed. The probes back off while waits stay pending
// (rearmLocked); a wait for a lower target than any pending one ends the
// backoff: the pending ones may be out of the server's reach (a made-up
// or restored target), this one may well not be.
func (f *FreshInformer) joinWait(target freshness.RV) {
	p := &f.quiet
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waiters++
	if p.stopped {
		return
	}
	if p.idle > 0 { // backing off: is this the lowest target? (scanned only then)
		if v := f.trust.View(); !v.AnyTarget || target.Compare(v.Lowest) < 0 {
			p.idle = 0
			f.disarmLocked()
		}
	}
	if p.timer == nil && !p.runner.Running() {
		f.armLocked(f.probeDelay())
	}
}

func (f *FreshInformer) leaveWait() {
	p := &f.quiet
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waiters--
	if p.waiters > 0 {
		return
	}
	// Idle again: no timer, and the running probe (if any) ends.
	p.idle = 0
	f.disarmLocked()
	p.runner.Cancel()
}

// armLocked schedules a probe check after d. p.mu is held.
func (f *FreshInformer) armLocked(d time.Duration) {
	p := &f.quiet
	p.armedAt = f.trust.View().Applied
	p.timers.Add(1)
	p.timer = time.AfterFunc(d, f.probeDue) // real time: probes talk to a real server
}

// disarmLocked stops the armed timer, if any. p.mu is held.
func (f *FreshInformer) disarmLocked() {
	p := &f.quiet
	if p.timer != nil && p.timer.Stop() {
		p.timers.Done() // it will not fire
	}
	p.timer = nil
}

// probeDue runs when the timer fires: it probes unless the stream moved
// meanwhile (the waits are being met by the stream: check again later).
func (f *FreshInformer) probeDue() {
	p := &f.quiet
	defer p.timers.Done()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.timer = nil
	if p.stopped || p.waiters == 0 || p.runner.Running() {
		return
	}
	if f.trust.View().Applied.Compare(p.armedAt) > 0 || f.guard.RelistPending() {
		// The stream moved (it is meeting the waits), or a relist is on
		// its way through it: check again later.
		f.armLocked(f.probeDelay())
		return
	}
	if !p.runner.Run(f.runProbe, false) {
		// Not running yet: the informer's first list will need a probe.
		f.rearmLocked(false)
		return
	}
	p.probes.Add(1)
}

// runProbe is one probe run (the Runner's function).
func (f *FreshInformer) runProbe(ctx context.Context) {
	start := f.trust.View().Applied
	behind := f.probeOnce(ctx)
	progressed := f.trust.View().Applied.Compare(start) > 0
	p := &f.quiet
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || p.waiters == 0 {
		return
	}
	if progressed {
		p.idle = -1 // the probes are meeting waits: the next at the base delay
	}
	f.rearmLocked(behind)
}

// rearmLocked arms the next check while waits are still pending, backing
// off while they wait for resource versions the server has not reached.
// p.mu is held.
func (f *FreshInformer) rearmLocked(behind bool) {
	p := &f.quiet
	p.idle++
	d := min(f.probeDelay()<<min(p.idle, 6), maxProbeDelay)
	if behind {
		d = behindProbeDelay
	}
	f.armLocked(d)
}

// stopProbes ends probing for good and waits for a running probe to end.
// The informer calls it once it has stopped.
func (f *FreshInformer) stopProbes() {
	p := &f.quiet
	p.mu.Lock()
	p.stopped = true
	f.disarmLocked()
	p.mu.Unlock()
	p.runner.Stop() // outside p.mu: a run's end takes it
	p.timers.Wait() // a callback that fired before Stop
}

// probeOnce runs one probe (see the package comment above). It reports
// whether the server was found behind every pending target. It probes
// nothing while waits are held for another reason (an outage, a check, a
// restore): what settles that releases them, and the server may be down.
func (f *FreshInformer) probeOnce(ctx context.Context) (behind bool) {
	v := f.trust.View()
	if v.Held {
		return false
	}
	start, st, seq := v.Applied, v.Stamp, v.Seq
	ctx, cancel := context.WithTimeout(ctx, probeRequestTimeout)
	defer cancel()

	p := &f.quiet
	p.mu.Lock()
	server, noBookmarks := p.serverRV, p.noBookmarks.Load()
	// A recent read (Sync's) stands in for this probe's when it is past
	// the cache and the lowest pending target: it was sent before some
	// waits joined, so it can release them but not show them beyond the
	// server.
	reuse := time.Since(p.serverRVAt) < serverRVReuse && server.Compare(start) > 0 &&
		(!v.AnyTarget || server.Compare(v.Lowest) >= 0)
	p.mu.Unlock()
	if f.snapshotRoute() {
		var proved bool
		var err error
		if server, proved, err = f.snapshotProbe(ctx, st); err != nil {
			f.log().V(4).Info("Freshness probe: consistent list failed", "err", err)
			return false
		}
		if proved {
			return false
		}
		// The cache differs from the snapshot (the stream has events on
		// their way, or the informer grew): prove it by a bookmark.
	} else if !reuse {
		var err error
		f.quiet.requests.Add(1)
		if server, err = f.consistentRV(ctx, st); err != nil {
			f.log().V(4).Info("Freshness probe: consistent list failed", "err", err)
			return false
		}
	}
	if f.trust.View().Held { // the read found a restore
		return false
	}
	// A read sent by this probe was sent after the waits that joined by
	// seq: a target of theirs above the server's resource version is
	// beyond it. A reused read was sent before some of them: it shows
	// nothing above it.
	if !reuse {
		f.trust.TooLarge(server, seq).Run()
	}
	if v := f.trust.View(); !v.AnyTarget || server.Compare(v.Lowest) < 0 {
		return true // none is left, or those left joined since: probing for them can wait
	}
	if server.Compare(start) <= 0 {
		return false // the cache is at the server's resource version already
	}
	if noBookmarks {
		f.requestRelist()
		return false
	}
	f.quiet.requests.Add(1)
	prove := func(lo, hi freshness.RV) {
		f.applyMu.Lock()
		defer f.unlockApply()
		f.settle(f.trust.ProvedGap(lo, hi, st))
	}
	switch probe.AuxWatch(ctx, f.lw, start, server, probeWatchTimeoutSeconds, prove, f.log()) {
	case probe.NoBookmark:
		if f.bookmarks.Load() == 0 { // neither stream has seen one: no watch cache
			p.noBookmarks.Store(true)
			f.log().V(2).Info("Freshness probe: the resource gets no watch bookmarks (served without a watch cache?); probing by relisting from now on")
			f.requestRelist()
		}
	case probe.Expired:
		f.requestRelist()
	}
	return false
}

// serverResourceVersion reads the server's current resource version with a
// consistent limit=1 list through the informer's ListerWatcher, and records
// it as a staleness sample taken when the request was sent.
func (f *FreshInformer) serverResourceVersion(ctx context.Context) (freshness.RV, error) {
	sent := f.clock.Now()
	rv, err := probe.ServerResourceVersion(ctx, f.lw)
	if err != nil {
		return freshness.RV{}, err
	}
	f.recordServerRV(sent, rv)
	return rv, nil
}

// recordServerRV records rv, from a consistent read sent at sent, as the
// server's newest known resource version and as a staleness sample.
func (f *FreshInformer) recordServerRV(sent time.Time, rv freshness.RV) {
	p := &f.quiet
	p.mu.Lock()
	if rv.Compare(p.serverRV) >= 0 {
		p.serverRV, p.serverRVAt = rv, time.Now()
	}
	p.mu.Unlock()
	f.addStalenessSample(sent, rv)
}

// requestRelist has the Reflector relist (see guard.Guard.RequestRelist):
// the list's resource version then becomes the applied one in stream order.
func (f *FreshInformer) requestRelist() {
	if !f.guard.RelistPending() { // a probe that finds one pending asks for no other
		f.quiet.relists.Add(1)
	}
	f.guard.RequestRelist()
}

// ServerResourceVersion asks the server for the resource's current
// resource version: a consistent list with limit=1 through the informer's
// ListerWatcher (same namespace and selectors; a quorum read: use
// sparingly). It is what Sync, the quiet-resource probe and the restore
// check start with.
func (f *FreshInformer) ServerResourceVersion(ctx context.Context) (string, error) {
	rv, err := f.serverResourceVersion(ctx)
	if err != nil {
		return "", err
	}
	return rv.String(), nil
}
