// Package freshness is the comparison core and the freshness tracker of
// freshinformer. It knows nothing of client-go: it orders resource versions
// (RVs) as KEP-5504 defines them and lets callers wait until a logical clock
// of RVs has reached a target.
//
// Since Kubernetes 1.35, resource versions of the same resource are decimal
// integers without leading zeros that clients may order (KEP-5504). Compare
// implements that order exactly; ParseRV turns a string into an RV, a parsed
// form that compares in one or two machine instructions on hot paths; Tracker
// holds the highest RV a cache has applied and wakes waiters when it moves.
//
// Servers that do not follow KEP-5504 (some aggregated API servers) serve
// values that are not integers. Every function here reports those with an
// error that matches ErrIncomparable; nothing hangs and nothing claims an
// order it cannot know.
package freshness
