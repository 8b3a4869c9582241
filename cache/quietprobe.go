package cache

import (
	"context"
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
	// probeRequestTimeout bounds a probe's list and its watch.
	probeRequestTimeout = probeWatchTimeoutSeconds*time.Second + 5*time.Second
	// serverRVReuse is how long a consistent list's resource version
	// (from Sync) stands in for the probe's own list.
	serverRVReuse = time.Second
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
	return ProbeStats{Probes: p.sched.Probes(), Requests: p.requests.Load(), Advances: f.trust.View().Advances, Relists: p.relists.Load(),
		Snapshots: p.snapshots.Load(), SnapshotMatches: p.snapshotMatches.Load(), BehindSnapshot: p.behindSnapshot.Load()}
}

// quietProbe is one informer's probe state: when probes run (sched), what
// consistent reads told (reads), and counters.
type quietProbe struct {
	requests, relists                          atomic.Uint64
	snapshots, snapshotMatches, behindSnapshot atomic.Uint64
	// noBookmarks: the resource gets no bookmarks (no watch cache), so the
	// bookmark route is a relist, a full list anyway: the snapshot route,
	// one list of the same size without the Reflector's backoff, is taken
	// whatever the informer's size.
	noBookmarks atomic.Bool
	sched       probe.Scheduler
	reads       probe.Reads
}

// initProbes wires the scheduler to the informer.
func (f *FreshInformer) initProbes() {
	f.quiet.sched = probe.Scheduler{
		Delay:   f.probeDelay,
		Applied: func() freshness.RV { return f.trust.View().Applied },
		Lowest:  func() (freshness.RV, bool) { v := f.trust.View(); return v.Lowest, v.AnyTarget },
		Busy:    func() bool { return f.guard.RelistPending() },
		Probe:   f.probeOnce,
	}
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
	server, age := p.reads.Newest()
	// A recent read (Sync's) stands in for this probe's when it is past
	// the cache and the lowest pending target: it was sent before some
	// waits joined, so it can release them but not show them beyond the
	// server.
	reuse := age < serverRVReuse && server.Compare(start) > 0 &&
		(!v.AnyTarget || server.Compare(v.Lowest) >= 0)
	proved := false
	if f.snapshotRoute() {
		var err error
		if server, proved, err = f.snapshotProbe(ctx, st); err != nil {
			f.log().V(4).Info("Freshness probe: consistent list failed", "err", err)
			return false
		}
		reuse = false
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
	// beyond it, whether or not the read also proved the cache fresh. A
	// reused read was sent before some of them: it shows nothing above it.
	if !reuse {
		f.trust.TooLarge(server, seq).Run()
	}
	if proved {
		return false
	}
	if v := f.trust.View(); !v.AnyTarget || server.Compare(v.Lowest) < 0 {
		return true // none is left, or those left joined since: probing for them can wait
	}
	if server.Compare(start) <= 0 {
		return false // the cache is at the server's resource version already
	}
	// On the snapshot route the cache differs from the snapshot (the
	// stream has events on their way, or the informer grew): prove it by
	// a bookmark.
	if p.noBookmarks.Load() {
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
	f.quiet.reads.Record(sent, rv)
	return rv, nil
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
