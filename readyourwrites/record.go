package readyourwrites

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/detector"
	"github.com/freshinformer/freshinformer/internal/resources"
)

// Recording a write: route it to the informers that will see it, report it
// to them (write-to-visible and lag metrics, lost-write detection), then
// note it in each owner's records under the mutex.

// Record notes that written, as the server returned it from a create,
// update, patch or status write of resource gr, was written on behalf of
// owner. It returns an error matching cache.ErrNoInformer or cache.ErrNotWatched
// (and records nothing) when no informer of the resource will see the
// object, and one matching freshness.ErrIncomparable for a missing or
// malformed resource version.
func (r *ReadYourWrites) Record(owner Owner, gr schema.GroupResource, written metav1.Object) error {
	return r.RecordFor([]Owner{owner}, gr, written)
}

// RecordFor is Record on behalf of several owners at once (a write that
// several reconcilers, or several kinds of reads, must see): the write is
// routed and reported to its informers once, and each owner waits for it.
func (r *ReadYourWrites) RecordFor(owners []Owner, gr schema.GroupResource, written metav1.Object) error {
	rv, err := freshness.ParseRV(written.GetResourceVersion())
	if err != nil {
		if written.GetResourceVersion() == "" {
			return fmt.Errorf("%s %s has no resource version: it did not come from an API server (client-go's fake clientsets stamp none: see package freshtest): %w",
				resources.String(gr), resources.Key(written.GetNamespace(), written.GetName()), err)
		}
		return fmt.Errorf("%s %s: %w", resources.String(gr), resources.Key(written.GetNamespace(), written.GetName()), err)
	}
	infs, err := r.informersFor(gr, written)
	if err != nil {
		return err
	}
	for _, inf := range infs {
		_ = inf.RecordWrittenObject(written) // metrics: write-to-visible, lag; a relist that lost it is declared
	}
	r.noteWritten(owners, infs, rv)
	return nil
}

// RecordResourceVersion notes that owners must read at least rv from every
// informer of gr that can hold objects of namespace ("" for all namespaces
// or a cluster-scoped resource), whatever their selectors: for a write that
// returned no object to route by, such as a deletecollection, rv being the
// server's resource version read after it (FreshInformer's
// ServerResourceVersion). It returns an error matching cache.ErrNoInformer
// when no informer of gr can hold such objects, and one matching
// freshness.ErrIncomparable for a malformed rv.
func (r *ReadYourWrites) RecordResourceVersion(owners []Owner, gr schema.GroupResource, namespace, rv string) error {
	target, err := freshness.ParseRV(rv)
	if err != nil {
		return fmt.Errorf("%s: %w", resources.String(gr), err)
	}
	var infs []*cache.FreshInformer
	for _, inf := range r.source.FreshInformersForResource(gr) {
		if ns := inf.Selector().Namespace; ns == "" || namespace == "" || ns == namespace {
			infs = append(infs, inf)
		}
	}
	if len(infs) == 0 {
		return fmt.Errorf("%w: %s in namespace %q", cache.ErrNoInformer, resources.String(gr), namespace)
	}
	for _, inf := range infs {
		_ = inf.RecordWrite(rv)
	}
	r.noteWritten(owners, infs, target)
	return nil
}

// noteWritten raises each owner's record of each informer to rv.
func (r *ReadYourWrites) noteWritten(owners []Owner, infs []*cache.FreshInformer, rv freshness.RV) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, owner := range owners {
		w := r.record(owner)
		for _, inf := range infs {
			if rv.Compare(w.written[inf]) > 0 {
				w.written[inf] = rv
			}
		}
	}
}

// Wrote is Record for the results of a write call, with the resource
// derived from the object (typed or unstructured), for one-line use:
//
//	cm, err := client.CoreV1().ConfigMaps(ns).Update(ctx, cm, opts)
//	if err := ryw.Wrote(owner, cm, err); err != nil { ... }
//
// It returns err as is when the write failed, and an error matching
// cache.ErrUnknownResource when the resource cannot be derived (use
// Record).
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
	return r.RecordDeleteFor([]Owner{owner}, gr, obj)
}

// RecordDeleteFor is RecordDelete on behalf of several owners at once.
func (r *ReadYourWrites) RecordDeleteFor(owners []Owner, gr schema.GroupResource, obj metav1.Object) error {
	infs, err := r.informersFor(gr, obj)
	if err != nil {
		return err
	}
	for _, inf := range infs {
		if sr := detector.Of(inf.GetIndexer()); sr != nil {
			sr.Deleted(obj)
		}
	}
	d := deletedObject{key: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}, uid: obj.GetUID()}
	d.rv, _ = freshness.ParseRV(obj.GetResourceVersion()) // zero if none
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, owner := range owners {
		w := r.record(owner)
		for _, inf := range infs {
			set := w.deleted[inf]
			if set == nil {
				set = &deleteSet{}
				if w.deleted == nil {
					w.deleted = map[*cache.FreshInformer]*deleteSet{}
				}
				w.deleted[inf] = set
			}
			set.add(d, inf)
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
// the owner is deleted). What evicted owners of its kind wait for stays.
func (r *ReadYourWrites) Forget(owner Owner) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.owners[owner.key()]; w != nil {
		r.removeLocked(w)
	}
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

// informersFor routes a write of obj, of resource gr, to the informers
// that will see it: every informer of gr whose scope admits obj, and every
// one that holds obj's key (the write moves it out of that informer's
// selector: the informer sees a delete at the write's resource version).
// It returns an error matching cache.ErrNoInformer if gr has no informer,
// and one matching cache.ErrNotWatched if none will see obj.
func (r *ReadYourWrites) informersFor(gr schema.GroupResource, obj metav1.Object) ([]*cache.FreshInformer, error) {
	all := r.source.FreshInformersForResource(gr)
	if len(all) == 0 {
		return nil, fmt.Errorf("%w: %s", cache.ErrNoInformer, resources.String(gr))
	}
	var admitted []*cache.FreshInformer
	var notWatched []error
	for _, inf := range all {
		if err := inf.Admits(obj); err != nil {
			if _, held, _ := detector.Unwrap(inf.GetIndexer()).GetByKey(resources.Key(obj.GetNamespace(), obj.GetName())); !held {
				notWatched = append(notWatched, err)
				continue
			}
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
		return schema.GroupResource{}, fmt.Errorf("%w: %T is not a runtime.Object", cache.ErrUnknownResource, obj)
	}
	if res, ok := r.source.(cache.ResourceResolver); ok {
		if gr, err := res.ResourceFor(ro); err == nil {
			return gr, nil
		}
	}
	gvr, err := r.resolver.ResourceFor(ro)
	return gvr.GroupResource(), err
}
