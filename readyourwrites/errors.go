package readyourwrites

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/resources"
)

// NotFreshError says which informer's cache is behind which write: the one
// error of a read-your-writes check or wait that found a cache behind
// (CheckFresh here; freshctrl's reads, with FailIfNotFresh or after their
// timeout). It matches freshness.ErrNotFresh, and unwraps to the wait's
// error (a *freshness.WaitError wrapping context.DeadlineExceeded on a
// timeout) when there was a wait.
type NotFreshError struct {
	// Owner is the owner whose writes were checked (zero when the read
	// waited for writes of no owner: freshctrl's informers made by a
	// NewInformer hook).
	Owner Owner
	// Resource and Scope are the lagging informer's (several informers may
	// cache one resource: one per namespace, say).
	Resource schema.GroupResource
	Scope    cache.Selector
	// Name is the informer's name, when it has one (freshctrl names its
	// informers after their scope).
	Name string
	// Informer is the lagging informer: wait on it (AfterFreshness,
	// WaitForFreshness) for Written. It is nil when the informer is not a
	// FreshInformer.
	Informer *cache.FreshInformer
	// Key is the object written or deleted, when one is known (a List
	// waiting for several writes names none).
	Key types.NamespacedName
	// Written is the resource version the read needs ("" for a delete),
	// Observed the one the informer had reached.
	Written, Observed string
	// Deleted is set when the cache still holds Key, which was deleted.
	Deleted bool
	// Waited is how long the read waited (0 for a check).
	Waited time.Duration
	// Err is the wait's error; nil for a check.
	Err error
}

// Error says which cache is behind which write, on whose behalf, and how
// long the read waited.
func (e *NotFreshError) Error() string {
	var b strings.Builder
	scope := e.Name
	if scope == "" {
		scope = e.Scope.String()
	}
	fmt.Fprintf(&b, "%s cache (%s) ", resources.String(e.Resource), scope)
	switch {
	case e.Deleted:
		fmt.Fprintf(&b, "at resource version %s still holds %s, deleted", e.Observed, e.Key)
	case e.Key.Name != "":
		fmt.Fprintf(&b, "is at %s, behind %s written to %s", e.Observed, e.Written, e.Key)
	default:
		fmt.Fprintf(&b, "is at %s, behind %s written", e.Observed, e.Written)
	}
	if e.Owner != (Owner{}) {
		fmt.Fprintf(&b, " on behalf of %s", e.Owner)
	}
	if e.Waited > 0 {
		fmt.Fprintf(&b, ", after waiting %v", e.Waited.Round(time.Millisecond))
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// Unwrap returns the wait's error.
func (e *NotFreshError) Unwrap() error { return e.Err }

// Is reports whether target is freshness.ErrNotFresh.
func (e *NotFreshError) Is(target error) bool { return target == freshness.ErrNotFresh }
