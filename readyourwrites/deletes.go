package readyourwrites

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/detector"
	"github.com/freshinformer/freshinformer/internal/resources"
)

// Proving deletes by what the cache holds (see the package documentation).

// deletedObject is a recorded delete. It is proven once the informer no
// longer holds the object (by UID) or holds it terminating
// (deletionTimestamp set) at or past rv.
type deletedObject struct {
	key types.NamespacedName
	uid types.UID
	// rv is the resource version the delete's response carried (the
	// server stamps the deletion's revision on the returned object), or
	// the last one the caller knew; zero if none.
	rv freshness.RV
}

// holdsAlive reports whether inf's cache still holds the deleted object
// (same key and UID) as if the delete had not happened: not terminating,
// or terminating at a resource version older than the delete's. It takes
// the indexer's lock only.
func holdsAlive(inf *cache.FreshInformer, d deletedObject) bool {
	obj, ok, _ := detector.Unwrap(inf.GetIndexer()).GetByKey(resources.Key(d.key.Namespace, d.key.Name))
	if !ok {
		return false
	}
	m, err := meta.Accessor(obj)
	if err != nil || (d.uid != "" && m.GetUID() != d.uid) {
		return false // recreated: the deleted one is gone
	}
	if m.GetDeletionTimestamp() == nil {
		return true
	}
	cached, err := freshness.ParseRV(m.GetResourceVersion())
	return err == nil && cached.Compare(d.rv) < 0
}

// nextTarget is what a wait for the delete d waits for next, cur being
// the informer's applied resource version read before it looked: the
// delete's own resource version when the cache is behind it, else the next
// step past cur (the delete event comes next on a quiet resource). It
// waits for what proves the delete, never for an unrelated global
// resource version.
func nextTarget(d deletedObject, cur freshness.RV) freshness.RV {
	if d.rv.Compare(cur) > 0 {
		return d.rv
	}
	return nextRV(cur)
}

// applied returns inf's applied resource version, zero before the first
// list or when it cannot be ordered.
func applied(inf *cache.FreshInformer) freshness.RV {
	rv, _ := freshness.ParseRV(inf.LastObservedResourceVersion())
	return rv
}

// waitDeleted waits until inf's cache shows the delete d: the object gone
// (by UID), or terminating at or past the delete's resource version.
func waitDeleted(ctx context.Context, inf *cache.FreshInformer, d deletedObject) error {
	for {
		// Read the position before looking: the indexer changes before the
		// applied resource version moves, so a delete applied after the
		// look wakes the wait.
		cur := applied(inf)
		if !holdsAlive(inf, d) {
			return nil
		}
		if err := inf.WaitForFreshness(ctx, nextTarget(d, cur).String()); err != nil {
			return err
		}
	}
}

// whenGone settles slot of n once inf's cache shows the delete d (see
// waitDeleted), looking again after each step of the informer while the
// object is held. Its check runs first on the caller's goroutine, then as
// an AfterFreshness callback (the informer's goroutine, none of its locks
// held); it reads the indexer and the applied resource version, registers
// the next callback, and settles n. wrap annotates an error.
func whenGone(inf *cache.FreshInformer, d deletedObject, n *freshNotice, slot int, wrap func(error) error) {
	var check func(error)
	check = func(err error) {
		if err != nil {
			n.done(wrap(err))
			return
		}
		cur := applied(inf) // before the look: a delete applied after it wakes us
		if !holdsAlive(inf, d) {
			n.done(nil)
			return
		}
		// AfterFreshness may call check again before it returns (the
		// cache moved meanwhile): the generation tells keep which stop is
		// the current one.
		gen := n.nextGen(slot)
		n.keep(slot, gen, inf.AfterFreshness(nextTarget(d, cur).String(), check))
	}
	check(nil)
}

// nextRV returns rv plus one ("1" for the zero RV).
func nextRV(rv freshness.RV) freshness.RV {
	if n, ok := rv.Uint64(); ok && n < ^uint64(0) {
		next, _ := freshness.ParseRV(strconv.FormatUint(n+1, 10))
		return next
	}
	s := []byte(rv.String())
	if len(s) == 0 {
		next, _ := freshness.ParseRV("1")
		return next
	}
	i := len(s) - 1
	for ; i >= 0 && s[i] == '9'; i-- {
		s[i] = '0'
	}
	if i < 0 {
		s = append([]byte{'1'}, s...)
	} else {
		s[i]++
	}
	next, _ := freshness.ParseRV(string(s))
	return next
}

// minDeletePrune is the size from which a deleteSet prunes the deletes its
// cache already shows.
const minDeletePrune = 64

// deleteSet is a set of recorded deletes for one informer, each held once:
// adding, removing and finding one cost O(1). When it has doubled since it
// was last pruned (and holds at least minDeletePrune), it drops the
// deletes the informer's cache already shows, so it holds at most about
// twice the deletes the cache does not show yet (objects it still holds),
// and at least minDeletePrune. Not safe for concurrent use: its owner's
// ReadYourWrites mutex guards it.
type deleteSet struct {
	seq     map[deletedObject]uint64 // the order recorded, for stable checks
	next    uint64
	pruneAt int
}

func (s *deleteSet) add(d deletedObject, inf *cache.FreshInformer) {
	if _, ok := s.seq[d]; ok {
		return
	}
	if s.seq == nil {
		s.seq = map[deletedObject]uint64{}
	}
	s.next++
	s.seq[d] = s.next
	if len(s.seq) >= max(s.pruneAt, minDeletePrune) {
		s.prune(inf)
		s.pruneAt = 2 * len(s.seq)
	}
}

// prune drops the deletes inf's cache shows already.
func (s *deleteSet) prune(inf *cache.FreshInformer) {
	maps.DeleteFunc(s.seq, func(d deletedObject, _ uint64) bool { return !holdsAlive(inf, d) })
}

func (s *deleteSet) remove(d deletedObject) { delete(s.seq, d) }
func (s *deleteSet) len() int               { return len(s.seq) }

// list returns the deletes in the order recorded.
func (s *deleteSet) list() []deletedObject {
	out := slices.Collect(maps.Keys(s.seq))
	slices.SortFunc(out, func(a, b deletedObject) int { return cmp.Compare(s.seq[a], s.seq[b]) })
	return out
}
