// Package apimodel is a model of a kube-apiserver for one resource
// (ConfigMaps in one namespace), for tests that drive client-go's Reflector
// through faults. It is test support, not part of the library's API.
//
// The model keeps what the real server keeps: one global revision (etcd's),
// an event history with a compaction point, and one watch cache per
// apiserver replica; WriteElsewhere commits a revision on another resource
// of the same etcd (no event, no object: lists and bookmarks may carry it).
// It serves lists, watches and watch-lists through a
// ListerWatcher with the resource-version semantics of the Kubernetes API
// Concepts document:
//
//   - list: resourceVersion unset is Most Recent (a quorum read at the
//     current revision, paginated with limit/continue); "0" is Any (the
//     replica's watch cache, limit ignored); a number with
//     resourceVersionMatch unset or NotOlderThan is Not older than (the
//     watch cache, once it has reached that revision, or 504 "Too large
//     resource version" after a short wait); Exact and a number with a limit
//     are served from the history at that revision, or 410 Gone below the
//     compaction point. Continue tokens keep the first page's revision and
//     expire (410) with compaction. Invalid combinations are 400.
//   - watch: a number starts at Exact (events after it; 410 Gone below the
//     compaction point; above the current revision, as after a restore
//     without a bumped revision, the stream starts and stays silent until
//     the server passes that revision, as kube-apiserver's watch cache
//     does); unset or "0" gets state first, as
//     synthetic ADDED events. sendInitialEvents=true (a watch-list) sends
//     the state at a revision not older than the one asked for as ADDED
//     events in key order, then a BOOKMARK annotated
//     k8s.io/initial-events-end, then the events after it. Bookmarks carry
//     only a resourceVersion, never older than what the stream has sent.
//
// Faults are what a real server, proxy or network produces: streams that
// close or end with 410 Gone, 410 at watch start, compaction, transient
// errors (500, 429, 503, connection refused), lagging replicas, an etcd
// restore from a snapshot (with or without --bump-revision, as the
// Kubernetes docs describe), and a caching proxy that serves a recorded
// stale list for a while. A second group models a misbehaving server (an
// aggregated API server or a buggy proxy): duplicated and replayed older
// events, older bookmarks, far-future (40-digit) bookmarks and non-numeric
// resource versions on single objects. Every object carries, in
// annotations, the true revision and a write id that is unique across
// restores, so a test can judge a cache even when the served resource
// version was mangled.
package apimodel
