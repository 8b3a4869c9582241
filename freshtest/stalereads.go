package freshtest

import (
	"sync"
	"testing"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/stalereads"
)

// FailOnStaleReads returns an informer option that turns the stale-read
// detector on and fails t with each report (the read, this process's
// write it missed, and the reading stack): a controller's test fails when
// a reconcile reads older state than it wrote. Pass it to the informers,
// or to a factory with cache.WithInformerOptions. Reports after t ends are
// dropped.
func FailOnStaleReads(t testing.TB) cache.Option {
	var mu sync.Mutex
	ended := false
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		ended = true
	})
	return cache.WithStaleReadDetection(func(r stalereads.Report) {
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			t.Errorf("freshtest: %s", r)
		}
	})
}
