package cache

import "time"

// The snapshot route of the quiet-resource probe: how it proves freshness
// is told in the package documentation (doc.go, "Quiet resources").

// DefaultSnapshotProbeLimit is the largest informer, in cached objects,
// that the quiet-resource probe and Sync prove fresh from a snapshot: one
// consistent list of the informer's objects, compared key by key with the
// cache. Above it, listing costs more than waiting for the auxiliary
// watch's bookmark (docs/benchmarks.md, "Quiet resources", has the curve).
const DefaultSnapshotProbeLimit = 1000

// DefaultSnapshotProbeDelay is how long pending waits see no progress
// before an informer small enough for the snapshot route probes. The
// stream delivers a write within about a millisecond on a healthy
// apiserver; the snapshot route answers in one round trip, so waiting
// longer than a few stream latencies before it only adds to every quiet
// wait.
const DefaultSnapshotProbeDelay = 20 * time.Millisecond

// WithSnapshotProbeLimit sets the largest informer, in cached objects, that
// probes and Sync prove fresh from a snapshot (DefaultSnapshotProbeLimit
// when zero): a consistent list of the informer's objects (its namespace
// and selectors, at most n+1 of them) that, when it holds exactly the
// cached keys at the cached resource versions, shows that the cache already
// holds the state at the list's resource version. A negative n turns the
// snapshot route off: probes then always use the auxiliary watch's
// bookmark (about a second), or a relist where the resource gets no
// bookmarks.
func WithSnapshotProbeLimit(n int) Option {
	return func(o *Options) { o.SnapshotProbeLimit = n }
}
