// Package prove is where resource versions proven off an informer's own
// stream enter. Its Prover asks the server with requests of its own
// (consistent lists and auxiliary watches through the informer's
// ListerWatcher, same namespace and selectors), compares what they show
// with the cache, and hands the informer evidence. Package cache's
// documentation ("Quiet resources") says when each runs and what it costs;
// this one says why each proof holds.
//
// The snapshot compare (snapshot.go). A consistent list of the informer's
// objects (served from the apiserver's watch cache on Kubernetes 1.31+,
// from etcd for resources without one) is the server's state at its RV L.
// Every write gives its object an RV of its own, so if the list holds
// exactly the cached keys at the cached RVs, the cache holds the state at
// L, and applied and the guard's floor move to L (Cache.Proved). Any
// difference proves nothing, and the bookmark route follows, reusing L.
// What a snapshot cannot show: a key created and deleted between applied
// and L is in neither, yet its events are still on the informer's stream
// (package cache's snapshot zone). A key listed at an RV up to applied that
// the cache does not hold at that RV shows the server's history went back
// (the cache applied every event up to applied, so it would hold that
// state), even when new writes have carried a restored server past the
// floor (Cache.Restore); a key listed older than a recorded write the list
// covers is a write the server lost (Cache.Found, or Cache.Restore when the
// snapshot proves nothing else).
//
// The quiet bookmark probe (quiet.go), for informers too large for a
// snapshot:
//
//  1. A consistent list with limit=1 gives the server's current RV R (a
//     quorum read; on Kubernetes 1.31+ it also brings the apiserver's watch
//     cache for the resource up to R).
//  2. An auxiliary watch from the applied RV A, with bookmarks and a 3 s
//     timeout: the apiserver sends a bookmark to such a watcher about 2 s
//     before its deadline. A bookmark B after events e1 < ... < ek proves
//     there is no event in (ek, B] (or in (A, B] without events), and the
//     events it shows are ones the informer's own stream delivers too.
//  3. Once applied reaches ek (at once if there were no events; an event
//     received but still queued is waited for), applied moves to B and the
//     guard's floor rises with it (Cache.ProvedGap). So the applied RV only
//     moves past events that are already in the indexer.
//
// A resource served without a watch cache never gets bookmarks: the first
// auxiliary watch that ends without one, on an informer whose stream never
// saw one either, has the informer relist (the list's RV, at least R,
// becomes the applied one in stream order), and its probes take the
// snapshot route from then on, which lists as much as a relist without the
// Reflector's backoff.
//
// Every consistent read is evidence too: one below the floor when it was
// sent shows the server's history went back (a consistent read never
// answers below what the server delivered before it), and the waits that
// joined before it was sent for targets above it are beyond the server
// (Informer.TooLarge), whether or not the same read proved the cache
// fresh.
//
// The restore check (check.go), after a recorded write below the cache
// that the stream never delivered, and before a large informer's stream
// resumes after a failed request: one consistent read, a snapshot of up
// to the snapshot limit's objects compared as above (without moving
// applied where the snapshot route is off), or the server's RV alone.
// Waits are held while it is in flight (Informer.Checking). After a stream
// that only ended early resumed (Resumed): the server's RV alone, read once
// for every informer of the resource that asked before the read was sent
// (Config.Shared); the outage holds waits meanwhile, and the resumed
// stream may end it first.
//
// The package knows the informer only through Informer (what a prover may
// read and hand in off the informer's apply lock) and Cache (what it may
// read and hand in under it, inside Informer.Compare): a comparison and
// the evidence it yields are one step of the cache's history. How the
// evidence decides when waits return is package trust's.
//
// A Prover has one lock, its probe Scheduler's and Runners': taken after
// the informer's apply lock (a relist after a failure tells the Scheduler,
// Recovered), before the guard's and the trust state's, which the
// Scheduler reads and a starting restore check tells (Informer.Checking)
// while holding it. Nothing else is called under it, and nothing in this
// package takes the apply lock while holding it.
package prove

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/probe"
	"github.com/freshinformer/freshinformer/internal/recorded"
	"github.com/freshinformer/freshinformer/internal/trust"
	"github.com/freshinformer/freshinformer/reflector"
)

// Informer is what a Prover sees of the informer it proves, off the
// informer's apply lock. Its methods must not block on the Prover.
type Informer interface {
	// View reads the trust state: the position, the stamp of a request
	// sent now, the pending targets.
	View() trust.View
	// Compare runs fn holding the apply lock, so that what fn reads of
	// the cache and the evidence it hands in are one step; what that
	// evidence releases (callbacks, declarations) runs once the lock is
	// released. fn must not call the Informer.
	Compare(fn func(c Cache))
	// TooLarge: a consistent read sent when the waits had joined seq
	// times answered server; the waits that joined by then for targets
	// above it fail.
	TooLarge(server freshness.RV, seq uint64)
	// Checking and CheckDone bracket a series of restore checks: waits
	// are held meanwhile. Answered: a check sent at st answered, which
	// ends an outage that began before it.
	Checking()
	CheckDone()
	Answered(st trust.Stamp)
	// Floor is the guard's floor now: a consistent read sent now never
	// answers below it from the same history.
	Floor() freshness.RV
	// RelistPending reports that a relist is on its way; RequestRelist
	// asks the Reflector for one, whose resource version then becomes the
	// applied one in stream order.
	RelistPending() bool
	RequestRelist()
	// Bookmarked reports whether the informer's own stream has seen a
	// bookmark.
	Bookmarked() bool
	// Log is the logger of the informer's run.
	Log() klog.Logger
}

// Cache is the informer's cache as a Compare function sees it, with the
// apply lock held: read-only (but for the recorded writes a comparison
// checks off), and the evidence that must change with it.
type Cache interface {
	// Position is the trust state's, which changes only under the apply
	// lock.
	Position() (trust.State, freshness.RV)
	// Len counts the cached keys; CachedRV is the resource version of
	// key's cached object.
	Len() int
	CachedRV(key string) (rv string, ok bool)
	// Delivered reports whether the stream recently applied an event at
	// rv.
	Delivered(rv freshness.RV) bool
	// Written is the keys of recorded writes the cache has not reached: a
	// comparison that settles them prunes or forgets them.
	Written() *recorded.Keys
	// Proved: the cache holds the server's state at rv, read at st; it
	// reports false if a regression found since voids the read.
	Proved(rv freshness.RV, st trust.Stamp) bool
	// ProvedGap: the stream holds no event in (lo, hi], shown by a watch
	// sent at st.
	ProvedGap(lo, hi freshness.RV, st trust.Stamp)
	// Restore declares r, shown by a read sent at st: the server's history
	// went back; the informer forgets its freshness and relists.
	Restore(r reflector.Regression, st trust.Stamp)
	// Found declares r, a regression the cache follows as it stands
	// (writes the server lost), before any wait it releases returns.
	Found(r reflector.Regression)
}

// Config configures a Prover.
type Config struct {
	// Lister is the informer's ListerWatcher (its namespace and
	// selectors); nil: nothing is probed.
	Lister toolscache.ListerWatcher
	// Clock times the staleness samples.
	Clock clock.PassiveClock
	// Delay is how long pending waits see no progress before a probe
	// (zero: the route's default, DefaultSnapshotDelay or
	// DefaultBookmarkDelay;
	// negative: no probes).
	Delay time.Duration
	// SnapshotLimit is the largest informer, in cached keys, that probes
	// and Sync prove fresh from a snapshot (negative: never).
	SnapshotLimit int
	// Shared sends the consistent reads of the server's resource version
	// (limit 1), shared with the informers of the same resource
	// (probe.SharedReads.For); nil: shared with nobody.
	Shared *probe.ReadGroup
	// RestoreCheckByRV has the restore check read the server's resource
	// version only where the snapshot route is off (for scripted servers
	// that know no current state).
	RestoreCheckByRV bool
}

// Prover proves one informer fresh off its stream, and checks the server
// for restores. Its counters are atomics; its one lock is its Scheduler's
// and Runners' (see the package documentation).
type Prover struct {
	// mu is the lock of the Scheduler and the Runners: taken after the
	// informer's apply lock, before the guard's and the trust state's.
	mu     sync.Mutex
	cfg    Config
	inf    Informer
	sched  probe.Scheduler // when the quiet probe runs
	checks probe.Runner    // the restore checks of suspicious writes
	// resumed runs the checks of resumed streams (Resumed): the outage
	// holds waits meanwhile, and the resumed stream may end it first.
	resumed probe.Runner
	reads   probe.Reads // what consistent reads told of the server
	// keys counts the indexer's keys (the informer's apply path keeps
	// it), so that routing a probe costs no scan of the indexer.
	keys atomic.Int64
	// newestWrite is the newest recorded write's resource version.
	newestWrite atomic.Pointer[freshness.RV]
	// noBookmarks: the resource gets no bookmarks (no watch cache), so the
	// bookmark route is a relist, a full list anyway: the snapshot route,
	// one list of the same size without the Reflector's backoff, is taken
	// whatever the informer's size.
	noBookmarks atomic.Bool

	requests, relists, snapshots, snapshotMatches, resumeChecks atomic.Uint64
}

// New returns a Prover of inf. It runs nothing before Start.
func New(cfg Config, inf Informer) *Prover {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Shared == nil {
		cfg.Shared = new(probe.ReadGroup)
	}
	p := &Prover{cfg: cfg, inf: inf}
	p.checks = probe.Runner{OnStart: inf.Checking, OnIdle: inf.CheckDone, Mu: &p.mu}
	p.resumed = probe.Runner{Mu: &p.mu}
	p.sched = probe.Scheduler{
		Mu:      &p.mu,
		Delay:   p.probeDelay,
		Applied: func() freshness.RV { return inf.View().Applied },
		Lowest:  func() (freshness.RV, bool) { v := inf.View(); return v.Lowest, v.AnyTarget },
		Busy:    inf.RelistPending,
		Probe:   p.probeOnce,
	}
	return p
}

// Start lets the Prover send requests, with contexts derived from ctx.
func (p *Prover) Start(ctx context.Context) {
	p.checks.Start(ctx)
	p.resumed.Start(ctx)
	p.sched.Start(ctx)
}

// Stop ends the requests in flight, waits for them and sends no more.
func (p *Prover) Stop() {
	p.checks.Stop()
	p.resumed.Stop()
	p.sched.Stop()
}

// Stats are a Prover's counters.
type Stats struct {
	// Probes counts quiet probes started; Requests the requests probes
	// and Sync sent; Relists the relists they asked for; Snapshots the
	// snapshots they compared with the cache, SnapshotMatches those that
	// moved the applied resource version; RestoreChecks the restore
	// checks run.
	Probes, Requests, Relists, Snapshots, SnapshotMatches, RestoreChecks uint64
}

// Stats returns the Prover's counters.
func (p *Prover) Stats() Stats {
	return Stats{Probes: p.sched.Probes(), Requests: p.requests.Load(), Relists: p.relists.Load(),
		Snapshots: p.snapshots.Load(), SnapshotMatches: p.snapshotMatches.Load(),
		RestoreChecks: p.checks.Runs() + p.resumed.Runs() + p.resumeChecks.Load()}
}

// KeysChanged tells the Prover the indexer gained (1) or lost (-1) a key.
func (p *Prover) KeysChanged(delta int64) { p.keys.Add(delta) }

// KeysListed tells the Prover a list left the indexer with n keys.
func (p *Prover) KeysListed(n int) { p.keys.Store(int64(n)) }

// Keys returns the key count the informer keeps.
func (p *Prover) Keys() int64 { return p.keys.Load() }

// Join counts a wait for target among those the quiet probe runs for,
// and reports true; with probing off it counts nothing and reports false.
// Every true Join is followed by one Leave.
func (p *Prover) Join(target freshness.RV) bool {
	if p.probeDelay() < 0 || p.cfg.Lister == nil {
		return false
	}
	p.sched.Join(target)
	return true
}

// Leave ends a wait Join counted.
func (p *Prover) Leave() { p.sched.Leave() }

// Recovered tells the Prover the informer applied a list sent at sent,
// after a request failed: probes wait for a server just back (see
// probe.Scheduler.Recovered).
func (p *Prover) Recovered(sent time.Time) { p.sched.Recovered(sent) }

// Idle reports whether no wait is counted and no timer or probe is left.
func (p *Prover) Idle() bool { return p.sched.Idle() }

// Probing reports whether a quiet probe is in flight.
func (p *Prover) Probing() bool { return p.sched.Running() }

// Reads is what consistent reads and recorded writes told of the server.
func (p *Prover) Reads() *probe.Reads { return &p.reads }

// RecordWrite takes in a recorded write's resource version: the newest
// known one if it is, a staleness sample, and, below the cache and never
// delivered by the stream, a reason for a restore check (check.go).
func (p *Prover) RecordWrite(rv freshness.RV) {
	for {
		old := p.newestWrite.Load()
		if old != nil && rv.Compare(*old) <= 0 || p.newestWrite.CompareAndSwap(old, &rv) {
			break
		}
	}
	p.checkWrite(rv)
	p.reads.Sample(p.cfg.Clock.Now(), rv)
}

// NewestWrite returns the newest recorded write's resource version (zero
// before any).
func (p *Prover) NewestWrite() freshness.RV {
	if rv := p.newestWrite.Load(); rv != nil {
		return *rv
	}
	return freshness.RV{}
}

// Staleness bounds how old the cache's view is (see probe.Reads): cover
// is the applied resource version while the cache is trusted.
func (p *Prover) Staleness(cover freshness.RV) (time.Duration, bool) {
	return p.reads.Staleness(cover, p.cfg.Clock.Now())
}
