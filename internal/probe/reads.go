package probe

import (
	"sync"
	"time"

	"github.com/freshinformer/freshinformer/freshness"
)

// MaxSamples bounds the staleness samples Reads keeps.
const MaxSamples = 64

// Reads keeps what consistent reads (and recorded writes) told of the
// server: the newest resource version a read answered, for a probe to
// reuse, and (time, resource version) samples, each saying "at this time
// the server had committed nothing newer than this", from which Staleness
// bounds how old the cache's view is. The zero Reads is ready for use.
type Reads struct {
	mu       sync.Mutex // guards the fields below; a leaf
	newest   freshness.RV
	newestAt time.Time // when its answer came, on the real clock (reuse is about the server's pace)
	// samples have times and resource versions both increasing; covered
	// is the newest sample time the cache has reached.
	samples    []sample
	coveredAt  time.Time
	hasCovered bool
}

type sample struct {
	at time.Time
	rv freshness.RV
}

// Record records rv, from a consistent read sent at sent, as the server's
// newest known resource version and as a sample.
func (r *Reads) Record(sent time.Time, rv freshness.RV) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rv.Compare(r.newest) >= 0 {
		r.newest, r.newestAt = rv, time.Now()
	}
	r.sampleLocked(sent, rv)
}

// Newest returns the newest resource version a read answered, and how long
// ago its answer came.
func (r *Reads) Newest() (freshness.RV, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.newest, time.Since(r.newestAt)
}

// Sample records that at time at the server had committed nothing newer
// than rv.
func (r *Reads) Sample(at time.Time, rv freshness.RV) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sampleLocked(at, rv)
}

func (r *Reads) sampleLocked(at time.Time, rv freshness.RV) {
	// A later sample with a resource version no newer than an earlier
	// one's makes that one useless (reaching the earlier implies reaching
	// the later).
	for n := len(r.samples); n > 0 && r.samples[n-1].rv.Compare(rv) >= 0 && !r.samples[n-1].at.After(at); n-- {
		r.samples = r.samples[:n-1]
	}
	if n := len(r.samples); n > 0 && r.samples[n-1].at.After(at) {
		return // recorded late (a slow request): dropping it only makes the bound larger
	}
	if len(r.samples) >= MaxSamples {
		// Thin out every other sample: dropping one only makes the bound
		// larger (a later, older-covering sample takes its place).
		kept := r.samples[:0]
		for i, s := range r.samples {
			if i%2 == 1 {
				kept = append(kept, s)
			}
		}
		r.samples = kept
	}
	r.samples = append(r.samples, sample{at: at, rv: rv})
}

// Samples counts the samples kept.
func (r *Reads) Samples() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.samples)
}

// Staleness bounds how old the cache's view is at now: now minus the
// newest sample time whose resource version the cache has applied (cover
// is applied while the cache is trusted; zero otherwise). ok is false
// until the cache has reached a sample.
func (r *Reads) Staleness(cover freshness.RV, now time.Time) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !cover.IsZero() {
		i := 0
		for ; i < len(r.samples) && cover.AtLeast(r.samples[i].rv); i++ {
			if !r.hasCovered || r.samples[i].at.After(r.coveredAt) {
				r.coveredAt, r.hasCovered = r.samples[i].at, true
			}
		}
		r.samples = append(r.samples[:0], r.samples[i:]...)
	}
	if !r.hasCovered {
		return 0, false
	}
	return max(now.Sub(r.coveredAt), 0), true
}
