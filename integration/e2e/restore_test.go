package e2e

import (
	"testing"
	"time"

	"github.com/freshinformer/freshinformer/integration/controlplane"
	"github.com/freshinformer/freshinformer/integration/testenv"
)

// restoreKeys is how many ConfigMaps the restore tests write.
const restoreKeys = 12

// TestEtcdRestore restores etcd from a snapshot under a running informer,
// the way operators do (stop the apiserver, `etcdutl snapshot restore`,
// start etcd and the apiserver again), in each form:
//
//   - --bump-revision with --mark-compacted (what the Kubernetes docs
//     recommend; etcdutl 3.6 accepts the bump only together with
//     --mark-compacted): resource versions jump ahead, so the relist is
//     newer than the cache, yet every key written after the snapshot comes
//     back with older content and an older resource version, and keys
//     created after it vanish; once through watch-list, once through a
//     plain list;
//   - no bump: revisions go back to the snapshot's, and new writes reuse
//     resource versions the informer has already seen. The informer can
//     tell such a write from an old one only if it is told of the write
//     (RecordWrite, which read-your-writes calls for every write; the rig
//     does too): it then probes the server with a consistent read.
//
// Each is one event that moves the server back in time: the informer must
// declare exactly one regression, never report a write fresh before its
// indexer holds it, and end up equal to the restored server's state plus
// the writes made after the restore.
func TestEtcdRestore(t *testing.T) {
	cases := []struct {
		name      string
		opts      controlplane.RestoreOptions
		listWatch bool
	}{
		{"bump-revision+mark-compacted", controlplane.RestoreOptions{BumpRevision: 1_000_000_000, MarkCompacted: true}, false},
		{"bump-revision+mark-compacted/list+watch", controlplane.RestoreOptions{BumpRevision: 1_000_000_000, MarkCompacted: true}, true},
		{"no-bump", controlplane.RestoreOptions{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Its own control plane: a restore rewrites all of etcd.
			cp := testenv.NewPlane(t, controlplane.Options{})
			cs, err := cp.Clientset()
			if err != nil {
				t.Fatal(err)
			}
			ctx := testenv.Context(t, 4*time.Minute)
			ns, err := cp.CreateNamespace(ctx, "restore-")
			if err != nil {
				t.Fatal(err)
			}
			r := newFaultRig(t, ctx, cs, ns, rigOptions{listWatch: tc.listWatch})
			// Lost by the restore: newer content of every key, and keys
			// that did not exist at the snapshot.
			snap, floor := restoreWindowSetup(t, ctx, cp, r)
			before := floor.String()
			listsBefore := r.inf.Stats().Lists

			began := time.Now()
			if err := cp.RestoreEtcd(ctx, snap, tc.opts); err != nil {
				t.Fatal(err)
			}
			rev, err := cp.EtcdRevision(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("restored snapshot at revision %d in %v (informer was at %s; etcd now at %d)",
				snap.Revision, time.Since(began).Round(time.Millisecond), before, rev)

			// Let the informer relist (or declare) before writing again,
			// so that the restored, older content is what it lists.
			for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				if s := r.inf.Stats(); s.Lists > listsBefore || s.Regressions > 0 {
					break
				}
			}
			// Writes after the restore: with no bump their resource
			// versions are ones the informer has already seen.
			stop := r.runWriters(2, restoreKeys, 20*time.Millisecond)
			time.Sleep(8 * time.Second)
			stop()
			r.round(restoreKeys)
			r.converge(90 * time.Second)
			r.verify(1)
			if r.wentBack() == 0 {
				t.Errorf("no cached key went back across the restore: the test did not exercise one")
			}
		})
	}
}

// TestEtcdRestoreWhileInformerBehind: the informer has not yet applied the
// writes made after the snapshot when etcd is restored with --bump-revision
// --mark-compacted: either its watch events are held in the client (they
// arrive after the restore, then the relist takes the keys back), or it has
// no watch at all then (it never sees them). The writes were acknowledged
// and are lost; a WaitForFreshness for one of them must not return nil
// after the informer relists at the bumped revision unless a regression is
// declared: the writer's own write went back in time.
func TestEtcdRestoreWhileInformerBehind(t *testing.T) {
	for _, disconnect := range []bool{false, true} {
		name := "events-held"
		if disconnect {
			name = "no-watch"
		}
		t.Run(name, func(t *testing.T) {
			testRestoreWhileBehind(t, disconnect)
		})
	}
}

func testRestoreWhileBehind(t *testing.T, disconnect bool) {
	cp := testenv.NewPlane(t, controlplane.Options{})
	cs, err := cp.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t, 4*time.Minute)
	ns, err := cp.CreateNamespace(ctx, "restore-behind-")
	if err != nil {
		t.Fatal(err)
	}
	r := newFaultRig(t, ctx, cs, ns, rigOptions{holdable: true})
	for range 2 {
		r.round(restoreKeys)
	}
	r.settle()
	snap, err := cp.SnapshotEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if disconnect {
		r.lw.disconnect()
	} else {
		r.lw.hold()
	}
	r.round(restoreKeys) // acknowledged, not applied, lost by the restore
	if err := cp.RestoreEtcd(ctx, snap, controlplane.RestoreOptions{BumpRevision: 1_000_000_000, MarkCompacted: true}); err != nil {
		t.Fatal(err)
	}
	lists := r.inf.Stats().Lists
	r.lw.release()
	// The relist at the bumped revision, before anything overwrites the
	// restored state.
	for end := time.Now().Add(30 * time.Second); r.inf.Stats().Lists == lists && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	r.round(restoreKeys)
	r.converge(90 * time.Second)
	r.verify(1)
}
