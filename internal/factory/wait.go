package factory

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ErrNoInformer is matched by the error of a factory-level wait or sync
// for a resource the factory has no started informer for.
var ErrNoInformer = errors.New("no started informer for the resource")

// waitFor waits until the started informer of gvr (informerOf) has
// applied rv.
func waitFor[I Informer](ctx context.Context, gvr schema.GroupVersionResource, rv string, informerOf func(schema.GroupVersionResource) (I, bool)) error {
	inf, ok := informerOf(gvr)
	if !ok {
		return fmt.Errorf("%w: %s", ErrNoInformer, resourceString(gvr.GroupResource()))
	}
	if err := inf.WaitForFreshness(ctx, rv); err != nil {
		return fmt.Errorf("%s: %w", resourceString(gvr.GroupResource()), err)
	}
	return nil
}

// SyncResources is a read barrier over several informers: it returns once
// every informer of each listed resource that informersOf returns (one per
// namespace, say) reflects everything the server had committed when
// SyncResources was called. They sync in parallel under ctx's one
// deadline; the cost is one Sync per informer. A resource without an
// informer fails at once with an error matching ErrNoInformer; otherwise
// the errors of the informers that failed are joined. Package cache's
// SyncAll is this over an InformerSource.
func SyncResources[I Informer](ctx context.Context, informersOf func(schema.GroupResource) []I, resources ...schema.GroupResource) error {
	var infs []I
	for _, gr := range resources {
		of := informersOf(gr)
		if len(of) == 0 {
			return fmt.Errorf("%w: %s", ErrNoInformer, gr)
		}
		infs = append(infs, of...)
	}
	return syncInformers(ctx, infs)
}

// syncInformers syncs infs in parallel and joins the errors of those that
// failed.
func syncInformers[I Informer](ctx context.Context, infs []I) error {
	errs := make([]error, len(infs))
	var wg sync.WaitGroup
	for i, inf := range infs {
		wg.Go(func() { errs[i] = inf.Sync(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// resourceString prints a resource as users write it: "secrets",
// "deployments.apps".
func resourceString(gr schema.GroupResource) string {
	if gr.Empty() {
		return "<unnamed resource>"
	}
	return gr.String()
}
