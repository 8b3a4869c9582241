package e2e

import (
	"testing"
	"time"

	"github.com/freshinformer/freshinformer/integration/controlplane"
	"github.com/freshinformer/freshinformer/integration/testenv"
)

const faultKeys = 16

// TestAPIServerKill9DuringWriteBurst kills the kube-apiserver with SIGKILL
// while four writers hammer it (some writes are cut mid-flight, possibly
// committed without an answer), then starts it again. The new watch cache
// starts at etcd's revision, so the informer's re-watch gets 410 and
// relists. Nothing may be fresh early, nothing goes back, the cache ends
// equal to the server.
func TestAPIServerKill9DuringWriteBurst(t *testing.T) {
	for _, path := range streamPaths {
		t.Run(path.name, func(t *testing.T) {
			cp := testenv.NewPlane(t, controlplane.Options{})
			cs, err := cp.Clientset()
			if err != nil {
				t.Fatal(err)
			}
			ctx := testenv.Context(t, 3*time.Minute)
			ns, err := cp.CreateNamespace(ctx, "kill9-")
			if err != nil {
				t.Fatal(err)
			}
			r := newFaultRig(t, ctx, cs, ns, rigOptions{listWatch: !path.watchList})
			r.round(faultKeys)
			before := r.inf.Stats()

			stop := r.runWriters(4, faultKeys, 0)
			time.Sleep(2 * time.Second)
			if err := cp.KillAPIServer(); err != nil {
				stop()
				t.Fatal(err)
			}
			time.Sleep(time.Second)
			if err := cp.StartAPIServer(ctx); err != nil {
				stop()
				t.Fatal(err)
			}
			time.Sleep(3 * time.Second)
			stop()
			r.round(faultKeys)
			r.converge(90 * time.Second)
			r.verify(0)
			after := r.inf.Stats()
			if after.Lists <= before.Lists && after.Watches <= before.Watches {
				t.Errorf("no relist or re-watch across the kill: before %+v after %+v", before.Stats, after.Stats)
			}
		})
	}
}

// TestEtcdCompactionDuringWatch compacts etcd every second while writers
// run and the informer watches (ConfigMaps: served from the watch cache,
// whose watches survive compaction), then restarts the apiserver so the
// re-watch starts from a compacted revision (410, relist). The checks are
// the same as for every fault.
func TestEtcdCompactionDuringWatch(t *testing.T) {
	cp := testenv.Plane(t)
	cs := testenv.Clientset(t)
	ns := testenv.Namespace(t)
	ctx := testenv.Context(t, 3*time.Minute)
	r := newFaultRig(t, ctx, cs, ns, rigOptions{})
	r.round(faultKeys)

	stop := r.runWriters(2, faultKeys, 10*time.Millisecond)
	compactions := 0
	for range 5 {
		time.Sleep(time.Second)
		if _, err := cp.CompactEtcd(ctx); err != nil {
			stop()
			t.Fatal(err)
		}
		compactions++
	}
	if err := cp.RestartAPIServer(ctx); err != nil {
		stop()
		t.Fatal(err)
	}
	if _, err := cp.CompactEtcd(ctx); err != nil {
		stop()
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	stop()
	r.round(faultKeys)
	r.converge(60 * time.Second)
	r.verify(0)
	t.Logf("%d compactions during the watch; stats %+v", compactions+1, r.inf.Stats())
}
