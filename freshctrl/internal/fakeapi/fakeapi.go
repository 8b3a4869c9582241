// Package fakeapi connects package fake to freshctrl's unexported
// machinery without adding test-only API to freshctrl: freshctrl sets the
// hooks in its init, and package fake, which imports freshctrl, calls them.
package fakeapi

import (
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Informer is one informer a fake-backed cache makes: what it caches and
// the scope controller-runtime asked for.
type Informer struct {
	GVK schema.GroupVersionKind
	// Representation is "typed", "unstructured" or "metadata".
	Representation string
	Namespace      string
	Labels         labels.Selector // nil: everything
	Fields         fields.Selector // nil: everything
	// Unknown is set when the scope could not be learned: everything.
	Unknown bool
	// Example is the object controller-runtime made the informer for.
	Example runtime.Object
}

var (
	// SetListerWatchers has cache (a *freshctrl.Cache, before it makes its
	// first informer) list and watch through lw instead of the API server.
	SetListerWatchers func(cache crcache.Cache, lw func(Informer) toolscache.ListerWatcher) error

	// NewClient returns freshctrl's read-your-writes client over inner,
	// which does the reads and writes, waiting on cache (a
	// *freshctrl.Cache); co says which reads bypass the cache (as
	// client.Options.Cache does) and timeout bounds the waits (0: the
	// cache's).
	NewClient func(inner client.Client, cache crcache.Cache, co client.CacheOptions, timeout time.Duration) (client.Client, error)
)
