package cache

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/handlers"
	"github.com/freshinformer/freshinformer/internal/trust"
	"github.com/freshinformer/freshinformer/reflector"
)

// The snapshot route of the quiet-resource probe: how it proves freshness
// is told in the package documentation (doc.go, "Quiet resources").

// DefaultSnapshotProbeLimit is the largest informer, in cached objects,
// that the quiet-resource probe and Sync prove fresh from a snapshot: one
// consistent list of the informer's objects, compared key by key with the
// cache. Measured on a real apiserver (docs/benchmarks.md, "Quiet
// resources: the snapshot route"), a snapshot of 500 objects answers in
// one round trip (p50 about 25 ms for calls apart, about 97 ms for calls
// back to back, which the apiserver paces by its 100 ms progress-request
// period) and lists about 240 KiB of JSON; above it the list's own time
// and size grow (p99 134 ms and 470 KiB at 1000), while the bookmark route
// costs under 1 KiB and about a second. A resource that gets no bookmarks
// (served without a watch cache) takes the snapshot route at any size:
// its other route is a relist, which lists as much.
const DefaultSnapshotProbeLimit = 500

// DefaultSnapshotProbeDelay is how long pending waits see no progress
// before an informer small enough for the snapshot route probes. The
// stream delivers a write within about a millisecond on a healthy
// apiserver; the snapshot route answers in one round trip, so waiting
// longer than a few stream latencies before it only adds to every quiet
// wait.
const DefaultSnapshotProbeDelay = 20 * time.Millisecond

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

// snapshotRoute reports whether probes take the snapshot route: the
// informer is small enough, or its resource gets no bookmarks (then the
// other route is a relist, which lists as much).
func (f *FreshInformer) snapshotRoute() bool {
	return f.snapshotLimit >= 0 && f.lw != nil && (f.cachedKeys.Load() <= int64(f.snapshotLimit) || f.quiet.noBookmarks.Load())
}

// snapshot is a consistent list of the informer's objects (its namespace
// and selectors): the server's state at rv, or its first objects.
type snapshot struct {
	rv       freshness.RV
	items    []runtime.Object
	complete bool // every object the informer lists
	// floor is the Guard's when the list was sent: a consistent read
	// below it proves the server's history went back.
	floor freshness.RV
}

// listSnapshot reads a snapshot of at most limit objects, following the
// server's continue tokens (a server may answer with fewer objects than
// asked for; every page is of the first's resource version), and records
// its resource version as the server's newest known one.
func (f *FreshInformer) listSnapshot(ctx context.Context, limit int64) (snapshot, error) {
	lw := toolscache.ToListerWatcherWithContext(f.lw)
	sent := f.clock.Now()
	s := snapshot{floor: f.guard.Floor()}
	opts := metav1.ListOptions{Limit: limit}
	for {
		obj, err := lw.ListWithContext(ctx, opts)
		if err != nil {
			return snapshot{}, err
		}
		list, err := meta.ListAccessor(obj)
		if err != nil {
			return snapshot{}, err
		}
		items, err := meta.ExtractList(obj)
		if err != nil {
			return snapshot{}, err
		}
		if opts.Continue == "" {
			if s.rv, err = freshness.ParseRV(list.GetResourceVersion()); err != nil {
				return snapshot{}, fmt.Errorf("the server's list resource version: %w", err)
			}
			f.quiet.reads.Record(sent, s.rv)
		}
		s.items = append(s.items, items...)
		opts.Continue = list.GetContinue()
		if opts.Continue == "" || len(items) == 0 {
			s.complete = opts.Continue == ""
			return s, nil
		}
		if opts.Limit = limit - int64(len(s.items)); opts.Limit <= 0 {
			return s, nil
		}
	}
}

// snapshotProbe proves the cache fresh from a snapshot when it can (see
// compareSnapshot). It returns the snapshot's resource version, the
// server's current one, and whether the cache is now at least that fresh.
// st is the trust's stamp when the probe began.
func (f *FreshInformer) snapshotProbe(ctx context.Context, st trust.Stamp) (server freshness.RV, proved bool, err error) {
	// One more object than cached: a longer list cannot match.
	f.quiet.requests.Add(1)
	s, err := f.listSnapshot(ctx, f.cachedKeys.Load()+1)
	if err != nil {
		return freshness.RV{}, false, err
	}
	f.quiet.snapshots.Add(1)
	return s.rv, f.compareSnapshot(s, st, true), nil
}

// compareSnapshot compares a snapshot, read with the stamp st, with the
// cache, which holds the state at the applied resource version A. Every
// write gives its object a resource version of its own, so:
//
//   - a snapshot below the floor when it was sent shows the server's
//     history went back (a consistent read never answers below what the
//     server delivered before it): a restore is declared;
//   - a key listed at a resource version up to A that the cache does not
//     hold at that resource version shows the same (the cache applied
//     every event up to A, so it would hold that state), even when new
//     writes have carried a restored server past the floor;
//   - with prove, if the snapshot holds exactly the cached keys at the
//     cached resource versions, the cache holds the state at the
//     snapshot's resource version, and the applied one moves there
//     (proved). Events in between can only concern keys created and
//     deleted again before the snapshot: the stream still delivers them,
//     to handlers but not to the indexer (zoneEvent). A key listed older
//     than a write recorded for it that the snapshot covers
//     (RecordWrittenObject) is a lost write: declared before any wait it
//     releases;
//   - anything else proves nothing.
func (f *FreshInformer) compareSnapshot(s snapshot, st trust.Stamp, prove bool) (proved bool) {
	f.applyMu.Lock()
	defer f.unlockApply()
	if f.state() != trust.Trusted {
		return false
	}
	if !s.rv.AtLeast(s.floor) {
		f.beginRestore(reflector.RegressionServerBehind, s.rv, s.floor, listRegression{}, st)
		return false
	}
	cur := f.applied()
	at := s.rv.Compare(cur)
	if at < 0 {
		return true // the stream overtook the snapshot: fresher already
	}
	// At the applied RV itself the snapshot must match too: a restored
	// server whose new writes reached exactly the floor shows its keys.
	var back listRegression
	checkWrites := f.written.Len() > 0
	same := s.complete && len(s.items) == len(f.indexer.ListKeys())
	seen := make(map[string]struct{}, len(s.items)) // a key listed twice leaves a cached one unlisted
	for _, item := range s.items {
		key, err := toolscache.MetaNamespaceKeyFunc(item)
		if err != nil {
			return false
		}
		if _, dup := seen[key]; dup {
			return false
		}
		seen[key] = struct{}{}
		listedRVs := resourceVersion(item)
		listed, err := freshness.ParseRV(listedRVs)
		if err != nil {
			return false
		}
		if checkWrites && f.written.Lost(key, listedRVs, s.rv) {
			back.add(key, &back.lostWrites)
		}
		obj, ok, _ := f.indexer.GetByKey(key)
		var cachedRV freshness.RV
		if ok {
			if cachedRV, err = freshness.ParseRV(resourceVersion(obj)); err != nil {
				same = false // a malformed cached state: neither proof
				continue
			}
		}
		if ok && cachedRV.Compare(listed) == 0 {
			continue
		}
		same = false
		if listed.Compare(cur) <= 0 {
			back.add(key, &back.keys)
		}
	}
	switch {
	case back.keys > 0:
		f.beginRestore(reflector.RegressionKeysWentBack, s.rv, cur, back, st)
		return false
	case !same || !prove:
		if back.lostWrites > 0 {
			f.beginRestore(reflector.RegressionWritesLost, s.rv, cur, back, st)
		}
		return false
	case back.lostWrites > 0:
		// The cache holds the server's state, which lost acknowledged
		// writes: declared before any wait is released.
		f.found(reflector.Regression{Reason: reflector.RegressionWritesLost, ListResourceVersion: s.rv.String(),
			Floor: cur.String(), WritesLost: back.lostWrites, SampleKeys: back.sample}, false)
		f.written.Reset()
	default:
		f.written.PruneReached(s.rv)
	}
	if at == 0 {
		return true // nothing to move
	}
	f.quiet.snapshotMatches.Add(1) // counted before a wait it releases can look
	ok, due := f.trust.Proved(s.rv, st)
	f.settle(due)
	if !ok { // a regression found since voids it
		f.quiet.snapshotMatches.Add(^uint64(0))
		return false
	}
	f.zone.end = s.rv
	return true
}

// snapshotZone is the stretch of the informer's stream that a snapshot
// moved the applied resource version past: events in (stream, end] change
// keys created and deleted again before the snapshot. Under applyMu.
type snapshotZone struct {
	stream freshness.RV   // the newest resource version the stream delivered
	end    freshness.RV   // the snapshot's; zero when the stream is past it
	ghosts map[string]any // zone keys' newest states, for handlers' old objects
}

// streamAt records that the stream delivered rv (an event, a bookmark, a
// list), ending the zone once it is past the snapshot. applyMu is held.
func (f *FreshInformer) streamAt(rv freshness.RV) {
	z := &f.zone
	if rv.Compare(z.stream) > 0 {
		z.stream = rv
	}
	if !z.end.IsZero() && z.stream.Compare(z.end) >= 0 {
		f.endZone()
	}
}

// endZone ends the snapshot zone. A zone key whose deletion handlers never
// heard of (the watch resumed past it) is deleted from their view with a
// tombstone, as a relist would; a handler added since gets it too, though
// it never heard of the key (the indexer never held it). applyMu is held.
func (f *FreshInformer) endZone() {
	z := &f.zone
	for key, obj := range z.ghosts {
		f.processor.Distribute(handlers.Notification{Kind: handlers.Delete, OldObj: toolscache.DeletedFinalStateUnknown{Key: key, Obj: obj}}, false)
	}
	z.end, z.ghosts = freshness.RV{}, nil
}

// unghost takes obj's key out of the zone's keys when an event of it is
// applied outside the zone (its resource version is malformed, or past
// the snapshot): from then on handlers' view of the key follows that
// event, and the zone's end owes them no tombstone for it. It returns the
// key's state handlers hold, if it was a zone key. applyMu is held.
func (f *FreshInformer) unghost(obj any) (state any, ok bool) {
	z := &f.zone
	if len(z.ghosts) == 0 {
		return nil, false
	}
	key, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return nil, false
	}
	state, ok = z.ghosts[key]
	delete(z.ghosts, key)
	return state, ok
}

// zoneEvent handles a watch event at rv if it lies in the snapshot zone
// and its key is not cached: the cache's state already includes it (see
// compareSnapshot), so the indexer is left alone and handlers hear of it
// as client-go's would. It is neither out of order nor a fault. It reports
// whether the event was the zone's. applyMu is held.
func (f *FreshInformer) zoneEvent(kind handlers.Kind, obj any, rv freshness.RV, rvErr error) bool {
	z := &f.zone
	if rvErr != nil || z.end.IsZero() || rv.Compare(z.stream) <= 0 || rv.Compare(z.end) > 0 {
		return false
	}
	key, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return false
	}
	if _, cached, _ := f.indexer.GetByKey(key); cached {
		// Not a key the snapshot showed gone: the stream brought it
		// (with a malformed resource version). Applied as any event.
		return false
	}
	f.quiet.behindSnapshot.Add(1)
	f.recent.Add(rv)
	old, known := z.ghosts[key]
	switch kind {
	case handlers.Delete:
		delete(z.ghosts, key)
		f.processor.Distribute(handlers.Notification{Kind: handlers.Delete, OldObj: obj}, false)
	default:
		if z.ghosts == nil {
			z.ghosts = map[string]any{}
		}
		z.ghosts[key] = obj
		if known {
			f.processor.Distribute(handlers.Notification{Kind: handlers.Update, OldObj: old, NewObj: obj}, false)
		} else {
			f.processor.Distribute(handlers.Notification{Kind: handlers.Add, NewObj: obj}, false)
		}
	}
	f.streamAt(rv)
	return true
}
