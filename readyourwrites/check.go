package readyourwrites

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/resources"
)

// Checking an owner: snapshot what it waits for (pending), check or wait
// with the mutex released, then forget what was found fresh (settled).

// pendingWrites is a snapshot of what a check of an owner waits for: its
// ownerWrites, and what evicted owners of its kind wait for.
type pendingWrites struct {
	written map[*cache.FreshInformer]freshness.RV
	deleted map[*cache.FreshInformer][]deletedObject
}

// pending returns a copy of what owner still waits for: its own records
// and what evicted owners of its kind wait for.
func (r *ReadYourWrites) pending(owner Owner) pendingWrites {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	r.evictIdleLocked(now)
	var p pendingWrites
	if w := r.owners[owner.key()]; w != nil {
		if w.uid != owner.UID { // a recreated owner does not wait for its predecessor
			r.removeLocked(w)
		} else {
			w.used = now
			r.lru.MoveToFront(w.elem)
			p.written = maps.Clone(w.written)
			if len(w.deleted) > 0 {
				p.deleted = make(map[*cache.FreshInformer][]deletedObject, len(w.deleted))
				for inf, set := range w.deleted {
					p.deleted[inf] = set.list()
				}
			}
		}
	}
	r.addEvictedLocked(owner.GroupKind, &p)
	return p
}

// informers returns the informers p waits on, in a stable order.
func (p pendingWrites) informers() []*cache.FreshInformer {
	var out []*cache.FreshInformer
	for inf := range p.written {
		out = append(out, inf)
	}
	for inf := range p.deleted {
		if _, ok := p.written[inf]; !ok {
			out = append(out, inf)
		}
	}
	slices.SortFunc(out, func(a, b *cache.FreshInformer) int {
		return cmp.Or(cmp.Compare(resources.String(a.Resource()), resources.String(b.Resource())), cmp.Compare(a.Selector().String(), b.Selector().String()))
	})
	return out
}

// settled forgets what EnsureFresh, CheckFresh or WhenFresh found fresh,
// in the owner's records and in what evicted owners of its kind wait for:
// each write at or below the resource version found (a newer one that came
// in meanwhile stays), and the deletes it checked (by value: those
// recorded meanwhile stay, and concurrent checks of one owner settle in
// any order). It takes r.mu and calls nothing of the informers, so it may
// run on any goroutine (WhenFresh's callbacks).
func (r *ReadYourWrites) settled(owner Owner, p pendingWrites) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.owners[owner.key()]; w != nil && w.uid == owner.UID {
		for inf, rv := range p.written {
			if cur, ok := w.written[inf]; ok && cur.Compare(rv) <= 0 {
				delete(w.written, inf)
			}
		}
		for inf, checked := range p.deleted {
			if set := w.deleted[inf]; set != nil {
				for _, d := range checked {
					set.remove(d)
				}
				if set.len() == 0 {
					delete(w.deleted, inf)
				}
			}
		}
		if len(w.written) == 0 && len(w.deleted) == 0 {
			r.removeLocked(w)
		}
	}
	byInf := r.evicted[owner.GroupKind]
	for inf, e := range byInf {
		if rv, ok := p.written[inf]; ok && e.written.Compare(rv) <= 0 {
			e.written = freshness.RV{}
		}
		for _, d := range p.deleted[inf] {
			e.deleted.remove(d)
		}
		if e.written.IsZero() && e.deleted.len() == 0 {
			delete(byInf, inf)
		}
	}
	if byInf != nil && len(byInf) == 0 {
		delete(r.evicted, owner.GroupKind)
	}
}

// removed reports whether inf has stopped and its source no longer lists
// it (controller-runtime's RemoveInformer): nothing reads from it any
// more, so nothing waits for it. The factories and fixed sources keep
// listing their informers: a stopped one of theirs still fails a wait
// with freshness.ErrStopped.
func (r *ReadYourWrites) removed(inf *cache.FreshInformer) bool {
	return inf.IsStopped() && !slices.Contains(r.source.FreshInformersForResource(inf.Resource()), inf)
}

// usable returns an error matching cache.ErrNoInformer, at once, for an
// informer found never started (its start grace passed since a wait or
// check first found it not started): waiting on it could only time out.
func usable(inf *cache.FreshInformer) error {
	if errors.Is(inf.CheckFreshness("1"), freshness.ErrNotStarted) { // said before rv is looked at
		return fmt.Errorf("%w: the %s was never started", cache.ErrNoInformer, describe(inf))
	}
	return nil
}

// neverStarted makes err, a wait's on inf, match cache.ErrNoInformer as
// usable's does when the informer did not start within its grace.
func neverStarted(err error) error {
	if errors.Is(err, freshness.ErrNotStarted) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", cache.ErrNoInformer, err)
	}
	return err
}

// fresh reports whether inf's cache holds rv: WaitForFreshness would
// return nil at once.
func fresh(inf *cache.FreshInformer, rv freshness.RV) bool {
	return inf.CheckFreshness(rv.String()) == nil
}

// notFresh fills in e for owner and the informer behind.
func notFresh(owner Owner, inf *cache.FreshInformer, e *NotFreshError) *NotFreshError {
	e.Owner, e.Resource, e.Scope, e.Name, e.Informer = owner, inf.Resource(), inf.Selector(), inf.Name(), inf
	e.Observed = inf.LastObservedResourceVersion()
	return e
}

// CheckFresh reports, without blocking, whether every cache owner wrote to
// has caught up: nil if so, else a *NotFreshError (matching freshness.ErrNotFresh)
// naming a resource that is behind, for a workqueue controller to requeue.
// It fails, matching cache.ErrNoInformer, if an informer written to was
// never started (see FreshInformer.CheckFreshness: once its start grace
// has passed).
func (r *ReadYourWrites) CheckFresh(owner Owner) error {
	p := r.pending(owner)
	for _, inf := range p.informers() {
		if r.removed(inf) {
			continue
		}
		if err := usable(inf); err != nil {
			return err
		}
		if rv, ok := p.written[inf]; ok && !fresh(inf, rv) {
			return notFresh(owner, inf, &NotFreshError{Written: rv.String()})
		}
		for _, d := range p.deleted[inf] {
			if holdsAlive(inf, d) {
				return notFresh(owner, inf, &NotFreshError{Key: d.key, Deleted: true})
			}
		}
	}
	r.settled(owner, p)
	return nil
}

// EnsureFresh blocks until every cache owner wrote to has caught up, ctx
// ends, or the timeout passes. Errors are WaitForFreshness's, naming the
// resource, the informer's scope and the owner; one matching
// cache.ErrNoInformer (and freshness.ErrNotStarted) if an informer written
// to was never started, after its start grace (see
// FreshInformer.WaitForFreshness).
func (r *ReadYourWrites) EnsureFresh(ctx context.Context, owner Owner) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	p := r.pending(owner)
	for _, inf := range p.informers() {
		if r.removed(inf) {
			continue
		}
		if err := usable(inf); err != nil {
			return err
		}
		if rv, ok := p.written[inf]; ok {
			if err := inf.WaitForFreshness(ctx, rv.String()); err != nil { // counted in the wait metrics
				return neverStarted(fmt.Errorf("%s: write on behalf of %s: %w", describe(inf), owner, err))
			}
		}
		for _, d := range p.deleted[inf] {
			if err := waitDeleted(ctx, inf, d); err != nil {
				return neverStarted(fmt.Errorf("%s: delete of %s on behalf of %s: %w", describe(inf), d.key, owner, err))
			}
		}
	}
	r.settled(owner, p)
	return nil
}
