package freshctrl

import (
	"context"
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/readyourwrites"
)

// Recording the client's writes: each successful write (unless opted out)
// is recorded in every representation's ReadYourWrites, which routes it to
// the informers that will see it, and raises the marks of foreign
// informers. A write whose resource version cannot be ordered, or that no
// informer will see, is not recorded: no read could wait for it.

// record notes a successful write of obj (as the server returned it).
func (c *freshClient) record(obj client.Object) {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return
	}
	c.recordWritten(gvk.GroupKind(), obj)
}

// recordWritten records written, an object of kind gk as the server
// returned it.
func (c *freshClient) recordWritten(gk schema.GroupKind, written metav1.Object) {
	rv, err := freshness.ParseRV(written.GetResourceVersion())
	if err != nil || rv.IsZero() {
		return // an RV that cannot be ordered cannot be waited for
	}
	gr, ok := c.cache.reg.resourceOf(gk)
	if !ok {
		return // no informer of the kind: a read makes one, whose list is newer
	}
	key := types.NamespacedName{Namespace: written.GetNamespace(), Name: written.GetName()}
	owners := writeOwners(gk, key)
	for _, rep := range representations() {
		// Not watched, no informer of this representation: nothing to wait for.
		_ = c.ryw[rep].RecordFor(owners, gr, written)
	}
	c.foreign.raise(c.cache.reg, gk, rv, func(e *informerEntry) bool {
		return e.Scope.Admits(key.Namespace, key.Name, written.GetLabels()) || cached(e, key)
	})
}

// Create implements client.Writer.
func (c *freshClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := c.Client.Create(ctx, obj, opts...); err != nil {
		return err
	}
	if !optedOut((&client.CreateOptions{}).ApplyOptions(opts)) {
		c.record(obj)
	}
	return nil
}

// Update implements client.Writer.
func (c *freshClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := c.Client.Update(ctx, obj, opts...); err != nil {
		return err
	}
	if !optedOut((&client.UpdateOptions{}).ApplyOptions(opts)) {
		c.record(obj)
	}
	return nil
}

// Patch implements client.Writer.
func (c *freshClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := c.Client.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	if !optedOut((&client.PatchOptions{}).ApplyOptions(opts)) {
		c.record(obj)
	}
	return nil
}

// Apply implements client.Writer. The written object is read back from the
// apply configuration, which controller-runtime fills with the response.
func (c *freshClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if err := c.Client.Apply(ctx, obj, opts...); err != nil {
		return err
	}
	if !optedOut((&client.ApplyOptions{}).ApplyOptions(opts)) {
		c.recordApplied(obj)
	}
	return nil
}

// recordApplied records an apply configuration's response: unstructured
// ones carry an object; typed ones have the generated metadata fields.
func (c *freshClient) recordApplied(obj runtime.ApplyConfiguration) {
	if u, ok := obj.(interface {
		GetObjectKind() schema.ObjectKind
		client.Object
	}); ok {
		c.record(u)
		return
	}
	v := reflect.ValueOf(obj)
	for v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return
	}
	str := func(name string) string {
		f := v.FieldByName(name)
		if !f.IsValid() || f.Kind() != reflect.Pointer || f.IsNil() || f.Elem().Kind() != reflect.String {
			return ""
		}
		return f.Elem().String()
	}
	gv, err := schema.ParseGroupVersion(str("APIVersion"))
	if err != nil || str("Kind") == "" {
		return
	}
	written := &metav1.ObjectMeta{Namespace: str("Namespace"), Name: str("Name"), ResourceVersion: str("ResourceVersion"), UID: types.UID(str("UID"))}
	if f := v.FieldByName("Labels"); f.IsValid() {
		written.Labels, _ = f.Interface().(map[string]string)
	}
	c.recordWritten(gv.WithKind(str("Kind")).GroupKind(), written)
}

// Delete implements client.Writer. A later read waits until the cache no
// longer holds the deleted object's UID (or holds it terminating).
func (c *freshClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	do := (&client.DeleteOptions{}).ApplyOptions(opts)
	uid := obj.GetUID()
	if do.Preconditions != nil && ptr.Deref(do.Preconditions.UID, "") != "" {
		uid = *do.Preconditions.UID
	}
	if err := c.Client.Delete(ctx, obj, opts...); err != nil {
		return err
	}
	if optedOut(do) {
		return nil
	}
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return nil
	}
	gk := gvk.GroupKind()
	gr, ok := c.cache.reg.resourceOf(gk)
	if !ok {
		return nil
	}
	// The object as the caller last knew it, with the UID the delete was
	// for: the caches count it deleted once they no longer hold that UID.
	deleted := &metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: uid,
		ResourceVersion: obj.GetResourceVersion(), Labels: obj.GetLabels()}
	owners := writeOwners(gk, types.NamespacedName{Namespace: deleted.Namespace, Name: deleted.Name})
	for _, rep := range representations() {
		_ = c.ryw[rep].RecordDeleteFor(owners, gr, deleted)
	}
	return nil
}

// DeleteAllOf implements client.Writer. The response carries no resource
// version, so the client asks the server for its current one afterwards
// (one limit=1 list through an informer of the resource, bounded by
// Options.Timeout) and later reads of the namespace wait for it.
func (c *freshClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	if err := c.Client.DeleteAllOf(ctx, obj, opts...); err != nil {
		return err
	}
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return nil
	}
	gk := gvk.GroupKind()
	ns := (&client.DeleteAllOfOptions{}).ApplyOptions(opts).Namespace
	for _, e := range c.cache.reg.all(gk) {
		if !e.Scope.covers(ns) || e.Informer == nil {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, c.timeout)
		s, err := e.Informer.ServerResourceVersion(pctx)
		cancel()
		if err != nil {
			return fmt.Errorf("freshctrl: DeleteAllOf succeeded, but asking the server for its resource version failed: %w", err)
		}
		rv, err := freshness.ParseRV(s)
		if err != nil || rv.IsZero() {
			return nil
		}
		owners := []readyourwrites.Owner{barrierOwner(gk, ns), namespaceOwner(gk, ns)}
		if ns != "" {
			owners = append(owners, namespaceOwner(gk, ""))
		}
		for _, rep := range representations() {
			_ = c.ryw[rep].RecordResourceVersion(owners, e.Resource, ns, s)
		}
		c.foreign.raise(c.cache.reg, gk, rv, func(f *informerEntry) bool { return f.Scope.covers(ns) })
		return nil
	}
	return nil
}

// Status implements client.StatusClient.
func (c *freshClient) Status() client.SubResourceWriter { return c.SubResource("status") }

// SubResource implements client.SubResourceClientConstructor: updates,
// patches and applies of a subresource (status, scale) are recorded like
// writes of the object.
func (c *freshClient) SubResource(sub string) client.SubResourceClient {
	return &subResourceClient{SubResourceClient: c.Client.SubResource(sub), c: c}
}

type subResourceClient struct {
	client.SubResourceClient
	c *freshClient
}

// Update implements client.SubResourceWriter.
func (s *subResourceClient) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if err := s.SubResourceClient.Update(ctx, obj, opts...); err != nil {
		return err
	}
	if !optedOut((&client.SubResourceUpdateOptions{}).ApplyOptions(opts)) {
		s.c.record(obj)
	}
	return nil
}

// Patch implements client.SubResourceWriter.
func (s *subResourceClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := s.SubResourceClient.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	if !optedOut((&client.SubResourcePatchOptions{}).ApplyOptions(opts)) {
		s.c.record(obj)
	}
	return nil
}

// Apply implements client.SubResourceWriter.
func (s *subResourceClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	if err := s.SubResourceClient.Apply(ctx, obj, opts...); err != nil {
		return err
	}
	if !optedOut((&client.SubResourceApplyOptions{}).ApplyOpts(opts)) {
		s.c.recordApplied(obj)
	}
	return nil
}
