package cache

import (
	"time"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/trust"
)

// Staleness returns an upper bound on how old the cache's view is: the
// time since the newest moment at which the cache is known to have held
// everything the server had committed. ok is false until the informer has
// such a moment.
//
// It is computed from (time, resource version) samples, each saying "at
// this time the server had committed nothing newer than this resource
// version": the consistent lists of Sync, of freshness probes and of
// ServerResourceVersion (timed when the request was sent, so the bound is
// strict), and RecordWrite (timed when the write's response was recorded,
// so the bound may undershoot by that write's response latency, a
// millisecond or so). Once the cache has applied a sample's resource
// version, the cache's view is at most now minus that sample's time old.
//
// The bound is exact (it equals how long the cache has missed a committed
// change, to within the spacing of samples) while samples keep coming, for
// example with a lag probe (metrics.WithLagProbe) or regular Sync calls.
// Without new samples it only grows: on a quiet informer with no writes,
// waits or probes it says how long it has been since anything was known,
// not that the cache is behind.
func (f *FreshInformer) Staleness() (time.Duration, bool) {
	var cover freshness.RV
	if v := f.trust.View(); v.State == trust.Trusted {
		cover = v.Applied
	}
	return f.prover.Staleness(cover)
}
