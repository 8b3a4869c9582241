// Package listdiff compares a list with the cache it is about to replace,
// before the informer's apply path applies it: what each listed object
// replaces, which keys the list holds, and which keys it moves back (to
// older states than cached, to states the cache had passed, or older than
// a recorded write the list covers). The apply path decides what follows
// (a declared regression); this package only counts.
package listdiff

import (
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/recorded"
	"github.com/freshinformer/freshinformer/internal/resources"
	"github.com/freshinformer/freshinformer/reflector"
)

// Change is a listed object and the state it replaces (nil: none).
type Change struct{ Old, New any }

// Back counts the keys a list moved back: cached keys listed at older
// states, and keys listed older than a recorded write the list covers
// (cache's lostwrites.go).
type Back struct {
	Keys, LostWrites int
	Sample           []string // up to reflector.MaxRegressionSample of them
	// Unstamped: a listed object has no resource version at all, which
	// only fake clientsets list; nothing in the list can be ordered.
	Unstamped bool
}

func (b *Back) add(key string, count *int) {
	*count++
	if len(b.Sample) < reflector.MaxRegressionSample {
		b.Sample = append(b.Sample, key)
	}
}

// Diff compares the list info with the cache in indexer before it is
// applied: each listed object with the state it replaces, the listed
// keys, and the keys the list moves back. reached is where the cache
// stood: it applied every event up to there (zero: none to trust, in
// plain mode or while a declared restore waits for this list). written
// are the recorded writes the list may have lost. The informer's apply
// lock is held.
func Diff(indexer toolscache.Indexer, info toolscache.ReplacedAllInfo, reached freshness.RV, written *recorded.Keys) (changes []Change, listed map[string]struct{}, back Back, err error) {
	changes = make([]Change, 0, len(info.Objects))
	listed = make(map[string]struct{}, len(info.Objects))
	listRV, listErr := freshness.ParseRV(info.ResourceVersion)
	checkWrites := written.Len() > 0 && listErr == nil
	for _, obj := range info.Objects {
		key, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			return nil, nil, Back{}, err
		}
		listed[key] = struct{}{}
		back.Unstamped = back.Unstamped || resources.ResourceVersion(obj) == ""
		old, _, _ := indexer.GetByKey(key)
		changes = append(changes, Change{Old: old, New: obj})
		switch {
		case old != nil && older(resources.ResourceVersion(obj), resources.ResourceVersion(old)):
			back.add(key, &back.Keys)
		case passed(resources.ResourceVersion(obj), reached) && (old == nil || differs(old, obj)):
			// At a state the cache had passed, which it does not hold: the
			// cache applied that state's event, and whatever came after it
			// (a deletion, a newer state) would be in the list. The list
			// brings the key back (etcd restored to before the deletion,
			// with a bumped revision), or comes from another history (a
			// restore without one, outrun by new writes).
			back.add(key, &back.Keys)
		case checkWrites && written.Lost(key, resources.ResourceVersion(obj), listRV):
			back.add(key, &back.LostWrites)
		}
	}
	return changes, listed, back, nil
}

// passed reports whether rv is comparable and not newer than reached (none
// when zero).
func passed(rv string, reached freshness.RV) bool {
	in, err := freshness.ParseRV(rv)
	return err == nil && !reached.IsZero() && in.Compare(reached) <= 0
}

// differs reports whether the cached old and the listed obj are at
// different comparable resource versions.
func differs(old, obj any) bool {
	_, err := freshness.ParseRV(resources.ResourceVersion(old))
	return err == nil && resources.ResourceVersion(old) != resources.ResourceVersion(obj)
}

// older reports whether rv is older than cachedRV, both comparable.
func older(rv, cachedRV string) bool {
	in, err1 := freshness.ParseRV(rv)
	cached, err2 := freshness.ParseRV(cachedRV)
	return err1 == nil && err2 == nil && in.Compare(cached) < 0
}
