package controlplane

import (
	"context"
	"fmt"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// compactRevKey is the etcd key (outside the /registry prefix) in which
// kube-apiserver's compactor records the last compacted revision
// (k8s.io/apiserver/pkg/storage/etcd3/compact.go).
const compactRevKey = "compact_rev_key"

// withEtcd runs f with a short-lived etcd v3 client. A fresh client per
// call keeps no gRPC goroutines alive between calls (goleak-friendly).
func (c *ControlPlane) withEtcd(ctx context.Context, op string, f func(context.Context, *clientv3.Client) error) error {
	c.mu.Lock()
	stopped := c.stopped
	c.mu.Unlock()
	if stopped {
		return ErrStopped
	}
	return withEtcdClient(ctx, op, []string{c.EtcdEndpoint()}, f)
}

// withEtcdClient runs f, bounded to 10 s, with a short-lived etcd v3 client
// of endpoints; its errors are *Error.
func withEtcdClient(ctx context.Context, op string, endpoints []string, f func(context.Context, *clientv3.Client) error) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return &Error{Component: ComponentEtcd, Op: op, Err: err}
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := f(ctx, cli); err != nil {
		return &Error{Component: ComponentEtcd, Op: op, Err: err}
	}
	return nil
}

// EtcdRevision returns etcd's current revision. Kubernetes resource
// versions are etcd revisions, so this is the newest RV any object or list
// can have right now.
func (c *ControlPlane) EtcdRevision(ctx context.Context) (int64, error) {
	var rev int64
	err := c.withEtcd(ctx, "get revision", func(ctx context.Context, cli *clientv3.Client) error {
		// Any key will do: every response header carries the store revision.
		resp, err := cli.Get(ctx, "/freshinformer-revision-probe", clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		rev = resp.Header.Revision
		return nil
	})
	return rev, err
}

// CompactEtcd compacts etcd's history and returns the compaction revision:
// afterwards, a watch or read at any resource version older than the newest
// one that existed when CompactEtcd was called needs compacted history.
// Requests that etcd itself answers then fail with 410 Gone (reason
// Expired): watches on UncachedResource at once, and lists with
// resourceVersionMatch=Exact once the apiserver has noticed the compaction
// (it polls every 15 s). Watches served by the apiserver's watch cache are
// NOT expired by it: the cache keeps its own event window (RestartAPIServer
// empties it).
func (c *ControlPlane) CompactEtcd(ctx context.Context) (int64, error) {
	var rev int64
	err := c.withEtcd(ctx, "compact", func(ctx context.Context, cli *clientv3.Client) error {
		cur, err := cli.Get(ctx, compactRevKey, clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		// Tell kube-apiserver, as its own compactor does: it watches this
		// key to learn the compacted revision and then drops watch-cache
		// snapshots older than it, so exact-RV lists go to etcd and fail
		// with 410 instead of being served from memory. The put gets
		// revision cur+1, and compacting at it removes every revision up
		// to cur: the newest resource version a client could have seen
		// (cur) stays watchable, anything older is gone.
		put, err := cli.Put(ctx, compactRevKey, strconv.FormatInt(cur.Header.Revision+1, 10))
		if err != nil {
			return fmt.Errorf("recording compaction in %q: %w", compactRevKey, err)
		}
		rev = put.Header.Revision
		// Physical: return only once the compaction is applied, so the
		// caller's next request sees it.
		if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
			return fmt.Errorf("at revision %d: %w", rev, err)
		}
		return nil
	})
	return rev, err
}
