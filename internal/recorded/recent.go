package recorded

import (
	"sort"

	"github.com/freshinformer/freshinformer/freshness"
)

// RecentCapacity is how many applied event resource versions an informer
// remembers to recognise its own recorded writes.
const RecentCapacity = 1024

// Recent remembers the resource versions of the last applied events, in
// the order applied (non-decreasing: older events are rejected), so that a
// recorded write below the cache's resource version can be told apart: one
// the stream delivered is fine, one it never delivered may come from a
// server restored to an older revision. Only values that fit in 64 bits are
// kept. Not safe for concurrent use (the informer holds its applyMu).
type Recent struct {
	ring  [RecentCapacity]uint64
	next  int // where the next value goes
	count int
}

// Add remembers rv, forgetting the oldest value once full.
func (r *Recent) Add(rv freshness.RV) {
	n, ok := rv.Uint64()
	if !ok {
		return
	}
	r.ring[r.next] = n
	r.next = (r.next + 1) % RecentCapacity
	if r.count < RecentCapacity {
		r.count++
	}
}

// Reset forgets every value (a list replaced the cache).
func (r *Recent) Reset() { r.next, r.count = 0, 0 }

// Contains reports whether rv was among the remembered values.
func (r *Recent) Contains(rv freshness.RV) bool {
	n, ok := rv.Uint64()
	if !ok || r.count == 0 {
		return false
	}
	first := (r.next - r.count + RecentCapacity) % RecentCapacity
	at := func(i int) uint64 { return r.ring[(first+i)%RecentCapacity] }
	i := sort.Search(r.count, func(i int) bool { return at(i) >= n })
	return i < r.count && at(i) == n
}
