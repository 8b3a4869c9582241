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
	tv := f.trust.View()
	cur, state := tv.Applied, tv.State
	now := f.clock.Now()
	p := &f.quiet
	p.mu.Lock()
	defer p.mu.Unlock()
	if state == trust.Trusted {
		f.coverLocked(cur)
	}
	if !p.hasCovered {
		return 0, false
	}
	return max(now.Sub(p.coveredAt), 0), true
}

// addStalenessSample records that at time at the server had committed
// nothing newer than rv.
func (f *FreshInformer) addStalenessSample(at time.Time, rv freshness.RV) {
	p := &f.quiet
	p.mu.Lock()
	defer p.mu.Unlock()
	// Keep times and resource versions both increasing: a later sample
	// with a resource version no newer than an earlier one's makes that
	// one useless (reaching the earlier implies reaching the later).
	for n := len(p.samples); n > 0 && p.samples[n-1].rv.Compare(rv) >= 0 && !p.samples[n-1].at.After(at); n-- {
		p.samples = p.samples[:n-1]
	}
	if n := len(p.samples); n > 0 && p.samples[n-1].at.After(at) {
		// Recorded late (a slow request): dropping a sample only makes
		// the bound larger, never smaller.
		return
	}
	if len(p.samples) >= maxStalenessSamples {
		// Thin out every other sample: dropping one only makes the
		// bound larger (a later, older-covering sample takes its place).
		kept := p.samples[:0]
		for i, s := range p.samples {
			if i%2 == 1 {
				kept = append(kept, s)
			}
		}
		p.samples = kept
	}
	p.samples = append(p.samples, stalenessSample{at: at, rv: rv})
}

// coverLocked moves the samples the cache has reached into coveredAt.
// f.quiet.mu is held.
func (f *FreshInformer) coverLocked(cur freshness.RV) {
	p := &f.quiet
	if cur.IsZero() {
		return
	}
	i := 0
	for ; i < len(p.samples) && cur.AtLeast(p.samples[i].rv); i++ {
		if !p.hasCovered || p.samples[i].at.After(p.coveredAt) {
			p.coveredAt, p.hasCovered = p.samples[i].at, true
		}
	}
	if i > 0 {
		p.samples = append(p.samples[:0], p.samples[i:]...)
	}
}
