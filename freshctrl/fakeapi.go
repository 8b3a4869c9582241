package freshctrl

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/freshinformer/freshinformer/freshctrl/internal/fakeapi"
)

// Package fake builds its caches and clients with freshctrl's own code
// through these hooks, so what a unit test runs is what a manager runs.
func init() {
	fakeapi.SetListerWatchers = setListerWatchers
	fakeapi.NewClient = newFakeBackedClient
}

func setListerWatchers(c crcache.Cache, lw func(fakeapi.Informer) toolscache.ListerWatcher) error {
	fc, ok := c.(*Cache)
	if !ok {
		return fmt.Errorf("freshctrl: %T is not freshctrl's cache", c)
	}
	r := fc.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.informers) > 0 {
		return errors.New("freshctrl: the cache has made informers already")
	}
	r.lwFor = func(e *informerEntry, obj runtime.Object) toolscache.ListerWatcher {
		return lw(fakeapi.Informer{
			GVK:            e.GroupVersionKind,
			Representation: string(e.Representation),
			Namespace:      e.Scope.Namespace,
			Labels:         e.Scope.Labels,
			Fields:         e.Scope.Fields,
			Unknown:        e.Scope.Unknown,
			Example:        obj,
		})
	}
	return nil
}

func newFakeBackedClient(inner client.Client, c crcache.Cache, co client.CacheOptions, timeout time.Duration) (client.Client, error) {
	fc, ok := c.(*Cache)
	if !ok {
		return nil, fmt.Errorf("freshctrl: %T is not freshctrl's cache", c)
	}
	return newFreshClient(inner, fc, co, timeout)
}

// listerWatcherFor returns what replaces controller-runtime's
// ListerWatchers (package fake's server), or nil.
func (r *registry) listerWatcherFor() func(*informerEntry, runtime.Object) toolscache.ListerWatcher {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.lwFor
}
