package prove

import (
	"context"
	"time"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/probe"
	"github.com/freshinformer/freshinformer/internal/trust"
)

// The quiet-resource probe: how it proves freshness is told in package
// cache's documentation ("Quiet resources").

const (
	// DefaultSnapshotLimit is package cache's DefaultSnapshotProbeLimit
	// (its documentation gives the measurements behind it).
	DefaultSnapshotLimit = 500
	// DefaultSnapshotDelay and DefaultBookmarkDelay are the probe delays
	// of the two routes (package cache's DefaultSnapshotProbeDelay and
	// DefaultQuietProbeDelay).
	DefaultSnapshotDelay = 20 * time.Millisecond
	DefaultBookmarkDelay = 100 * time.Millisecond

	// AuxWatchTimeoutSeconds is the auxiliary watch's timeoutSeconds.
	// The apiserver schedules the pre-deadline bookmark at deadline-2s and
	// none at all when that is already past, so 3 is the smallest that
	// gets one, about a second after the watch starts.
	AuxWatchTimeoutSeconds = 3
	// probeRequestTimeout bounds a probe's list and its watch.
	probeRequestTimeout = AuxWatchTimeoutSeconds*time.Second + 5*time.Second
	// serverRVReuse is how long a consistent list's resource version
	// (from Sync) stands in for the probe's own list.
	serverRVReuse = time.Second
)

// probeDelay is the configured delay, or the default of the route a probe
// would take now; <0 means off.
func (p *Prover) probeDelay() time.Duration {
	switch {
	case p.cfg.Delay != 0:
		return p.cfg.Delay
	case p.snapshotRoute():
		return DefaultSnapshotDelay
	default:
		return DefaultBookmarkDelay
	}
}

// probeOnce runs one probe (the Scheduler's function). It reports whether
// the server was found behind every pending target. It probes nothing
// while waits are held for another reason (an outage, a check, a
// restore): what settles that releases them, and the server may be down.
func (p *Prover) probeOnce(ctx context.Context) (behind bool) {
	v := p.inf.View()
	if v.Held {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, probeRequestTimeout)
	defer cancel()
	server, proved, reused, err := p.readServer(ctx, v)
	if err != nil {
		p.inf.Log().V(4).Info("Freshness probe: consistent list failed", "err", err)
		return false
	}
	if p.inf.View().Held { // the read found a restore
		return false
	}
	// A read sent by this probe was sent after the waits that joined by
	// v.Seq: a target of theirs above the server's resource version is
	// beyond it, whether or not the read also proved the cache fresh. A
	// reused read was sent before some of them: it shows nothing above it.
	if !reused {
		p.inf.TooLarge(server, v.Seq)
	}
	if proved {
		return false
	}
	if now := p.inf.View(); !now.AnyTarget || server.Compare(now.Lowest) < 0 {
		return true // none is left, or those left joined since: probing for them can wait
	}
	if server.Compare(v.Applied) <= 0 {
		return false // the cache is at the server's resource version already
	}
	// On the snapshot route the cache differs from the snapshot (the
	// stream has events on their way, or the informer grew): prove it by
	// a bookmark.
	p.proveByBookmark(ctx, v.Applied, server, v.Stamp)
	return false
}

// readServer reads the server's resource version for a probe begun at v:
// on the snapshot route from a snapshot, which may prove the cache fresh
// by itself; otherwise with a consistent limit=1 list, or from a recent
// read (Sync's) that stands in for one (reused) when it is past the cache
// and the lowest pending target: it was sent before some waits joined, so
// it can release them but not show them beyond the server.
func (p *Prover) readServer(ctx context.Context, v trust.View) (server freshness.RV, proved, reused bool, err error) {
	if p.snapshotRoute() {
		server, proved, err = p.snapshotProbe(ctx, v.Stamp)
		return server, proved, false, err
	}
	server, age := p.reads.Newest()
	if age < serverRVReuse && server.Compare(v.Applied) > 0 && (!v.AnyTarget || server.Compare(v.Lowest) >= 0) {
		return server, false, true, nil
	}
	p.requests.Add(1)
	server, err = p.consistentRV(ctx, v.Stamp)
	return server, false, false, err
}

// proveByBookmark proves (start, server] free of events with an
// auxiliary watch's bookmark, sent at st; a resource that gets no
// bookmarks, or a start the server compacted, is relisted instead.
func (p *Prover) proveByBookmark(ctx context.Context, start, server freshness.RV, st trust.Stamp) {
	if p.noBookmarks.Load() {
		p.requestRelist()
		return
	}
	p.requests.Add(1)
	prove := func(lo, hi freshness.RV) {
		p.inf.Compare(func(c Cache) { c.ProvedGap(lo, hi, st) })
	}
	switch probe.AuxWatch(ctx, p.cfg.Lister, start, server, AuxWatchTimeoutSeconds, prove, p.inf.Log()) {
	case probe.NoBookmark:
		if !p.inf.Bookmarked() { // neither stream has seen one: no watch cache
			p.noBookmarks.Store(true)
			p.inf.Log().V(2).Info("Freshness probe: the resource gets no watch bookmarks (served without a watch cache?); probing by relisting from now on")
			p.requestRelist()
		}
	case probe.Expired:
		p.requestRelist()
	}
}

// ServerResourceVersion reads the server's current resource version with a
// consistent limit=1 list through the informer's ListerWatcher (or takes
// the answer of one sent after the call for another informer of the
// resource: Config.Shared), and records it as a staleness sample taken
// when the request was sent.
func (p *Prover) ServerResourceVersion(ctx context.Context) (freshness.RV, error) {
	rv, sent, err := p.cfg.Shared.Read(ctx, p.sendServerRead)
	if err != nil {
		return freshness.RV{}, err
	}
	p.reads.Record(sent, rv)
	return rv, nil
}

// sendServerRead sends the consistent limit=1 list (Shared's read).
func (p *Prover) sendServerRead(ctx context.Context) (freshness.RV, time.Time, error) {
	sent := p.cfg.Clock.Now()
	rv, err := probe.ServerResourceVersion(ctx, p.cfg.Lister)
	return rv, sent, err
}

// Sync reads the server's resource version for a read barrier: on the
// snapshot route from a snapshot, which, when the cache holds exactly its
// state, proves the cache fresh in the same round trip.
func (p *Prover) Sync(ctx context.Context) (freshness.RV, error) {
	st := p.inf.View().Stamp
	if p.snapshotRoute() {
		rv, _, err := p.snapshotProbe(ctx, st)
		return rv, err
	}
	p.requests.Add(1)
	return p.consistentRV(ctx, st)
}

// requestRelist has the Reflector relist: the list's resource version then
// becomes the applied one in stream order.
func (p *Prover) requestRelist() {
	if !p.inf.RelistPending() { // a probe that finds one pending asks for no other
		p.relists.Add(1)
	}
	p.inf.RequestRelist()
}
