package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
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
	// Written is the resource version of the newest write ("" for a
	// delete), Observed the informer's.
	Written, Observed string
	// Deleted names the deleted object still cached, for a delete.
	Deleted types.NamespacedName
}

func (e *NotFreshError) Error() string {
	if e.Deleted.Name != "" {
		return fmt.Sprintf("%s cache still holds %s, deleted on behalf of %s", e.Resource, e.Deleted, e.Owner.NamespacedName)
	}
	return fmt.Sprintf("%s cache is at %s, behind %s written on behalf of %s", e.Resource, e.Observed, e.Written, e.Owner.NamespacedName)
}

// Is reports whether target is ErrNotFresh.
func (e *NotFreshError) Is(target error) bool { return target == ErrNotFresh }

// ErrNotWatched is matched by Record's error for a written object the
// resource's informer will never see (outside its namespace or label
// selector): waiting for it would only time out.
var ErrNotWatched = errors.New("written object is outside the informer's selector")

// Owner is the object a reconciler works on behalf of. Its UID tells a
// recreated owner from its predecessor.
type Owner struct {
	types.NamespacedName
	UID types.UID
}

// OwnerOf returns obj as an Owner.
func OwnerOf(obj metav1.Object) Owner {
	return Owner{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}, UID: obj.GetUID()}
}

// InformerSource finds the informer that caches a resource. Both factories
// implement it; InformerMap is a fixed one.
type InformerSource interface {
	FreshInformerForResource(gr schema.GroupResource) (*FreshInformer, bool)
}

// InformerMap is an InformerSource over informers made by hand.
type InformerMap map[schema.GroupResource]*FreshInformer

// FreshInformerForResource implements InformerSource.
func (m InformerMap) FreshInformerForResource(gr schema.GroupResource) (*FreshInformer, bool) {
	inf, ok := m[gr]
	return inf, ok
}

// ReadYourWrites lets a reconciler read its own writes from informer caches.
// After each write made on behalf of an owner it records the resource
// version the server returned (Record, RecordDelete); before reading, the
// reconciler either blocks until every resource it wrote is fresh
// (EnsureFresh) or checks without blocking and requeues (CheckFresh), as
// kube-controller-manager's consistency store does. Only the newest
// resource version per owner and resource is kept, and a recreated owner
// (new UID) starts clean.
type ReadYourWrites struct {
	source  InformerSource
	timeout time.Duration

	mu     sync.Mutex
	owners map[types.NamespacedName]*ownerWrites
}

type ownerWrites struct {
	uid     types.UID
	written map[schema.GroupResource]freshness.RV
	deleted map[schema.GroupResource][]deletedObject
}

type deletedObject struct {
	key types.NamespacedName
	uid types.UID
}

// NewReadYourWrites returns a ReadYourWrites over the informers of source.
// timeout bounds EnsureFresh (0: DefaultEnsureFreshTimeout).
func NewReadYourWrites(source InformerSource, timeout time.Duration) *ReadYourWrites {
	if timeout <= 0 {
		timeout = DefaultEnsureFreshTimeout
	}
	return &ReadYourWrites{source: source, timeout: timeout, owners: map[types.NamespacedName]*ownerWrites{}}
}

// record returns the owner's record, clearing a predecessor's. r.mu is held.
func (r *ReadYourWrites) record(owner Owner) *ownerWrites {
	w := r.owners[owner.NamespacedName]
	if w == nil || w.uid != owner.UID {
		w = &ownerWrites{uid: owner.UID, written: map[schema.GroupResource]freshness.RV{}, deleted: map[schema.GroupResource][]deletedObject{}}
		r.owners[owner.NamespacedName] = w
	}
	return w
}

// Record notes that written, as the server returned it from a create,
// update, patch or status write of resource gr, was written on behalf of
// owner. It returns an error matching ErrNotWatched (and records nothing)
// when the resource's informer cannot see the object, and one matching
// freshness.ErrIncomparable for a malformed resource version.
func (r *ReadYourWrites) Record(owner Owner, gr schema.GroupResource, written metav1.Object) error {
	rv, err := freshness.ParseRV(written.GetResourceVersion())
	if err != nil {
		return err
	}
	inf, ok := r.source.FreshInformerForResource(gr)
	if !ok {
		return fmt.Errorf("%w: %s", ErrNoInformer, gr)
	}
	if err := inf.admits(written); err != nil {
		return err
	}
	_ = inf.RecordWrite(rv.String()) // metrics: write-to-visible, lag
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.record(owner)
	if rv.Compare(w.written[gr]) > 0 {
		w.written[gr] = rv
	}
	return nil
}

// Wrote is Record for the results of a write call, for one-line use:
//
//	cm, err := client.CoreV1().ConfigMaps(ns).Update(ctx, cm, opts)
//	if err := ryw.Wrote(owner, configMapsResource, cm, err); err != nil { ... }
//
// It returns err as is when the write failed.
func (r *ReadYourWrites) Wrote(owner Owner, gr schema.GroupResource, written metav1.Object, err error) error {
	if err != nil {
		return err
	}
	return r.Record(owner, gr, written)
}

// RecordDelete notes that obj of resource gr was deleted on behalf of
// owner. A delete returns no resource version of its own: the cache counts
// as fresh for it once it no longer holds that object (by UID).
func (r *ReadYourWrites) RecordDelete(owner Owner, gr schema.GroupResource, obj metav1.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.record(owner)
	w.deleted[gr] = append(w.deleted[gr], deletedObject{
		key: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()},
		uid: obj.GetUID(),
	})
}

// Forget drops what was recorded for owner (call it when the owner is
// deleted).
func (r *ReadYourWrites) Forget(owner types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.owners, owner)
}

// pending returns a copy of what owner still waits for.
func (r *ReadYourWrites) pending(owner Owner) (map[schema.GroupResource]freshness.RV, map[schema.GroupResource][]deletedObject) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.owners[owner.NamespacedName]
	if w == nil {
		return nil, nil
	}
	if w.uid != owner.UID { // a recreated owner does not wait for its predecessor
		delete(r.owners, owner.NamespacedName)
		return nil, nil
	}
	written := make(map[schema.GroupResource]freshness.RV, len(w.written))
	for gr, rv := range w.written {
		written[gr] = rv
	}
	deleted := make(map[schema.GroupResource][]deletedObject, len(w.deleted))
	for gr, d := range w.deleted {
		deleted[gr] = append([]deletedObject(nil), d...)
	}
	return written, deleted
}

// settled forgets what EnsureFresh or CheckFresh found fresh: the writes
// unless a newer one came in meanwhile, and the deletes it checked (those
// recorded meanwhile were appended after them and stay).
func (r *ReadYourWrites) settled(owner Owner, written map[schema.GroupResource]freshness.RV, deleted map[schema.GroupResource][]deletedObject) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.owners[owner.NamespacedName]
	if w == nil || w.uid != owner.UID {
		return
	}
	for gr, rv := range written {
		if w.written[gr] == rv {
			delete(w.written, gr)
		}
	}
	for gr, checked := range deleted {
		if rest := w.deleted[gr][len(checked):]; len(rest) > 0 {
			w.deleted[gr] = rest
		} else {
			delete(w.deleted, gr)
		}
	}
	if len(w.written) == 0 && len(w.deleted) == 0 {
		delete(r.owners, owner.NamespacedName)
	}
}

// CheckFresh reports, without blocking, whether every cache owner wrote to
// has caught up: nil if so, else a *NotFreshError (matching ErrNotFresh)
// naming a resource that is behind, for a workqueue controller to requeue.
func (r *ReadYourWrites) CheckFresh(owner Owner) error {
	written, deleted := r.pending(owner)
	for gr, rv := range written {
		inf, ok := r.source.FreshInformerForResource(gr)
		if !ok {
			return fmt.Errorf("%w: %s", ErrNoInformer, gr)
		}
		if !inf.reached(rv) {
			return &NotFreshError{Owner: owner, Resource: gr, Written: rv.String(), Observed: inf.LastObservedResourceVersion()}
		}
	}
	for gr, objs := range deleted {
		inf, ok := r.source.FreshInformerForResource(gr)
		if !ok {
			return fmt.Errorf("%w: %s", ErrNoInformer, gr)
		}
		for _, d := range objs {
			if inf.holds(d) {
				return &NotFreshError{Owner: owner, Resource: gr, Deleted: d.key, Observed: inf.LastObservedResourceVersion()}
			}
		}
	}
	r.settled(owner, written, deleted)
	return nil
}

// EnsureFresh blocks until every cache owner wrote to has caught up, ctx
// ends, or the default timeout passes. Errors are WaitForFreshness's,
// naming the resource.
func (r *ReadYourWrites) EnsureFresh(ctx context.Context, owner Owner) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	written, deleted := r.pending(owner)
	for gr, rv := range written {
		inf, ok := r.source.FreshInformerForResource(gr)
		if !ok {
			return fmt.Errorf("%w: %s", ErrNoInformer, gr)
		}
		if err := inf.WaitForFreshness(ctx, rv.String()); err != nil { // counted in the wait metrics
			return fmt.Errorf("%s written on behalf of %s: %w", gr, owner.NamespacedName, err)
		}
	}
	for gr, objs := range deleted {
		inf, ok := r.source.FreshInformerForResource(gr)
		if !ok {
			return fmt.Errorf("%w: %s", ErrNoInformer, gr)
		}
		if err := inf.waitDeleted(ctx, objs); err != nil {
			return fmt.Errorf("%s deleted on behalf of %s: %w", gr, owner.NamespacedName, err)
		}
	}
	r.settled(owner, written, deleted)
	return nil
}

// holds reports whether the cache still holds the deleted object (same
// key and UID).
func (f *FreshInformer) holds(d deletedObject) bool {
	key := d.key.Name
	if d.key.Namespace != "" {
		key = d.key.Namespace + "/" + key
	}
	obj, ok, _ := f.indexer.GetByKey(key)
	if !ok {
		return false
	}
	m, err := meta.Accessor(obj)
	return err == nil && (d.uid == "" || m.GetUID() == d.uid)
}

// waitDeleted waits until the cache no longer holds any of objs. Most
// often the delete event has already arrived; otherwise it asks the server
// for its current resource version (one consistent limit=1 list), which is
// at least the deletion's, and waits for that, without polling.
func (f *FreshInformer) waitDeleted(ctx context.Context, objs []deletedObject) error {
	held := false
	for _, d := range objs {
		held = held || f.holds(d)
	}
	if !held {
		return nil
	}
	rv, err := f.ProbeResourceVersion(ctx)
	if err != nil {
		return fmt.Errorf("asking the server for a resource version after the delete: %w", err)
	}
	if err := f.WaitForFreshness(ctx, rv); err != nil {
		return err
	}
	for _, d := range objs {
		if f.holds(d) { // recreated with the same UID cannot happen; a stale delete record can
			return &NotFreshError{Resource: f.resource, Deleted: d.key, Observed: f.LastObservedResourceVersion()}
		}
	}
	return nil
}

// admits returns an error matching ErrNotWatched if the informer's
// selector excludes obj.
func (f *FreshInformer) admits(obj metav1.Object) error {
	s := f.selector
	why := ""
	switch {
	case s.Namespace != "" && obj.GetNamespace() != s.Namespace:
		why = "namespace " + s.Namespace
	case s.Labels != nil && !s.Labels.Matches(labels.Set(obj.GetLabels())):
		why = "label selector " + s.Labels.String()
	case s.Fields != nil && onlyMetadataFields(s.Fields) &&
		!s.Fields.Matches(fields.Set{"metadata.name": obj.GetName(), "metadata.namespace": obj.GetNamespace()}):
		why = "field selector " + s.Fields.String()
	}
	if why == "" {
		return nil
	}
	return fmt.Errorf("%w: %s/%s is outside the %s informer's %s", ErrNotWatched, obj.GetNamespace(), obj.GetName(), f.resource, why)
}

func onlyMetadataFields(s fields.Selector) bool {
	for _, r := range s.Requirements() {
		if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
			return false
		}
	}
	return true
}
