package cache

import (
	"context"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/prove"
	"github.com/freshinformer/freshinformer/internal/recorded"
	"github.com/freshinformer/freshinformer/internal/resources"
	"github.com/freshinformer/freshinformer/internal/trust"
	"github.com/freshinformer/freshinformer/reflector"
)

// The provers off the informer's stream (the quiet-resource probe, Sync's
// read, the restore check) live in internal/prove; how they prove
// freshness is told in the package documentation (doc.go, "Quiet
// resources"). This file holds their options, their counters, and what
// the informer is to them (proverOwner, cacheView).

// DefaultSnapshotProbeLimit is the largest informer, in cached objects,
// that the quiet-resource probe and Sync prove fresh from a snapshot: one
// consistent list of the informer's objects, compared key by key with the
// cache. A snapshot of 500 objects answers in one round trip and about
// 240 KiB of JSON; larger ones grow in time and size, where the bookmark
// route costs under 1 KiB and about a second (docs/benchmarks.md, "Quiet
// resources: the snapshot route"). A resource that gets no bookmarks (no
// watch cache) takes the snapshot route at any size: its other route is a
// relist, which lists as much.
const DefaultSnapshotProbeLimit = prove.DefaultSnapshotLimit

// DefaultSnapshotProbeDelay is how long pending waits see no progress
// before an informer small enough for the snapshot route probes: a few
// stream latencies (about a millisecond each on a healthy apiserver), since
// that route answers in one round trip.
const DefaultSnapshotProbeDelay = prove.DefaultSnapshotDelay

// DefaultQuietProbeDelay is how long pending waits must see no progress
// on the informer's stream before it probes the server: 100 ms of silence
// (a write's event takes about a millisecond, tens on a loaded machine)
// means the stream has nothing for them, and the auxiliary watch's
// bookmark (1 to 2.25 s) still ends the wait well inside 2.5 s.
const DefaultQuietProbeDelay = prove.DefaultBookmarkDelay

// WithSnapshotProbeLimit sets the largest informer, in cached objects, that
// probes and Sync prove fresh from a snapshot (DefaultSnapshotProbeLimit
// when zero): a consistent list of the informer's objects (its namespace
// and selectors, at most n+1 of them) that, when it holds exactly the
// cached keys at the cached resource versions, shows that the cache already
// holds the state at the list's resource version. A negative n turns the
// snapshot route off: probes then always use the auxiliary watch's
// bookmark (about a second), or a relist where the resource gets no
// bookmarks. The restore check compares keys either way, up to n of them
// (DefaultSnapshotProbeLimit when n is negative; it runs only after failed
// requests and suspicious writes): without them, a restore that new writes
// outran goes unseen.
func WithSnapshotProbeLimit(n int) Option {
	return func(o *Options) { o.SnapshotProbeLimit = n }
}

// WithQuietProbeDelay sets how long pending waits must see no progress on
// the informer's stream before the informer probes the server, on both
// routes (when zero: DefaultSnapshotProbeDelay for an informer small enough
// for the snapshot route, DefaultQuietProbeDelay otherwise). A negative
// delay turns probing off: waits on quiet resources then last until the
// next bookmark (about a minute), and Sync is as slow.
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
	s := f.prover.Stats()
	return ProbeStats{Probes: s.Probes, Requests: s.Requests, Advances: f.trust.View().Advances, Relists: s.Relists,
		Snapshots: s.Snapshots, SnapshotMatches: s.SnapshotMatches, BehindSnapshot: f.zone.Behind()}
}

// ServerResourceVersion asks the server for the resource's current
// resource version: a consistent list with limit=1 through the informer's
// ListerWatcher, or one sent after the call for an informer sharing its
// ServerReads (a quorum read: use sparingly). Sync, the quiet-resource
// probe and the restore check start with it.
func (f *FreshInformer) ServerResourceVersion(ctx context.Context) (string, error) {
	rv, err := f.prover.ServerResourceVersion(ctx)
	if err != nil {
		return "", err
	}
	return rv.String(), nil
}

// proverOwner is what the informer is to its prover (prove.Informer).
type proverOwner struct{ f *FreshInformer }

func (o proverOwner) View() trust.View { return o.f.trust.View() }

func (o proverOwner) Compare(fn func(c prove.Cache)) {
	o.f.applyMu.Lock()
	defer o.f.unlockApply()
	fn(cacheView(o))
}

func (o proverOwner) TooLarge(server freshness.RV, seq uint64) {
	o.submit(trust.Read{Shows: trust.ReadBehindWaits, Server: server, Seq: seq})
}
func (o proverOwner) Checking()  { o.submit(trust.Check{}) }
func (o proverOwner) CheckDone() { o.submit(trust.Check{Done: true}) }
func (o proverOwner) Answered(st trust.Stamp) {
	o.submit(trust.Read{Shows: trust.ReadAnswered, Stamp: st})
}

// submit hands e to the trust state off the apply lock, and runs what it
// released.
func (o proverOwner) submit(e trust.Evidence) {
	due, _ := o.f.trust.Submit(e)
	due.Run()
}
func (o proverOwner) Floor() freshness.RV { return o.f.guard.Floor() }
func (o proverOwner) RelistPending() bool { return o.f.guard.RelistPending() }
func (o proverOwner) RequestRelist()      { o.f.guard.RequestRelist() }
func (o proverOwner) Bookmarked() bool    { return o.f.counts.bookmarks.Load() > 0 }
func (o proverOwner) Log() klog.Logger    { return o.f.log() }

// cacheView is the cache as a prover's comparison sees it (prove.Cache):
// applyMu is held while one is in use.
type cacheView struct{ f *FreshInformer }

func (c cacheView) Position() (trust.State, freshness.RV) { return c.f.trust.Owned() }
func (c cacheView) Len() int                              { return len(c.f.indexer.ListKeys()) }
func (c cacheView) Delivered(rv freshness.RV) bool        { return c.f.recent.Contains(rv) }
func (c cacheView) Written() *recorded.Keys               { return &c.f.written }
func (c cacheView) Found(r reflector.Regression)          { c.f.found(r, false) }

func (c cacheView) CachedRV(key string) (string, bool) {
	obj, ok, _ := c.f.indexer.GetByKey(key)
	if !ok {
		return "", false
	}
	return resources.ResourceVersion(obj), true
}

func (c cacheView) Proved(rv freshness.RV, st trust.Stamp) bool {
	ok := c.f.submit(trust.Proof{To: rv, Stamp: st})
	if ok {
		c.f.zone.Begin(rv) // the stream behind the snapshot (internal/snapshotzone)
	}
	return ok
}

func (c cacheView) ProvedGap(lo, hi freshness.RV, st trust.Stamp) {
	c.f.submit(trust.Proof{From: lo, To: hi, Stamp: st})
}

func (c cacheView) Restore(r reflector.Regression, st trust.Stamp) { c.f.beginRestore(r, st) }

// beginRestore declares r, which shows the server's history went back
// (a read at r.ListResourceVersion; applyMu held), and has the informer
// start over from the server's state: freshness is forgotten (every wait
// blocks until the relist is applied), what the stream still carries from
// before the relist is dropped (apply.go), and the relist is asked for at
// once. st is the stamp of the read: a regression found since voids it,
// so that Sync, a quiet probe and a check, which may each find one
// restore, declare it once.
func (f *FreshInformer) beginRestore(r reflector.Regression, st trust.Stamp) {
	if !f.submit(trust.Read{Shows: trust.ReadRestored, Stamp: st}) {
		return
	}
	f.recent.Reset()
	f.zone.End()
	f.written.Reset()
	slices.Sort(r.SampleKeys)
	f.declare = append(f.declare, r)
	f.guard.RequestRelist()
}
