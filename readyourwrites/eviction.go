package readyourwrites

import (
	"container/list"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
)

// The bounds: at most maxOwners owners' records, none idle for longer than
// idle, and what evicted owners leave folded per kind and informer (see
// the package documentation). Every function here but sizes runs with r.mu
// held.

// ownerWrites is what one owner still waits for, per informer the writes
// were routed to. Its size is bounded by the informers written to and, per
// informer, by deleteSet's bound.
type ownerWrites struct {
	key ownerKey
	uid types.UID
	// written is the newest resource version written through each
	// informer's resource that the informer must reach.
	written map[*cache.FreshInformer]freshness.RV
	// deleted are the deletes each informer must show.
	deleted map[*cache.FreshInformer]*deleteSet
	used    time.Time     // the last record or check
	elem    *list.Element // in ReadYourWrites.lru
}

// evictedWrites is what evicted owners of one kind still wait for on one
// informer: the newest resource version they wrote that the informer had
// not reached when they were evicted (zero once reached), and their
// deletes it did not show.
type evictedWrites struct {
	written freshness.RV
	deleted deleteSet
}

// record returns the owner's record, clearing a predecessor's, and evicts
// owners past the bounds.
func (r *ReadYourWrites) record(owner Owner) *ownerWrites {
	now := r.clock.Now()
	r.evictIdleLocked(now)
	w := r.owners[owner.key()]
	if w != nil && w.uid != owner.UID {
		r.removeLocked(w) // a recreated owner does not wait for its predecessor
		w = nil
	}
	if w == nil {
		w = &ownerWrites{key: owner.key(), uid: owner.UID, written: map[*cache.FreshInformer]freshness.RV{}} // deleted: made by the first delete
		w.elem = r.lru.PushFront(w)
		r.owners[w.key] = w
		for len(r.owners) > r.maxOwners {
			r.evictLocked(r.lru.Back().Value.(*ownerWrites))
		}
	}
	w.used = now
	r.lru.MoveToFront(w.elem)
	return w
}

// removeLocked drops w's records.
func (r *ReadYourWrites) removeLocked(w *ownerWrites) {
	delete(r.owners, w.key)
	r.lru.Remove(w.elem)
}

// evictIdleLocked evicts the owners idle for r.idle.
func (r *ReadYourWrites) evictIdleLocked(now time.Time) {
	for e := r.lru.Back(); e != nil; e = r.lru.Back() {
		w := e.Value.(*ownerWrites)
		if now.Sub(w.used) < r.idle {
			return
		}
		r.evictLocked(w)
	}
}

// evictLocked drops w's records. What its caches show already is
// forgotten; the rest is folded into r.evicted for w's kind, so that no
// later check of an owner of that kind calls the caches fresh before they
// show it.
func (r *ReadYourWrites) evictLocked(w *ownerWrites) {
	r.removeLocked(w)
	for inf, rv := range w.written {
		if !fresh(inf, rv) && !inf.IsStopped() {
			if e := r.evictedFor(w.key.gk, inf); rv.Compare(e.written) > 0 {
				e.written = rv
			}
		}
	}
	for inf, set := range w.deleted {
		if inf.IsStopped() {
			continue
		}
		for d := range set.seq {
			if holdsAlive(inf, d) {
				r.evictedFor(w.key.gk, inf).deleted.add(d, inf)
			}
		}
	}
}

// evictedFor returns what evicted owners of kind gk wait for on inf,
// making it if needed.
func (r *ReadYourWrites) evictedFor(gk schema.GroupKind, inf *cache.FreshInformer) *evictedWrites {
	byInf := r.evicted[gk]
	if byInf == nil {
		byInf = map[*cache.FreshInformer]*evictedWrites{}
		r.evicted[gk] = byInf
	}
	e := byInf[inf]
	if e == nil {
		e = &evictedWrites{}
		byInf[inf] = e
	}
	return e
}

// addEvictedLocked adds to p what evicted owners of kind gk wait for,
// forgetting what the caches show already and what stopped informers will
// never show.
func (r *ReadYourWrites) addEvictedLocked(gk schema.GroupKind, p *pendingWrites) {
	byInf := r.evicted[gk]
	for inf, e := range byInf {
		if inf.IsStopped() {
			delete(byInf, inf)
			continue
		}
		if !e.written.IsZero() && fresh(inf, e.written) {
			e.written = freshness.RV{}
		}
		e.deleted.prune(inf)
		if e.written.IsZero() && e.deleted.len() == 0 {
			delete(byInf, inf)
			continue
		}
		if !e.written.IsZero() {
			if p.written == nil {
				p.written = map[*cache.FreshInformer]freshness.RV{}
			}
			if e.written.Compare(p.written[inf]) > 0 {
				p.written[inf] = e.written
			}
		}
		if e.deleted.len() > 0 {
			if p.deleted == nil {
				p.deleted = map[*cache.FreshInformer][]deletedObject{}
			}
			own := make(map[deletedObject]bool, len(p.deleted[inf]))
			for _, d := range p.deleted[inf] {
				own[d] = true
			}
			for _, d := range e.deleted.list() {
				if !own[d] {
					p.deleted[inf] = append(p.deleted[inf], d)
				}
			}
		}
	}
	if len(byInf) == 0 {
		delete(r.evicted, gk)
	}
}

// sizes returns how many owners have records, and how many informers and
// deletes evicted owners still wait on (for tests).
func (r *ReadYourWrites) sizes() (owners, evictedInformers, evictedDeletes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, byInf := range r.evicted {
		for _, e := range byInf {
			evictedInformers++
			evictedDeletes += e.deleted.len()
		}
	}
	return len(r.owners), evictedInformers, evictedDeletes
}
