package probe

import (
	"sync/atomic"
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
//
// It takes no lock: its state is an immutable record, replaced whole by a
// compare-and-swap that is retried if another call replaced it first, so
// every change is made to the newest record.
type Reads struct {
	state atomic.Pointer[readsState]
}

// readsState is one immutable record of what Reads knows.
type readsState struct {
	newest   freshness.RV
	newestAt time.Time // when its answer came, on the real clock (reuse is about the server's pace)
	// top is the newest sample; samples have times and resource versions
	// both increasing. A change adds a node or picks another top, and
	// never writes to a node, so records share their older samples.
	top *sampleNode
	// coveredAt is the newest sample time the cache has reached.
	coveredAt  time.Time
	hasCovered bool
}

type sample struct {
	at time.Time
	rv freshness.RV
}

// sampleNode is a sample and the samples before it.
type sampleNode struct {
	sample
	prev *sampleNode
	n    int // the samples up to this one
}

// update replaces r's record with change's copy of it, again on the newest
// record if another call replaced it meanwhile. change must not write to
// the record it is given, only return a new one (or it, for no change).
func (r *Reads) update(change func(old *readsState) *readsState) {
	for {
		old := r.state.Load()
		next := change(old)
		if next == old || r.state.CompareAndSwap(old, next) {
			return
		}
	}
}

// load returns the current record; the zero record if none.
func (r *Reads) load() *readsState {
	if s := r.state.Load(); s != nil {
		return s
	}
	return &readsState{}
}

// Record records rv, from a consistent read sent at sent, as the server's
// newest known resource version and as a sample.
func (r *Reads) Record(sent time.Time, rv freshness.RV) {
	now := time.Now()
	r.update(func(old *readsState) *readsState {
		next := copyState(old)
		if rv.Compare(next.newest) >= 0 {
			next.newest, next.newestAt = rv, now
		}
		next.top = withSample(next.top, sent, rv)
		return next
	})
}

// Newest returns the newest resource version a read answered, and how long
// ago its answer came.
func (r *Reads) Newest() (freshness.RV, time.Duration) {
	s := r.load()
	return s.newest, time.Since(s.newestAt)
}

// Sample records that at time at the server had committed nothing newer
// than rv.
func (r *Reads) Sample(at time.Time, rv freshness.RV) {
	r.update(func(old *readsState) *readsState {
		next := copyState(old)
		next.top = withSample(next.top, at, rv)
		return next
	})
}

func copyState(s *readsState) *readsState {
	if s == nil {
		return &readsState{}
	}
	c := *s
	return &c
}

// withSample returns the samples top with (at, rv) added.
func withSample(top *sampleNode, at time.Time, rv freshness.RV) *sampleNode {
	// A later sample with a resource version no newer than an earlier
	// one's makes that one useless (reaching the earlier implies reaching
	// the later).
	for top != nil && top.rv.Compare(rv) >= 0 && !top.at.After(at) {
		top = top.prev
	}
	if top != nil && top.at.After(at) {
		return top // recorded late (a slow request): dropping it only makes the bound larger
	}
	if top != nil && top.n >= MaxSamples {
		// Thin out every other sample: dropping one only makes the bound
		// larger (a later, older-covering sample takes its place).
		all := samplesOf(top)
		var kept []sample
		for i, s := range all {
			if i%2 == 1 {
				kept = append(kept, s)
			}
		}
		top = stackOf(kept)
	}
	return push(top, sample{at: at, rv: rv})
}

func push(top *sampleNode, s sample) *sampleNode {
	n := 1
	if top != nil {
		n = top.n + 1
	}
	return &sampleNode{sample: s, prev: top, n: n}
}

// samplesOf returns top's samples, oldest first.
func samplesOf(top *sampleNode) []sample {
	if top == nil {
		return nil
	}
	out := make([]sample, top.n)
	for i, n := top.n-1, top; n != nil; i, n = i-1, n.prev {
		out[i] = n.sample
	}
	return out
}

// stackOf returns samples, oldest first, as new nodes.
func stackOf(samples []sample) *sampleNode {
	var top *sampleNode
	for _, s := range samples {
		top = push(top, s)
	}
	return top
}

// Samples counts the samples kept.
func (r *Reads) Samples() int {
	if top := r.load().top; top != nil {
		return top.n
	}
	return 0
}

// Staleness bounds how old the cache's view is at now: now minus the
// newest sample time whose resource version the cache has applied (cover
// is applied while the cache is trusted; zero otherwise). ok is false
// until the cache has reached a sample.
func (r *Reads) Staleness(cover freshness.RV, now time.Time) (time.Duration, bool) {
	var s *readsState
	r.update(func(old *readsState) *readsState {
		s = old
		if cover.IsZero() || old == nil || old.top == nil {
			return old
		}
		all := samplesOf(old.top)
		i := 0
		for i < len(all) && cover.AtLeast(all[i].rv) {
			i++
		}
		if i == 0 {
			return old
		}
		next := copyState(old)
		// Samples have increasing times: the last covered is the newest.
		if !next.hasCovered || all[i-1].at.After(next.coveredAt) {
			next.coveredAt, next.hasCovered = all[i-1].at, true
		}
		next.top = stackOf(all[i:])
		s = next
		return next
	})
	if s == nil || !s.hasCovered {
		return 0, false
	}
	return max(now.Sub(s.coveredAt), 0), true
}
