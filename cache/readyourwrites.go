package cache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/freshinformer/freshinformer/freshness"
)

// DefaultEnsureFreshTimeout bounds EnsureFresh when its context has no
// earlier deadline.
const DefaultEnsureFreshTimeout = 10 * time.Second

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
// A ReadYourWrites is safe for concurrent use by any number of goroutines,
// for one owner or many: a mutex guards the records, and no lock is held
// while waiting.
type ReadYourWrites struct {
	source  InformerSource
	timeout time.Duration
	mapper  resourceMapper

	mu     sync.Mutex // guards owners
	owners map[ownerKey]*ownerWrites
}

// ownerWrites is what one owner still waits for, per informer the writes
// were routed to.
type ownerWrites struct {
	uid types.UID
	// written is the newest resource version written through each
	// informer's resource that the informer must reach.
	written map[*FreshInformer]freshness.RV
	// deleted are the deletes each informer must show.
	deleted map[*FreshInformer][]deletedObject
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

// pendingWrites is a snapshot of an ownerWrites.
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
	return &ReadYourWrites{
		source:  source,
		timeout: opts.Timeout,
		mapper:  resourceMapper{scheme: opts.Scheme, mapper: opts.RESTMapper},
		owners:  map[ownerKey]*ownerWrites{},
	}
}

// record returns the owner's record, clearing a predecessor's. r.mu is held.
func (r *ReadYourWrites) record(owner Owner) *ownerWrites {
	w := r.owners[owner.key()]
	if w == nil || w.uid != owner.UID {
		w = &ownerWrites{uid: owner.UID, written: map[*FreshInformer]freshness.RV{}, deleted: map[*FreshInformer][]deletedObject{}}
		r.owners[owner.key()] = w
	}
	return w
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
		if !slices.Contains(w.deleted[inf], d) {
			w.deleted[inf] = append(w.deleted[inf], d)
		}
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

// Forget drops what was recorded for owner, whatever its UID (call it when
// the owner is deleted).
func (r *ReadYourWrites) Forget(owner Owner) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.owners, owner.key())
}

// pending returns a copy of what owner still waits for.
func (r *ReadYourWrites) pending(owner Owner) pendingWrites {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.owners[owner.key()]
	if w == nil {
		return pendingWrites{}
	}
	if w.uid != owner.UID { // a recreated owner does not wait for its predecessor
		delete(r.owners, owner.key())
		return pendingWrites{}
	}
	p := pendingWrites{
		written: make(map[*FreshInformer]freshness.RV, len(w.written)),
		deleted: make(map[*FreshInformer][]deletedObject, len(w.deleted)),
	}
	for inf, rv := range w.written {
		p.written[inf] = rv
	}
	for inf, d := range w.deleted {
		p.deleted[inf] = slices.Clone(d)
	}
	return p
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

// settled forgets what EnsureFresh or CheckFresh found fresh: each write
// unless a newer one came in meanwhile, and the deletes it checked (by
// value: those recorded meanwhile stay, and concurrent checks of one owner
// settle in any order).
func (r *ReadYourWrites) settled(owner Owner, p pendingWrites) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.owners[owner.key()]
	if w == nil || w.uid != owner.UID {
		return
	}
	for inf, rv := range p.written {
		if w.written[inf] == rv {
			delete(w.written, inf)
		}
	}
	for inf, checked := range p.deleted {
		rest := slices.DeleteFunc(w.deleted[inf], func(d deletedObject) bool { return slices.Contains(checked, d) })
		if len(rest) == 0 {
			delete(w.deleted, inf)
		} else {
			w.deleted[inf] = rest
		}
	}
	if len(w.written) == 0 && len(w.deleted) == 0 {
		delete(r.owners, owner.key())
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
