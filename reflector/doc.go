// Package reflector describes freshinformer's layer between the API
// server's list/watch stream and the informer's queue, and holds what users
// read of it: the errors of refused lists (ErrStaleList, StaleListError),
// declared regressions (Regression and its reasons), the
// layer's counters (Stats, part of cache.Stats) and the plausibility bound
// (Plausible). The layer itself, the guard the informer wraps its
// ListerWatcher and queue with, is internal (internal/guard): only the
// informer drives it. It sees list resource versions, watch events and
// bookmarks in stream order and keeps the stream from moving the cache back
// in time:
//
//   - The floor is the highest resource version the queue has delivered, or
//     that the informer's quiet-resource probe proved its stream holds
//     nothing below. A replayed older event or bookmark never lowers it;
//     only a declared regression does.
//   - List and watch requests that would start below the floor are raised to
//     it, and lists ask for resourceVersionMatch=NotOlderThan, so a server
//     that honours it never serves older state.
//   - A list (plain or watch-list) that still comes back older than the floor
//     (a lagging replica, a server that ignores resourceVersionMatch) is
//     refused before it reaches the queue: client-go's Reflector backs off and
//     relists. A refused watch-list's watch is stopped (client-go would leave
//     it open) and the refusal counts once with client-go's fallback list.
//   - A consistent list (resourceVersion "") older than the floor proves the
//     server's history went back (etcd restored without --bump-revision): it
//     is accepted at once as a declared regression. Other older lists are
//     accepted as declared regressions once the server has answered older
//     for longer than AcceptRegressionAfter.
//   - While the stream's lists are comparable, a watch event whose resource
//     version is malformed is counted and applied, its resource version not
//     counting toward freshness; a bookmark with a malformed one, and an
//     event or bookmark implausibly far ahead (Plausible), is counted and
//     skipped. An event with no resource version at all (no API server
//     sends one; client-go's fake clientsets do), or a list whose resource
//     version is not comparable, makes the Guard stand aside (plain
//     informer) until a comparable list comes.
//
// Declared regressions go through one path, the guard's DeclareRegression:
// an error-level log, Stats.Regressions, and the informer's OnRegression
// callback (cache.WithRegressionHandler).
//
// The list checks sit on the Queue's Replace, which both list+watch and
// watch-list go through; watch events pay one resource version parse and
// comparison.
package reflector
