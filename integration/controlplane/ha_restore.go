package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// SnapshotEtcd saves a snapshot of the etcd cluster through one running
// member's maintenance API, as `etcdctl snapshot save` does (with the
// integrity hash RestoreEtcd's etcdutl checks). Writes may go on
// meanwhile: Snapshot.Revision is the cluster's revision just before.
func (h *HAControlPlane) SnapshotEtcd(ctx context.Context) (Snapshot, error) {
	h.mu.Lock()
	h.snapshots++
	path := filepath.Join(h.workDir, fmt.Sprintf("snapshot-%d.db", h.snapshots))
	h.mu.Unlock()
	snap := Snapshot{Path: path}
	err := h.withEtcdMembers(ctx, "snapshot", func(ctx context.Context, cli *clientv3.Client) error {
		rev, err := saveSnapshot(ctx, cli, path)
		snap.Revision = rev
		return err
	})
	return snap, err
}

// EtcdutlPath returns the etcdutl binary next to etcd, or an error that
// says how to build it.
func (h *HAControlPlane) EtcdutlPath() (string, error) {
	p := filepath.Join(h.binDir, etcdutlBinary)
	if st, err := os.Stat(p); err != nil || st.Mode()&0o111 == 0 {
		return "", &Error{Component: ComponentEtcd, Op: "find etcdutl",
			Err: fmt.Errorf("%s is missing or not executable: run `make bins` (it builds etcdutl from integration/tools/etcd)", p)}
	}
	return p, nil
}

// RestoreEtcd restores the whole etcd cluster from snap the way an operator
// does (the Kubernetes docs, "Restoring an etcd cluster": stop every API
// server, restore every etcd member, start the API servers again; etcd's
// disaster-recovery guide for the members):
//
//  1. stop every kube-apiserver (SIGTERM), so that none serves, or writes,
//     across the restore; HAProxy stays up and marks them down;
//  2. stop every member (SIGTERM, one at a time);
//  3. per member, `etcdutl snapshot restore` into a fresh data directory
//     with the cluster's --name, --initial-cluster,
//     --initial-cluster-token and --initial-advertise-peer-urls, and the
//     revision flags of opts (the same on every member);
//  4. start every member (together: the first election needs a quorum)
//     and wait until each is healthy;
//  5. start every kube-apiserver (same ports and certificates: clients
//     keep working through the load balancer) and wait for each one's
//     /readyz, then for the load balancer's.
//
// Each process is stopped and started by itself; if the restore fails
// half-way, Stop still ends whatever runs. The members' old data is
// removed. Stop waits for a restore under way (bounded by ctx).
func (h *HAControlPlane) RestoreEtcd(ctx context.Context, snap Snapshot, opts RestoreOptions) error {
	if opts.MarkCompacted && opts.BumpRevision <= 0 {
		return &Error{Component: ComponentEtcd, Op: "restore", Err: errors.New("MarkCompacted requires BumpRevision")}
	}
	etcdutl, err := h.EtcdutlPath()
	if err != nil {
		return err
	}
	h.restoreMu.Lock()
	defer h.restoreMu.Unlock()
	if err := h.check(ComponentEtcd, 0, len(h.etcd)); err != nil {
		return err
	}

	// 1, 2: nothing serves, nothing writes.
	if err := h.eachAPIServer(func(a *haAPIServer) error { return a.p.stop(h.opts.StopTimeout, false) }); err != nil {
		return fmt.Errorf("controlplane: restore: stopping the kube-apiservers: %w", err)
	}
	for _, m := range h.etcd {
		if err := m.p.stop(h.opts.StopTimeout, false); err != nil {
			return fmt.Errorf("controlplane: restore: %w", err)
		}
	}

	// 3: each member's data from the snapshot. The data directory keeps
	// its path, so each member starts again with the flags it had.
	for _, m := range h.etcd {
		if err := os.RemoveAll(m.dataDir); err != nil {
			return &Error{Component: m.name, Op: "remove data for restore", Err: err}
		}
		out, err := exec.CommandContext(ctx, etcdutl, h.restoreArgs(m, snap, opts)...).CombinedOutput()
		if err != nil {
			return &Error{Component: m.name, Op: "etcdutl snapshot restore", Err: err, Output: string(out)}
		}
	}

	// 4: the restored cluster.
	for _, m := range h.etcd {
		if err := m.p.start(); err != nil {
			return err
		}
	}
	for i := range h.etcd {
		if err := h.waitEtcd(ctx, i); err != nil {
			return err
		}
	}

	// 5: the kube-apiservers on it, then the load balancer's view.
	for _, a := range h.apis {
		if err := a.p.start(); err != nil {
			return err
		}
	}
	errs := make([]error, len(h.apis))
	var wg sync.WaitGroup
	for i := range h.apis {
		wg.Go(func() { errs[i] = h.waitAPIServer(ctx, i) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return waitReadyConfig(ctx, h.cfg, ComponentHAProxy, h.lb.out)
}

// restoreArgs are etcdutl's arguments to restore member m from snap: the
// member's own name, data directory and peer URL, the cluster's member list
// and token (the same flags the member was started with, so that the
// restored members form the same cluster), and opts' revision flags.
func (h *HAControlPlane) restoreArgs(m *etcdMember, snap Snapshot, opts RestoreOptions) []string {
	args := []string{"snapshot", "restore", snap.Path,
		"--name", m.name,
		"--data-dir", m.dataDir,
		"--initial-cluster", h.etcdPeers,
		"--initial-cluster-token", filepath.Base(h.workDir),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", m.peerPort),
	}
	if opts.BumpRevision > 0 {
		args = append(args, "--bump-revision", strconv.FormatInt(opts.BumpRevision, 10))
	}
	if opts.MarkCompacted {
		args = append(args, "--mark-compacted")
	}
	return args
}

// eachAPIServer runs f on every kube-apiserver at once and joins the
// errors.
func (h *HAControlPlane) eachAPIServer(f func(*haAPIServer) error) error {
	errs := make([]error, len(h.apis))
	var wg sync.WaitGroup
	for i, a := range h.apis {
		wg.Go(func() { errs[i] = f(a) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
