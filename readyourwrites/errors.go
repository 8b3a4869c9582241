package readyourwrites

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/internal/resources"
)

// ErrNotFresh is matched by CheckFresh's error when a cache is behind.
var ErrNotFresh = errors.New("cache is not yet fresh for the owner's writes")

// ErrNotWatched is matched by Record's error for a written object that no
// informer of its resource will ever see (outside their namespaces or
// selectors): waiting for it would only time out. It is
// cache.ErrNotWatched, which the informers' Admits returns.
var ErrNotWatched = cache.ErrNotWatched

// NotFreshError says which resource's cache is behind an owner's write.
type NotFreshError struct {
	Owner    Owner
	Resource schema.GroupResource
	// Scope is the lagging informer's (several informers may cache one
	// resource: one per namespace, say).
	Scope cache.Selector
	// Informer is the lagging informer: wait on it (AfterFreshness,
	// WaitForFreshness) for Written.
	Informer *cache.FreshInformer
	// Written is the resource version of the newest write ("" for a
	// delete), Observed the informer's.
	Written, Observed string
	// Deleted names the deleted object still cached, for a delete.
	Deleted types.NamespacedName
}

// Error says which cache is behind which write, and on whose behalf.
func (e *NotFreshError) Error() string {
	if e.Deleted.Name != "" {
		return fmt.Sprintf("%s cache (%s) still holds %s, deleted on behalf of %s", resources.String(e.Resource), e.Scope, e.Deleted, e.Owner)
	}
	return fmt.Sprintf("%s cache (%s) is at %s, behind %s written on behalf of %s", resources.String(e.Resource), e.Scope, e.Observed, e.Written, e.Owner)
}

// Is reports whether target is ErrNotFresh.
func (e *NotFreshError) Is(target error) bool { return target == ErrNotFresh }
