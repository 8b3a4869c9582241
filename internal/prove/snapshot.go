package prove

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/trust"
	"github.com/freshinformer/freshinformer/reflector"
)

// Snapshot is a consistent list of the informer's objects (its namespace
// and selectors): the server's state at RV, or its first objects.
type Snapshot struct {
	RV       freshness.RV
	Items    []runtime.Object
	Complete bool // every object the informer lists
	// Floor is the guard's when the list was sent: a consistent read
	// below it proves the server's history went back.
	Floor freshness.RV
}

// snapshotRoute reports whether probes take the snapshot route: the
// informer is small enough, or its resource gets no bookmarks (then the
// other route is a relist, which lists as much).
func (p *Prover) snapshotRoute() bool {
	return p.cfg.SnapshotLimit >= 0 && p.cfg.Lister != nil &&
		(p.keys.Load() <= int64(p.cfg.SnapshotLimit) || p.noBookmarks.Load())
}

// listSnapshot reads a snapshot of at most limit objects, following the
// server's continue tokens (a server may answer with fewer objects than
// asked for; every page is of the first's resource version), and records
// its resource version as the server's newest known one.
func (p *Prover) listSnapshot(ctx context.Context, limit int64) (Snapshot, error) {
	lw := toolscache.ToListerWatcherWithContext(p.cfg.Lister)
	sent := p.cfg.Clock.Now()
	s := Snapshot{Floor: p.inf.Floor()}
	opts := metav1.ListOptions{Limit: limit}
	for {
		obj, err := lw.ListWithContext(ctx, opts)
		if err != nil {
			return Snapshot{}, err
		}
		list, err := meta.ListAccessor(obj)
		if err != nil {
			return Snapshot{}, err
		}
		items, err := meta.ExtractList(obj)
		if err != nil {
			return Snapshot{}, err
		}
		if opts.Continue == "" {
			if s.RV, err = freshness.ParseRV(list.GetResourceVersion()); err != nil {
				return Snapshot{}, fmt.Errorf("the server's list resource version: %w", err)
			}
			p.reads.Record(sent, s.RV)
		}
		s.Items = append(s.Items, items...)
		opts.Continue = list.GetContinue()
		if opts.Continue == "" || len(items) == 0 {
			s.Complete = opts.Continue == ""
			return s, nil
		}
		if opts.Limit = limit - int64(len(s.Items)); opts.Limit <= 0 {
			return s, nil
		}
	}
}

// snapshotProbe proves the cache fresh from a snapshot when it can (see
// CompareSnapshot). It returns the snapshot's resource version, the
// server's current one, and whether the cache is now at least that fresh.
// st is the trust's stamp when the probe began.
func (p *Prover) snapshotProbe(ctx context.Context, st trust.Stamp) (server freshness.RV, proved bool, err error) {
	// One more object than cached: a longer list cannot match.
	p.requests.Add(1)
	s, err := p.listSnapshot(ctx, p.keys.Load()+1)
	if err != nil {
		return freshness.RV{}, false, err
	}
	p.snapshots.Add(1)
	return s.RV, p.CompareSnapshot(s, st, true), nil
}

// CompareSnapshot compares a snapshot, read with the stamp st, with the
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
//     to handlers but not to the indexer (internal/snapshotzone). A key
//     listed older than a write recorded for it that the snapshot covers
//     is a lost write: declared before any wait it releases;
//   - anything else proves nothing.
func (p *Prover) CompareSnapshot(s Snapshot, st trust.Stamp, prove bool) (proved bool) {
	p.inf.Compare(func(c Cache) { proved = p.compare(c, s, st, prove) })
	return proved
}

// compare is CompareSnapshot under the apply lock.
func (p *Prover) compare(c Cache, s Snapshot, st trust.Stamp, prove bool) bool {
	state, cur := c.Position()
	if state != trust.Trusted {
		return false
	}
	if !s.RV.AtLeast(s.Floor) {
		c.Restore(diff{}.regression(reflector.RegressionServerBehind, s.RV, s.Floor), st)
		return false
	}
	at := s.RV.Compare(cur)
	if at < 0 {
		return true // the stream overtook the snapshot: fresher already
	}
	// At the applied RV itself the snapshot must match too: a restored
	// server whose new writes reached exactly the floor shows its keys.
	d, ok := diffSnapshot(c, s, cur)
	switch {
	case !ok:
		return false
	case d.keys > 0:
		c.Restore(d.regression(reflector.RegressionKeysWentBack, s.RV, cur), st)
		return false
	case !d.same || !prove:
		if d.lostWrites > 0 {
			c.Restore(d.regression(reflector.RegressionWritesLost, s.RV, cur), st)
		}
		return false
	case d.lostWrites > 0:
		// The cache holds the server's state, which lost acknowledged
		// writes: declared before any wait is released.
		c.Found(d.regression(reflector.RegressionWritesLost, s.RV, cur))
		c.Written().Reset()
	default:
		c.Written().PruneReached(s.RV)
	}
	if at == 0 {
		return true // nothing to move
	}
	p.snapshotMatches.Add(1) // counted before a wait it releases can look
	if !c.Proved(s.RV, st) { // a regression found since voids it
		p.snapshotMatches.Add(^uint64(0))
		return false
	}
	return true
}

// diff is how a snapshot differs from the cache: keys listed at states
// the cache had passed but does not hold, keys listed older than a
// recorded write the snapshot covers, and whether it holds exactly the
// cached keys at the cached resource versions.
type diff struct {
	keys, lostWrites int
	sample           []string // up to reflector.MaxRegressionSample keys
	same             bool
}

func (d *diff) add(key string, count *int) {
	*count++
	if len(d.sample) < reflector.MaxRegressionSample {
		d.sample = append(d.sample, key)
	}
}

// regression is the regression d shows, for a read at server against the
// position floor.
func (d diff) regression(reason reflector.RegressionReason, server, floor freshness.RV) reflector.Regression {
	return reflector.Regression{Reason: reason, ListResourceVersion: server.String(), Floor: floor.String(),
		Keys: d.keys, WritesLost: d.lostWrites, SampleKeys: d.sample}
}

// diffSnapshot compares s key by key with the cache, at the applied
// resource version cur. ok is false for a snapshot that can prove nothing
// either way: a key it cannot name, a key listed twice (it would leave a
// cached key unlisted), or a malformed resource version.
func diffSnapshot(c Cache, s Snapshot, cur freshness.RV) (d diff, ok bool) {
	checkWrites := c.Written().Len() > 0
	d.same = s.Complete && len(s.Items) == c.Len()
	seen := make(map[string]struct{}, len(s.Items))
	for _, item := range s.Items {
		key, err := toolscache.MetaNamespaceKeyFunc(item)
		if err != nil {
			return diff{}, false
		}
		if _, dup := seen[key]; dup {
			return diff{}, false
		}
		seen[key] = struct{}{}
		listedRVs := resourceVersion(item)
		listed, err := freshness.ParseRV(listedRVs)
		if err != nil {
			return diff{}, false
		}
		if checkWrites && c.Written().Lost(key, listedRVs, s.RV) {
			d.add(key, &d.lostWrites)
		}
		cachedRVs, cached := c.CachedRV(key)
		var cachedRV freshness.RV
		if cached {
			if cachedRV, err = freshness.ParseRV(cachedRVs); err != nil {
				d.same = false // a malformed cached state: neither proof
				continue
			}
		}
		if cached && cachedRV.Compare(listed) == 0 {
			continue
		}
		d.same = false
		if listed.Compare(cur) <= 0 {
			d.add(key, &d.keys)
		}
	}
	return d, true
}

func resourceVersion(obj any) string {
	if m, err := meta.Accessor(obj); err == nil {
		return m.GetResourceVersion()
	}
	return ""
}
