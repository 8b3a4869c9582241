package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// etcdutlBinary is etcd's offline tool, built next to etcd by
// integration/hack/build-bins.sh --etcdutl (make bins) from etcd's module,
// integration/tools/etcd.
const etcdutlBinary = "etcdutl"

// KillAPIServer ends the kube-apiserver with SIGKILL (kill -9): no graceful
// shutdown, in-flight requests and watches are cut mid-stream, and a write
// may be committed to etcd without its client learning so. etcd keeps
// running; StartAPIServer brings the apiserver back on the same port.
func (c *ControlPlane) KillAPIServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return ErrStopped
	}
	if !c.apiUp {
		return nil
	}
	pid := c.children.pid(ComponentAPIServer)
	if pid <= 0 {
		return &Error{Component: ComponentAPIServer, Op: "kill", Err: errors.New("process id unknown (only found on Linux)")}
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return &Error{Component: ComponentAPIServer, Op: "kill", Err: err}
	}
	c.apiUp = false
	// envtest's own goroutine reaps the process; wait for that, so that
	// its Stop (which clears its state for the next Start) finds the
	// process gone instead of signalling a finished one.
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(pid, 0) == nil && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	err := c.cp.APIServer.Stop()
	c.children.forget(ComponentAPIServer)
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return &Error{Component: ComponentAPIServer, Op: "reap after kill", Err: err}
	}
	return nil
}

// Snapshot is an etcd snapshot file written by SnapshotEtcd.
type Snapshot struct {
	// Path is the snapshot file (inside the control plane's work directory,
	// removed by Stop).
	Path string
	// Revision is etcd's revision just before the snapshot was taken; the
	// snapshot holds at least this revision (exactly it when nothing wrote
	// meanwhile).
	Revision int64
}

// SnapshotEtcd saves an etcd snapshot through etcd's maintenance API, as
// `etcdctl snapshot save` does (with its integrity hash, which
// RestoreEtcd's etcdutl checks).
func (c *ControlPlane) SnapshotEtcd(ctx context.Context) (Snapshot, error) {
	c.mu.Lock()
	c.restores++
	path := filepath.Join(c.workDir, fmt.Sprintf("snapshot-%d.db", c.restores))
	c.mu.Unlock()
	snap := Snapshot{Path: path}
	err := c.withEtcd(ctx, "snapshot", func(ctx context.Context, cli *clientv3.Client) error {
		rev, err := saveSnapshot(ctx, cli, path)
		snap.Revision = rev
		return err
	})
	return snap, err
}

// RestoreOptions are etcdutl's revision flags for RestoreEtcd.
type RestoreOptions struct {
	// BumpRevision, if positive, is `--bump-revision`: the restored store's
	// revision is the snapshot's plus this, so that revisions (resource
	// versions) keep growing across the restore, as the Kubernetes docs
	// recommend. Zero restores the snapshot's revision as is: revisions go
	// back to it, and new writes reuse revisions clients have seen.
	BumpRevision int64
	// MarkCompacted is `--mark-compacted`: every revision before the
	// bumped one counts as compacted, so watches from resource versions
	// seen before the restore fail with 410 Gone instead of silently
	// missing events. etcdutl 3.6 requires it with BumpRevision (and
	// refuses it without).
	MarkCompacted bool
}

// RestoreEtcd restores etcd from snap the way an operator does: stop the
// kube-apiserver, stop etcd, `etcdutl snapshot restore` into a new data
// directory, start etcd on it (same client URL), start the kube-apiserver
// (same port and certificates, so existing clients keep working) and wait
// for readiness. Replicas started by StartAPIServerReplica are not touched:
// stop them first if they must not serve across the restore.
func (c *ControlPlane) RestoreEtcd(ctx context.Context, snap Snapshot, opts RestoreOptions) error {
	if opts.MarkCompacted && opts.BumpRevision <= 0 {
		return &Error{Component: ComponentEtcd, Op: "restore", Err: errors.New("MarkCompacted requires BumpRevision")}
	}
	etcdutl, err := c.EtcdutlPath()
	if err != nil {
		return err
	}
	if err := c.StopAPIServer(); err != nil {
		return err
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return ErrStopped
	}
	etcd := c.cp.Etcd
	oldDir := etcd.DataDir
	if err := etcd.Stop(); err != nil {
		return &Error{Component: ComponentEtcd, Op: "stop for restore", Err: err, Output: c.etcdOut.String()}
	}
	c.children.forget(ComponentEtcd)

	c.restores++
	dataDir := filepath.Join(c.workDir, fmt.Sprintf("etcd-restored-%d", c.restores))
	args := []string{"snapshot", "restore", snap.Path, "--data-dir", dataDir}
	if opts.BumpRevision > 0 {
		args = append(args, "--bump-revision", strconv.FormatInt(opts.BumpRevision, 10))
	}
	if opts.MarkCompacted {
		args = append(args, "--mark-compacted")
	}
	cmd := exec.CommandContext(ctx, etcdutl, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return &Error{Component: ComponentEtcd, Op: "etcdutl snapshot restore", Err: err, Output: string(out)}
	}
	if oldDir != "" && oldDir != dataDir {
		_ = os.RemoveAll(oldDir)
	}

	etcd.DataDir = dataDir
	etcd.StartTimeout = processBudget(ctx)
	before := c.children.running(etcd.Path)
	if err := etcd.Start(); err != nil {
		_ = etcd.Stop()
		return &Error{Component: ComponentEtcd, Op: "start after restore", Err: err, Output: c.etcdOut.String()}
	}
	c.children.record(ComponentEtcd, etcd.Path, before)

	return c.startAPIServerLocked(ctx, "start after restore")
}

// EtcdutlPath returns the etcdutl binary next to etcd, or an error that
// says how to build it.
func (c *ControlPlane) EtcdutlPath() (string, error) {
	p := filepath.Join(c.binDir, etcdutlBinary)
	if st, err := os.Stat(p); err != nil || st.Mode()&0o111 == 0 {
		return "", &Error{Component: ComponentEtcd, Op: "find etcdutl",
			Err: fmt.Errorf("%s is missing or not executable: run `make bins` (it builds etcdutl from integration/tools/etcd)", p)}
	}
	return p, nil
}

// Replica is a second kube-apiserver on the control plane's etcd, as in a
// highly available cluster: each has its own watch cache, so one can lag
// behind the other. Its methods are safe for concurrent use.
type Replica struct {
	name string
	api  *envtest.APIServer
	cfg  *rest.Config
	cp   *ControlPlane
	out  *tailBuffer
}

// StartAPIServerReplica starts another kube-apiserver (same flags, its own
// port and certificates) on the control plane's etcd and waits for
// readiness. Stop, or the control plane's Stop, ends it.
func (c *ControlPlane) StartAPIServerReplica(ctx context.Context) (*Replica, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil, ErrStopped
	}
	c.restores++
	name := fmt.Sprintf("%s-replica-%d", ComponentAPIServer, c.restores)
	certDir := filepath.Join(c.workDir, name)
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	r := &Replica{name: name, cp: c, out: newTailBuffer(16 << 10)}
	r.api = &envtest.APIServer{
		Path:         filepath.Join(c.binDir, apiServerBinary),
		CertDir:      certDir,
		EtcdURL:      c.cp.Etcd.URL,
		StartTimeout: processBudget(ctx),
		StopTimeout:  c.opts.StopTimeout,
		Out:          c.writer(r.out),
		Err:          c.writer(r.out),
	}
	configureAPIServer(r.api.Configure(), c.opts)
	before := c.children.running(r.api.Path)
	if err := r.api.Start(); err != nil {
		_ = r.api.Stop()
		return nil, &Error{Component: name, Op: "start", Err: err, Output: r.out.String()}
	}
	c.children.record(name, r.api.Path, before)
	c.replicas = append(c.replicas, r)
	cfg, err := r.api.SecureServing.AddUser(envtest.User{Name: "freshinformer-admin", Groups: []string{"system:masters"}},
		&rest.Config{QPS: 1000, Burst: 2000})
	if err != nil {
		return nil, &Error{Component: name, Op: "provision admin user", Err: err}
	}
	// As envtest's AuthenticatedUser.Config does for the primary.
	cfg.Host = r.api.SecureServing.URL("https", "/").String()
	cfg.CAData = r.api.SecureServing.CA
	r.cfg = cfg
	if err := waitReadyConfig(ctx, cfg, name, r.out); err != nil {
		return nil, err
	}
	return r, nil
}

// Config returns a copy of an admin client config for this replica.
func (r *Replica) Config() *rest.Config { return rest.CopyConfig(r.cfg) }

// Stop stops the replica (gracefully within Options.StopTimeout, then
// killed). It is idempotent.
func (r *Replica) Stop() error {
	r.cp.mu.Lock()
	defer r.cp.mu.Unlock()
	for i, x := range r.cp.replicas {
		if x == r {
			r.cp.replicas = append(r.cp.replicas[:i], r.cp.replicas[i+1:]...)
			return r.stop()
		}
	}
	return nil
}

func (r *Replica) stop() error {
	err := r.api.Stop()
	r.cp.children.forget(r.name)
	if err != nil {
		return &Error{Component: r.name, Op: "stop", Err: err, Output: r.out.String()}
	}
	return nil
}

// saveSnapshot writes the snapshot of the etcd cli reaches to path and
// returns the cluster's revision just before it was taken.
func saveSnapshot(ctx context.Context, cli *clientv3.Client, path string) (int64, error) {
	st, err := cli.Get(ctx, "/freshinformer-revision-probe", clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	if _, err := io.Copy(f, rc); err != nil {
		_ = f.Close()
		return 0, err
	}
	return st.Header.Revision, f.Close()
}
