package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/freshinformer/freshinformer/integration/controlplane"
)

// ControlEnv names the environment variable that gives the command the
// control socket (withcluster -control): a unix socket on which the
// command asks withcluster to snapshot and restore etcd, which only the
// process owning the control plane can do.
//
//	POST /snapshot                   {"id": 1, "revision": 1234}
//	POST /restore?snapshot=1&bump=N  {"seconds": 3.2} once the kube-apiserver is ready again
//
// A restore is etcdutl's, as an operator runs it (controlplane.RestoreEtcd):
// the kube-apiserver is stopped meanwhile; bump N > 0 adds
// --bump-revision N --mark-compacted.
const ControlEnv = "WITHCLUSTER_CONTROL"

// control serves the control socket for cp.
type control struct {
	cp    *controlplane.ControlPlane
	mu    sync.Mutex // guards snaps
	snaps []controlplane.Snapshot
}

// serveControl listens on path and serves until the listener is closed.
func serveControl(cp *controlplane.ControlPlane, path string) (stop func(), err error) {
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	c := &control{cp: cp}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /snapshot", c.snapshot)
	mux.HandleFunc("POST /restore", c.restore)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return func() { _ = srv.Close() }, nil
}

func (c *control) snapshot(w http.ResponseWriter, r *http.Request) {
	snap, err := c.cp.SnapshotEtcd(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	c.mu.Lock()
	c.snaps = append(c.snaps, snap)
	id := len(c.snaps)
	c.mu.Unlock()
	logf("control: etcd snapshot %d at revision %d", id, snap.Revision)
	writeJSON(w, map[string]any{"id": id, "revision": snap.Revision})
}

func (c *control) restore(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.Atoi(r.URL.Query().Get("snapshot"))
	bump, berr := strconv.ParseInt(r.URL.Query().Get("bump"), 10, 64)
	c.mu.Lock()
	ok := err == nil && berr == nil && id >= 1 && id <= len(c.snaps) && bump >= 0
	var snap controlplane.Snapshot
	if ok {
		snap = c.snaps[id-1]
	}
	c.mu.Unlock()
	if !ok {
		http.Error(w, fmt.Sprintf("want ?snapshot=<id from /snapshot>&bump=<revisions, 0 for none>, got %q", r.URL.RawQuery), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
	defer cancel()
	t := time.Now()
	if err := c.cp.RestoreEtcd(ctx, snap, controlplane.RestoreOptions{BumpRevision: bump, MarkCompacted: bump > 0}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	logf("control: etcd restored from snapshot %d (bump %d) in %v", id, bump, time.Since(t).Round(time.Millisecond))
	writeJSON(w, map[string]any{"seconds": time.Since(t).Seconds()})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
