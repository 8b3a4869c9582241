package cache

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/trust"
)

// maxWrittenKeys bounds the keys of written objects an informer keeps
// while its stream has not delivered them (writtenKeys).
const maxWrittenKeys = 4096

// writtenKeys remembers, per key, the newest resource version a recorded
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
// Bounded: at most maxWrittenKeys keys (a write recorded past that while
// the informer is behind is not remembered), and entries the stream has
// applied are pruned once the map has doubled since its last prune (so a
// healthy informer's map stays about twice the writes in flight, at an
// amortized O(1) per write), and at every list.
//
// Guarded by FreshInformer.applyMu.
type writtenKeys struct {
	rvs      map[string]freshness.RV
	pruneAt  int          // prune when rvs reaches this many keys
	prunedAt freshness.RV // the applied resource version of the last prune
}

// minWrittenPrune is the smallest map that is pruned on a write.
const minWrittenPrune = 64

// RecordWrittenObject is RecordWrite for a write whose object the server
// returned (create, update, patch, apply, a status or scale write, or a
// delete's response): besides what RecordWrite does, it remembers the
// object's key until a list reaches the write's resource version, so that
// a list at or past it that holds the key at an older state (the server
// lost the acknowledged write: etcd restored from an older snapshot with
// --bump-revision) is declared as a regression (Regression.WritesLost)
// even when the informer's stream never delivered the write. written must
// be an object of the informer's resource. It returns an error matching
// freshness.ErrIncomparable for a malformed resource version.
func (f *FreshInformer) RecordWrittenObject(written metav1.Object) error {
	if err := f.RecordWrite(written.GetResourceVersion()); err != nil {
		return err
	}
	if written.GetName() == "" {
		return nil // a Status, not the object: nothing to look for in a list
	}
	if f.staleReads != nil {
		f.staleReads.Wrote(written)
	}
	rv, _ := freshness.ParseRV(written.GetResourceVersion()) // RecordWrite validated it
	key := written.GetName()
	if ns := written.GetNamespace(); ns != "" {
		key = ns + "/" + key
	}
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	applied := f.applied()
	if f.state() != trust.Trusted || rv.Compare(applied) <= 0 {
		return nil // applied already: a later list that moves it back is KeysWentBack
	}
	f.written.add(key, rv, applied)
	return nil
}

// add remembers that key was written at rv, the cache being at applied.
func (w *writtenKeys) add(key string, rv, applied freshness.RV) {
	// A prune removes nothing unless the cache moved since the last one:
	// an informer that is stuck does not pay for a scan per write.
	if len(w.rvs) >= max(w.pruneAt, minWrittenPrune) && applied != w.prunedAt {
		w.pruneReached(applied)
	}
	if len(w.rvs) >= maxWrittenKeys {
		return // the informer is far behind: keep what is recorded
	}
	if w.rvs == nil {
		w.rvs = make(map[string]freshness.RV)
	}
	if rv.Compare(w.rvs[key]) > 0 {
		w.rvs[key] = rv
	}
}

// len returns how many keys are remembered.
func (w *writtenKeys) len() int { return len(w.rvs) }

// reset forgets every write.
func (w *writtenKeys) reset() { clear(w.rvs) }

// pruneReached forgets the writes at or below applied: the stream
// delivered them (or a list already checked them), and a list that moves
// a cached key back is detected from the cache itself.
func (w *writtenKeys) pruneReached(applied freshness.RV) {
	for key, rv := range w.rvs {
		if rv.Compare(applied) <= 0 {
			delete(w.rvs, key)
		}
	}
	w.prunedAt = applied
	w.pruneAt = min(2*len(w.rvs), maxWrittenKeys)
}

// lost reports whether a listed state (its resource version s) of key, in
// a list at listRV, is older than a recorded write of key that the list
// covers.
func (w *writtenKeys) lost(key, s string, listRV freshness.RV) bool {
	written, ok := w.rvs[key]
	if !ok || written.Compare(listRV) > 0 {
		return false
	}
	listed, err := freshness.ParseRV(s)
	return err == nil && listed.Compare(written) < 0
}
