package cache

import (
	"cmp"
	"container/list"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/freshinformer/freshinformer/freshness"
)

// DefaultEnsureFreshTimeout bounds EnsureFresh when its context has no
// earlier deadline.
const DefaultEnsureFreshTimeout = 10 * time.Second

// DefaultMaxOwners is how many owners a ReadYourWrites keeps records for
// when ReadYourWritesOptions.MaxOwners is not set.
const DefaultMaxOwners = 10_000

// DefaultOwnerIdleTimeout is how long a ReadYourWrites keeps an owner's
// records with nothing recorded or checked for it, when
// ReadYourWritesOptions.OwnerIdleTimeout is not set.
const DefaultOwnerIdleTimeout = time.Minute

// ErrNotFresh is matched by CheckFresh's error when a cache is behind.
var ErrNotFresh = errors.New("cache is not yet fresh for the owner's writes")

// NotFreshError says which resource's cache is behind an owner's write.
type NotFreshError struct {
	Owner    Owner
	Resource schema.GroupResource
	// Scope is the lagging informer's (several informers may cache one
	// resource: one per namespace, say).
	Scope Selector
	// Written is the resource version of the newest write ("" for a
	// delete), Observed the informer's.
	Written, Observed string
	// Deleted names the deleted object still cached, for a delete.
	Deleted types.NamespacedName
}

func (e *NotFreshError) Error() string {
	if e.Deleted.Name != "" {
		return fmt.Sprintf("%s cache (%s) still holds %s, deleted on behalf of %s", resourceString(e.Resource), e.Scope, e.Deleted, e.Owner)
	}
	return fmt.Sprintf("%s cache (%s) is at %s, behind %s written on behalf of %s", resourceString(e.Resource), e.Scope, e.Observed, e.Written, e.Owner)
}

// Is reports whether target is ErrNotFresh.
func (e *NotFreshError) Is(target error) bool { return target == ErrNotFresh }

// ErrNotWatched is matched by Record's error for a written object that no
// informer of its resource will ever see (outside their namespaces or
// selectors): waiting for it would only time out.
var ErrNotWatched = errors.New("written object is outside every informer's selector")

// Owner is the object a reconciler works on behalf of: its kind, its
// namespace and name, and its UID, which tells a recreated owner from its
// predecessor. Owners of different kinds never share records, so one
// ReadYourWrites can serve every controller of a process.
type Owner struct {
	schema.GroupKind
	types.NamespacedName
	UID types.UID
}

// OwnerOf returns obj as an Owner. The kind comes from the object's own
// apiVersion and kind when set (unstructured objects), else from
// client-go's scheme; a type no scheme knows is told apart by its Go type
// (package path and name).
func OwnerOf(obj metav1.Object) Owner {
	o := Owner{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}, UID: obj.GetUID()}
	if ro, ok := obj.(runtime.Object); ok {
		if gvk, err := (resourceMapper{}).kindOf(ro); err == nil {
			o.GroupKind = gvk.GroupKind()
			return o
		}
	}
	o.Kind = typeName(obj)
	return o
}

// String prints the owner as "Deployment.apps ns/web".
func (o Owner) String() string {
	if o.GroupKind.Empty() {
		return o.NamespacedName.String()
	}
	return o.GroupKind.String() + " " + o.NamespacedName.String()
}

// ownerKey identifies an owner across recreations.
type ownerKey struct {
	gk schema.GroupKind
	nn types.NamespacedName
}

func (o Owner) key() ownerKey { return ownerKey{o.GroupKind, o.NamespacedName} }

// InformerSource finds the informers that cache a resource. Both factories
// implement it; InformerMap and InformerList are fixed ones and Sources
// joins several.
type InformerSource interface {
	// FreshInformersForResource returns every informer of gr (several:
	// one per namespace, a filtered and an unfiltered one, ...), in a
	// stable order; none if there are none.
	FreshInformersForResource(gr schema.GroupResource) []*FreshInformer
}

// InformerMap is an InformerSource over one informer per resource made by
// hand.
type InformerMap map[schema.GroupResource]*FreshInformer

// FreshInformersForResource implements InformerSource.
func (m InformerMap) FreshInformersForResource(gr schema.GroupResource) []*FreshInformer {
	if inf, ok := m[gr]; ok {
		return []*FreshInformer{inf}
	}
	return nil
}

// InformerList is an InformerSource over informers made by hand, any
// number per resource (each informer's Resource says which).
type InformerList []*FreshInformer

// FreshInformersForResource implements InformerSource.
func (l InformerList) FreshInformersForResource(gr schema.GroupResource) []*FreshInformer {
	var out []*FreshInformer
	for _, inf := range l {
		if inf.Resource() == gr {
			out = append(out, inf)
		}
	}
	return out
}

// Sources joins InformerSources (two factories, say).
type Sources []InformerSource

// FreshInformersForResource implements InformerSource.
func (s Sources) FreshInformersForResource(gr schema.GroupResource) []*FreshInformer {
	var out []*FreshInformer
	for _, src := range s {
		for _, inf := range src.FreshInformersForResource(gr) {
			if !slices.Contains(out, inf) {
				out = append(out, inf)
			}
		}
	}
	return out
}

// ResourceResolver is implemented by InformerSources that can tell the
// resource of a written object (both factories can); ReadYourWrites uses
// it for Wrote and Deleted.
type ResourceResolver interface {
	ResourceFor(obj runtime.Object) (schema.GroupResource, error)
}

// ResourceFor implements ResourceResolver by the informers' example
// objects' Go types.
func (l InformerList) ResourceFor(obj runtime.Object) (schema.GroupResource, error) {
	return resourceByType(l, obj)
}

// ResourceFor implements ResourceResolver by the informers' example
// objects' Go types.
func (m InformerMap) ResourceFor(obj runtime.Object) (schema.GroupResource, error) {
	infs := make([]*FreshInformer, 0, len(m))
	for _, inf := range m {
		infs = append(infs, inf)
	}
	return resourceByType(infs, obj)
}

// ResourceFor implements ResourceResolver: the first source that can tell.
func (s Sources) ResourceFor(obj runtime.Object) (schema.GroupResource, error) {
	err := fmt.Errorf("%w: %s", ErrUnknownResource, typeName(obj))
	for _, src := range s {
		if r, ok := src.(ResourceResolver); ok {
			gr, rerr := r.ResourceFor(obj)
			if rerr == nil {
				return gr, nil
			}
			err = rerr
		}
	}
	return schema.GroupResource{}, err
}

// resourceByType finds the resource of the informer whose example object
// has obj's Go type (unstructured objects name their own kind instead).
func resourceByType(infs []*FreshInformer, obj runtime.Object) (schema.GroupResource, error) {
	if _, ok := obj.(runtime.Unstructured); !ok {
		var found []schema.GroupResource
		for _, inf := range infs {
			if sameType(inf.objectType, obj) && !inf.resource.Empty() && !slices.Contains(found, inf.resource) {
				found = append(found, inf.resource)
			}
		}
		if len(found) == 1 {
			return found[0], nil
		}
	}
	gvr, err := (resourceMapper{}).resourceFor(obj)
	return gvr.GroupResource(), err
}

func sameType(a, b any) bool {
	return a != nil && b != nil && fmt.Sprintf("%T", a) == fmt.Sprintf("%T", b)
}

// ReadYourWrites lets a reconciler read its own writes from informer caches.
// After each write made on behalf of an owner it records what the server
// returned (Wrote, Deleted, or Record and RecordDelete); before reading,
// the reconciler either blocks until every cache that holds what it wrote
// is fresh (EnsureFresh) or checks without blocking and requeues
// (CheckFresh), as kube-controller-manager's consistency store does.
//
// Each write is routed to every informer of its resource whose scope
// (namespace, label and field selectors) admits the written object, so a
// reconciler reading from any of them reads its write. Only the newest
// resource version per owner and informer is kept, and a recreated owner
// (new UID) starts clean.
//
// Its memory is bounded, also for owners that write and are never checked
// again (deleted from the cluster, their reconcile ended on NotFound):
// records are kept for at most MaxOwners owners (least recently used
// evicted first), and an owner with nothing recorded or checked for
// OwnerIdleTimeout is evicted at the next call (see ReadYourWritesOptions).
// Eviction never makes a check claim freshness it could not claim before:
// the writes and deletes the caches already show are forgotten (a check
// would find them fresh); those not shown yet are folded, per informer,
// into one record for all owners of the evicted owner's kind (the newest
// resource version written, and the deletes not shown), which every later
// check of an owner of that kind waits for too, until the cache shows
// them. So an owner reconciled again soon still reads its writes, and an
// owner never reconciled again holds nothing once it is evicted and its
// caches have caught up. An owner's deletes per informer are a set (O(1)
// per delete) that drops the deletes its cache shows whenever it has
// doubled. The folded records are bounded by the kinds of owners times the
// informers, plus the deletes their caches do not show yet (each an object
// still cached). A stopped informer will never show anything: what was
// folded for it is dropped.
//
// A ReadYourWrites is safe for concurrent use by any number of goroutines,
// for one owner or many: a mutex guards the records, and no lock is held
// while waiting.
type ReadYourWrites struct {
	source    InformerSource
	timeout   time.Duration
	mapper    resourceMapper
	clock     clock.PassiveClock
	maxOwners int
	idle      time.Duration

	mu     sync.Mutex // guards the fields below
	owners map[ownerKey]*ownerWrites
	lru    *list.List // of *ownerWrites, most recently used first
	// evicted holds, per owner kind and informer, what evicted owners of
	// that kind still wait for.
	evicted map[schema.GroupKind]map[*FreshInformer]*evictedWrites
}

// ownerWrites is what one owner still waits for, per informer the writes
// were routed to. Its size is bounded by the informers written to and, per
// informer, by deleteSet's bound.
type ownerWrites struct {
	key ownerKey
	uid types.UID
	// written is the newest resource version written through each
	// informer's resource that the informer must reach.
	written map[*FreshInformer]freshness.RV
	// deleted are the deletes each informer must show.
	deleted map[*FreshInformer]*deleteSet
	used    time.Time     // the last Record, RecordDelete or check
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

// minDeletePrune is the size from which a deleteSet prunes the deletes its
// cache already shows.
const minDeletePrune = 64

// deleteSet is a set of recorded deletes for one informer, each held once:
// adding, removing and finding one cost O(1). When it has doubled since it
// was last pruned (and holds at least minDeletePrune), it drops the
// deletes the informer's cache already shows, so it holds at most about
// twice the deletes the cache does not show yet (objects it still holds),
// and at least minDeletePrune.
type deleteSet struct {
	seq     map[deletedObject]uint64 // the order recorded, for stable checks
	next    uint64
	pruneAt int
}

func (s *deleteSet) add(d deletedObject, inf *FreshInformer) {
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
func (s *deleteSet) prune(inf *FreshInformer) {
	maps.DeleteFunc(s.seq, func(d deletedObject, _ uint64) bool { return !inf.holdsAlive(d) })
}

func (s *deleteSet) remove(d deletedObject) { delete(s.seq, d) }
func (s *deleteSet) len() int               { return len(s.seq) }

// list returns the deletes in the order recorded.
func (s *deleteSet) list() []deletedObject {
	out := slices.Collect(maps.Keys(s.seq))
	slices.SortFunc(out, func(a, b deletedObject) int { return cmp.Compare(s.seq[a], s.seq[b]) })
	return out
}

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

// pendingWrites is a snapshot of what a check of an owner waits for: its
// ownerWrites, and what evicted owners of its kind wait for.
type pendingWrites struct {
	written map[*FreshInformer]freshness.RV
	deleted map[*FreshInformer][]deletedObject
}

// ReadYourWritesOptions configure a ReadYourWrites.
type ReadYourWritesOptions struct {
	// Timeout bounds EnsureFresh (0: DefaultEnsureFreshTimeout).
	Timeout time.Duration
	// Scheme and RESTMapper tell Wrote and Deleted the resource of types
	// that client-go's scheme does not know, when the InformerSource cannot
	// tell (the factories use the scheme given to them with WithScheme).
	Scheme     *runtime.Scheme
	RESTMapper meta.RESTMapper
	// MaxOwners bounds the owners whose records are kept (0:
	// DefaultMaxOwners); past it, the least recently used owner is evicted
	// (see ReadYourWrites for what eviction keeps).
	MaxOwners int
	// OwnerIdleTimeout evicts an owner once nothing was recorded or
	// checked for it for that long (0: DefaultOwnerIdleTimeout).
	OwnerIdleTimeout time.Duration
	// Clock measures idleness (nil: the real clock).
	Clock clock.PassiveClock
}

// NewReadYourWrites returns a ReadYourWrites over the informers of source.
// timeout bounds EnsureFresh (0: DefaultEnsureFreshTimeout).
func NewReadYourWrites(source InformerSource, timeout time.Duration) *ReadYourWrites {
	return NewReadYourWritesWithOptions(source, ReadYourWritesOptions{Timeout: timeout})
}

// NewReadYourWritesWithOptions returns a ReadYourWrites configured by opts.
func NewReadYourWritesWithOptions(source InformerSource, opts ReadYourWritesOptions) *ReadYourWrites {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultEnsureFreshTimeout
	}
	if opts.MaxOwners <= 0 {
		opts.MaxOwners = DefaultMaxOwners
	}
	if opts.OwnerIdleTimeout <= 0 {
		opts.OwnerIdleTimeout = DefaultOwnerIdleTimeout
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &ReadYourWrites{
		source:    source,
		timeout:   opts.Timeout,
		mapper:    resourceMapper{scheme: opts.Scheme, mapper: opts.RESTMapper},
		clock:     opts.Clock,
		maxOwners: opts.MaxOwners,
		idle:      opts.OwnerIdleTimeout,
		owners:    map[ownerKey]*ownerWrites{},
		lru:       list.New(),
		evicted:   map[schema.GroupKind]map[*FreshInformer]*evictedWrites{},
	}
}

// record returns the owner's record, clearing a predecessor's, and evicts
// owners past the bounds. r.mu is held.
func (r *ReadYourWrites) record(owner Owner) *ownerWrites {
	now := r.clock.Now()
	r.evictIdleLocked(now)
	w := r.owners[owner.key()]
	if w != nil && w.uid != owner.UID {
		r.removeLocked(w) // a recreated owner does not wait for its predecessor
		w = nil
	}
	if w == nil {
		w = &ownerWrites{key: owner.key(), uid: owner.UID, written: map[*FreshInformer]freshness.RV{}, deleted: map[*FreshInformer]*deleteSet{}}
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

// removeLocked drops w's records. r.mu is held.
func (r *ReadYourWrites) removeLocked(w *ownerWrites) {
	delete(r.owners, w.key)
	r.lru.Remove(w.elem)
}

// evictIdleLocked evicts the owners idle for r.idle. r.mu is held.
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
// show it (see ReadYourWrites). r.mu is held.
func (r *ReadYourWrites) evictLocked(w *ownerWrites) {
	r.removeLocked(w)
	for inf, rv := range w.written {
		if !inf.reached(rv) && !inf.IsStopped() {
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
			if inf.holdsAlive(d) {
				r.evictedFor(w.key.gk, inf).deleted.add(d, inf)
			}
		}
	}
}

// evictedFor returns what evicted owners of kind gk wait for on inf,
// making it if needed. r.mu is held.
func (r *ReadYourWrites) evictedFor(gk schema.GroupKind, inf *FreshInformer) *evictedWrites {
	byInf := r.evicted[gk]
	if byInf == nil {
		byInf = map[*FreshInformer]*evictedWrites{}
		r.evicted[gk] = byInf
	}
	e := byInf[inf]
	if e == nil {
		e = &evictedWrites{}
		byInf[inf] = e
	}
	return e
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

// informersFor routes a write of obj, of resource gr, to the informers
// that will see it: every informer of gr whose scope admits obj. It
// returns an error matching ErrNoInformer if gr has no informer, and one
// matching ErrNotWatched if none admits obj.
func (r *ReadYourWrites) informersFor(gr schema.GroupResource, obj metav1.Object) ([]*FreshInformer, error) {
	all := r.source.FreshInformersForResource(gr)
	if len(all) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoInformer, resourceString(gr))
	}
	var admitted []*FreshInformer
	var notWatched []error
	for _, inf := range all {
		if err := inf.Admits(obj); err != nil {
			notWatched = append(notWatched, err)
			continue
		}
		admitted = append(admitted, inf)
	}
	if len(admitted) == 0 {
		return nil, errors.Join(notWatched...)
	}
	return admitted, nil
}

// resourceFor derives the resource of a written object: from the source
// if it can tell, else from the scheme and RESTMapper.
func (r *ReadYourWrites) resourceFor(obj metav1.Object) (schema.GroupResource, error) {
	ro, ok := obj.(runtime.Object)
	if !ok {
		return schema.GroupResource{}, fmt.Errorf("%w: %T is not a runtime.Object", ErrUnknownResource, obj)
	}
	if res, ok := r.source.(ResourceResolver); ok {
		if gr, err := res.ResourceFor(ro); err == nil {
			return gr, nil
		}
	}
	gvr, err := r.mapper.resourceFor(ro)
	return gvr.GroupResource(), err
}

// Record notes that written, as the server returned it from a create,
// update, patch or status write of resource gr, was written on behalf of
// owner. It returns an error matching ErrNoInformer or ErrNotWatched (and
// records nothing) when no informer of the resource will see the object,
// and one matching freshness.ErrIncomparable for a missing or malformed
// resource version.
func (r *ReadYourWrites) Record(owner Owner, gr schema.GroupResource, written metav1.Object) error {
	rv, err := freshness.ParseRV(written.GetResourceVersion())
	if err != nil {
		if written.GetResourceVersion() == "" {
			return fmt.Errorf("%s %s has no resource version: it did not come from an API server (client-go's fake clientsets stamp none: see package freshtest): %w",
				resourceString(gr), objectKey(written), err)
		}
		return fmt.Errorf("%s %s: %w", resourceString(gr), objectKey(written), err)
	}
	infs, err := r.informersFor(gr, written)
	if err != nil {
		return err
	}
	for _, inf := range infs {
		_ = inf.RecordWrittenObject(written) // metrics: write-to-visible, lag; a relist that lost it is declared
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.record(owner)
	for _, inf := range infs {
		if rv.Compare(w.written[inf]) > 0 {
			w.written[inf] = rv
		}
	}
	return nil
}

// Wrote is Record for the results of a write call, with the resource
// derived from the object (typed or unstructured), for one-line use:
//
//	cm, err := client.CoreV1().ConfigMaps(ns).Update(ctx, cm, opts)
//	if err := ryw.Wrote(owner, cm, err); err != nil { ... }
//
// It returns err as is when the write failed, and an error matching
// ErrUnknownResource when the resource cannot be derived (use Record).
func (r *ReadYourWrites) Wrote(owner Owner, written metav1.Object, err error) error {
	if err != nil {
		return err
	}
	gr, err := r.resourceFor(written)
	if err != nil {
		return err
	}
	return r.Record(owner, gr, written)
}

// RecordDelete notes that obj of resource gr was deleted on behalf of
// owner. obj is best the DELETE response when it is an object (its
// resource version is the deletion's, and an object held back by
// finalizers comes back terminating), else the object as last read (its
// UID is what counts). The caches count as fresh for the delete once they
// no longer hold the object (by UID) or hold it terminating at or past
// that resource version. Errors are Record's routing errors.
func (r *ReadYourWrites) RecordDelete(owner Owner, gr schema.GroupResource, obj metav1.Object) error {
	infs, err := r.informersFor(gr, obj)
	if err != nil {
		return err
	}
	d := deletedObject{key: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}, uid: obj.GetUID()}
	d.rv, _ = freshness.ParseRV(obj.GetResourceVersion()) // zero if none
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.record(owner)
	for _, inf := range infs {
		set := w.deleted[inf]
		if set == nil {
			set = &deleteSet{}
			w.deleted[inf] = set
		}
		set.add(d, inf)
	}
	return nil
}

// Deleted is RecordDelete for the result of a delete call, with the
// resource derived from obj, for one-line use:
//
//	err := client.CoreV1().ConfigMaps(ns).Delete(ctx, cm.Name, opts)
//	if err := ryw.Deleted(owner, cm, err); err != nil { ... }
//
// It returns err as is when the delete failed (a NotFound included: there
// is then nothing the cache must show).
func (r *ReadYourWrites) Deleted(owner Owner, obj metav1.Object, err error) error {
	if err != nil {
		return err
	}
	gr, err := r.resourceFor(obj)
	if err != nil {
		return err
	}
	return r.RecordDelete(owner, gr, obj)
}

// NewestKnownResourceVersion returns the newest resource version the
// informers of gr have had from the server (a list, an event, a
// bookmark), or "" if none has yet. The writes transport (package writes)
// records no write whose resource version is implausibly far ahead of it.
func (r *ReadYourWrites) NewestKnownResourceVersion(gr schema.GroupResource) string {
	var newest freshness.RV
	raise := func(s string) {
		if rv, err := freshness.ParseRV(s); err == nil && rv.Compare(newest) > 0 {
			newest = rv
		}
	}
	for _, inf := range r.source.FreshInformersForResource(gr) {
		raise(inf.LastSyncResourceVersion())
		raise(inf.LastObservedResourceVersion())
	}
	return newest.String()
}

// Forget drops what was recorded for owner, whatever its UID (call it when
// the owner is deleted). What evicted owners of its kind wait for stays.
func (r *ReadYourWrites) Forget(owner Owner) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.owners[owner.key()]; w != nil {
		r.removeLocked(w)
	}
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
			p.deleted = make(map[*FreshInformer][]deletedObject, len(w.deleted))
			for inf, set := range w.deleted {
				p.deleted[inf] = set.list()
			}
		}
	}
	r.addEvictedLocked(owner.GroupKind, &p)
	return p
}

// addEvictedLocked adds to p what evicted owners of kind gk wait for,
// forgetting what the caches show already. r.mu is held.
func (r *ReadYourWrites) addEvictedLocked(gk schema.GroupKind, p *pendingWrites) {
	byInf := r.evicted[gk]
	for inf, e := range byInf {
		if inf.IsStopped() {
			delete(byInf, inf)
			continue
		}
		if !e.written.IsZero() && inf.reached(e.written) {
			e.written = freshness.RV{}
		}
		e.deleted.prune(inf)
		if e.written.IsZero() && e.deleted.len() == 0 {
			delete(byInf, inf)
			continue
		}
		if !e.written.IsZero() {
			if p.written == nil {
				p.written = map[*FreshInformer]freshness.RV{}
			}
			if e.written.Compare(p.written[inf]) > 0 {
				p.written[inf] = e.written
			}
		}
		if e.deleted.len() > 0 {
			if p.deleted == nil {
				p.deleted = map[*FreshInformer][]deletedObject{}
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

// informers returns the informers p waits on, in a stable order.
func (p pendingWrites) informers() []*FreshInformer {
	var out []*FreshInformer
	for inf := range p.written {
		out = append(out, inf)
	}
	for inf := range p.deleted {
		if _, ok := p.written[inf]; !ok {
			out = append(out, inf)
		}
	}
	slices.SortFunc(out, func(a, b *FreshInformer) int {
		return cmp.Or(cmp.Compare(resourceString(a.resource), resourceString(b.resource)), cmp.Compare(a.selector.String(), b.selector.String()))
	})
	return out
}

// settled forgets what EnsureFresh or CheckFresh found fresh, in the
// owner's records and in what evicted owners of its kind wait for: each
// write at or below the resource version found (a newer one that came in
// meanwhile stays), and the deletes it checked (by value: those recorded
// meanwhile stay, and concurrent checks of one owner settle in any order).
// It takes r.mu and calls nothing of the informers, so it may run on any
// goroutine (WhenFresh's callbacks).
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

// usable returns an error matching ErrNoInformer, at once, for an informer
// that was never started: waiting on it could only time out.
func usable(inf *FreshInformer) error {
	if !inf.hasStarted() {
		return fmt.Errorf("%w: the %s was never started", ErrNoInformer, inf.describe())
	}
	return nil
}

// CheckFresh reports, without blocking, whether every cache owner wrote to
// has caught up: nil if so, else a *NotFreshError (matching ErrNotFresh)
// naming a resource that is behind, for a workqueue controller to requeue.
// It fails at once, matching ErrNoInformer, if an informer written to was
// never started.
func (r *ReadYourWrites) CheckFresh(owner Owner) error {
	p := r.pending(owner)
	for _, inf := range p.informers() {
		if err := usable(inf); err != nil {
			return err
		}
		if rv, ok := p.written[inf]; ok && !inf.reached(rv) {
			return &NotFreshError{Owner: owner, Resource: inf.resource, Scope: inf.selector, Written: rv.String(), Observed: inf.LastObservedResourceVersion()}
		}
		for _, d := range p.deleted[inf] {
			if inf.holdsAlive(d) {
				return &NotFreshError{Owner: owner, Resource: inf.resource, Scope: inf.selector, Deleted: d.key, Observed: inf.LastObservedResourceVersion()}
			}
		}
	}
	r.settled(owner, p)
	return nil
}

// EnsureFresh blocks until every cache owner wrote to has caught up, ctx
// ends, or the default timeout passes. Errors are WaitForFreshness's,
// naming the resource, the informer's scope and the owner; one matching
// ErrNoInformer comes at once if an informer written to was never started.
func (r *ReadYourWrites) EnsureFresh(ctx context.Context, owner Owner) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	p := r.pending(owner)
	for _, inf := range p.informers() {
		if err := usable(inf); err != nil {
			return err
		}
		if rv, ok := p.written[inf]; ok {
			if err := inf.WaitForFreshness(ctx, rv.String()); err != nil { // counted in the wait metrics
				return fmt.Errorf("%s: write on behalf of %s: %w", inf.describe(), owner, err)
			}
		}
		for _, d := range p.deleted[inf] {
			if err := inf.waitDeleted(ctx, d); err != nil {
				return fmt.Errorf("%s: delete of %s on behalf of %s: %w", inf.describe(), d.key, owner, err)
			}
		}
	}
	r.settled(owner, p)
	return nil
}

// holdsAlive reports whether the cache still holds the deleted object
// (same key and UID) as if the delete had not happened: not terminating,
// or terminating at a resource version older than the delete's.
func (f *FreshInformer) holdsAlive(d deletedObject) bool {
	key := d.key.Name
	if d.key.Namespace != "" {
		key = d.key.Namespace + "/" + key
	}
	obj, ok, _ := f.indexer.GetByKey(key)
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

// waitDeleted waits until the cache shows the delete d: the object gone
// (by UID), or terminating at or past the delete's resource version. It
// waits for what proves the delete, never for an unrelated global
// resource version: first for the delete's own resource version when the
// cache is behind it, then for each next change the informer applies
// (the delete event comes next on a quiet resource).
func (f *FreshInformer) waitDeleted(ctx context.Context, d deletedObject) error {
	for {
		// Read the position before looking: the indexer changes before the
		// tracker moves, so a delete applied after the look wakes the wait.
		cur := f.tracker.Current()
		if !f.holdsAlive(d) {
			return nil
		}
		target := d.rv
		if target.Compare(cur) <= 0 {
			target = nextRV(cur)
		}
		if err := f.WaitForFreshness(ctx, target.String()); err != nil {
			return err
		}
	}
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
