package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SyncAll is a read barrier over several informers: it returns once each
// listed resource's informer in source reflects everything the server had
// committed when SyncAll was called (see FreshInformer.Sync). Every
// informer of a resource syncs (one per namespace, say), all in parallel
// under ctx's one deadline; the cost is one Sync per informer. A resource
// without an informer fails at once with an error matching ErrNoInformer;
// otherwise the errors of the informers that failed are joined.
func SyncAll(ctx context.Context, source InformerSource, resources ...schema.GroupResource) error {
	var infs []*FreshInformer
	for _, gr := range resources {
		of := source.FreshInformersForResource(gr)
		if len(of) == 0 {
			return fmt.Errorf("%w: %s", ErrNoInformer, gr)
		}
		infs = append(infs, of...)
	}
	return syncInformers(ctx, infs)
}

func syncInformers(ctx context.Context, infs []*FreshInformer) error {
	errs := make([]error, len(infs))
	var wg sync.WaitGroup
	for i, inf := range infs {
		wg.Go(func() { errs[i] = inf.Sync(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Sync is a read barrier over the factory's started informers: it returns
// once each of them (or only those of the listed resources) reflects
// everything the server had committed when Sync was called. See SyncAll.
func (f *SharedInformerFactory) Sync(ctx context.Context, resources ...schema.GroupResource) error {
	if len(resources) > 0 {
		return SyncAll(ctx, f, resources...)
	}
	return syncInformers(ctx, f.set.fresh((*FreshInformer).HasStarted))
}

// Sync is a read barrier over the factory's started informers: it returns
// once each of them (or only those of the listed resources) reflects
// everything the server had committed when Sync was called. See SyncAll.
func (f *DynamicSharedInformerFactory) Sync(ctx context.Context, resources ...schema.GroupResource) error {
	if len(resources) > 0 {
		return SyncAll(ctx, f, resources...)
	}
	return syncInformers(ctx, f.set.fresh((*FreshInformer).HasStarted))
}
