package recorded

import "github.com/freshinformer/freshinformer/freshness"

// MaxKeys bounds the keys of written objects an informer keeps
// while its stream has not delivered them (Keys).
const MaxKeys = 4096

// Keys remembers, per key, the newest resource version a recorded
// write returned that the cache had not reached when it was recorded. A
// list at or past that resource version must hold the key at it or newer,
// or not at all (deleted or out of scope since): a healthy server never
// lists a key older than a write it acknowledged before the list's
// revision. A listed state older than the write proves the write was lost:
// etcd was restored, with --bump-revision, from a snapshot taken before
// the write. The cache cannot see that from its own objects when its
// stream never delivered the write (the informer was behind or
// disconnected), so without this the relist would look fresh for the
// write's resource version while the write is gone.
//
// Bounded: at most MaxKeys keys (a write recorded past that while
// the informer is behind is not remembered), and entries the stream has
// applied are pruned once the map has doubled since its last prune (so a
// healthy informer's map stays about twice the writes in flight, at an
// amortized O(1) per write), and at every list.
//
// Not safe for concurrent use: the informer guards it with its applyMu.
type Keys struct {
	rvs      map[string]freshness.RV
	pruneAt  int          // prune when rvs reaches this many keys
	prunedAt freshness.RV // the applied resource version of the last prune
}

// MinPrune is the smallest map that is pruned on a write.
const MinPrune = 64

// Add remembers that key was written at rv, the cache being at applied.
func (w *Keys) Add(key string, rv, applied freshness.RV) {
	// A prune removes nothing unless the cache moved since the last one:
	// an informer that is stuck does not pay for a scan per write.
	if len(w.rvs) >= max(w.pruneAt, MinPrune) && applied != w.prunedAt {
		w.PruneReached(applied)
	}
	if len(w.rvs) >= MaxKeys {
		return // the informer is far behind: keep what is recorded
	}
	if w.rvs == nil {
		w.rvs = make(map[string]freshness.RV)
	}
	if rv.Compare(w.rvs[key]) > 0 {
		w.rvs[key] = rv
	}
}

// Len returns how many keys are remembered.
func (w *Keys) Len() int { return len(w.rvs) }

// Reset forgets every write.
func (w *Keys) Reset() { clear(w.rvs) }

// PruneReached forgets the writes at or below applied: the stream
// delivered them (or a list already checked them), and a list that moves
// a cached key back is detected from the cache itself.
func (w *Keys) PruneReached(applied freshness.RV) {
	for key, rv := range w.rvs {
		if rv.Compare(applied) <= 0 {
			delete(w.rvs, key)
		}
	}
	w.prunedAt = applied
	w.pruneAt = min(2*len(w.rvs), MaxKeys)
}

// Lost reports whether a listed state (its resource version s) of key, in
// a list at listRV, is older than a recorded write of key that the list
// covers.
func (w *Keys) Lost(key, s string, listRV freshness.RV) bool {
	written, ok := w.rvs[key]
	if !ok || written.Compare(listRV) > 0 {
		return false
	}
	listed, err := freshness.ParseRV(s)
	return err == nil && listed.Compare(written) < 0
}
