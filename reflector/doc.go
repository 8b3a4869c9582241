// Package reflector is freshinformer's layer between the API server's
// list/watch stream and the informer's queue. It sees list resource versions,
// watch events and bookmarks in stream order and keeps the stream from moving
// the cache back in time:
//
//   - List and watch requests that would start below the floor (the highest
//     resource version the stream has delivered or the cache has applied) are
//     raised to it, and lists ask for resourceVersionMatch=NotOlderThan, so a
//     server that honours it never serves older state.
//   - A list (plain or watch-list) that still comes back older than the floor
//     (a lagging replica, a server that ignores resourceVersionMatch) is
//     refused before it reaches the queue: client-go's Reflector backs off and
//     relists. If the server keeps answering older for longer than a bound
//     (etcd restored from a backup), the list is accepted as a declared
//     regression: logged at error level, counted and reported to a callback,
//     never silently.
//
// The checks sit on the Queue's Replace, which both list+watch and
// watch-list go through, so watch events pay nothing for them.
package reflector
