package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/freshinformer/freshinformer/integration/controlplane"
	"github.com/freshinformer/freshinformer/integration/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// TestOutageHoldsWaitsOneRoundTrip measures what the outage rule (issue
// 21) costs waits after a real outage that is not a restore: once the
// informer's request to a killed apiserver has failed, a wait for an RV
// its cache holds is held (the server it reaches next may come from a
// restored etcd) until a consistent read answers. The restore check polls
// the server meanwhile, so the wait returns one round trip after the
// apiserver is back (at most a second later), not after the Reflector's
// own retry backoff.
func TestOutageHoldsWaitsOneRoundTrip(t *testing.T) {
	cp := testenv.NewPlane(t, controlplane.Options{})
	cs, err := cp.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t, 3*time.Minute)
	ns, err := cp.CreateNamespace(ctx, "outage-")
	if err != nil {
		t.Fatal(err)
	}
	r := newFaultRig(t, ctx, cs, ns, rigOptions{})
	r.round(faultKeys)
	r.settle()
	applied := r.inf.LastObservedResourceVersion()

	if err := cp.KillAPIServer(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	held := func() bool {
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		return r.inf.WaitForFreshness(wctx, applied) != nil
	}
	for !held() {
		if time.Since(killed) > 30*time.Second {
			t.Fatal("waits for the applied RV were never held during the outage")
		}
		time.Sleep(20 * time.Millisecond)
	}
	heldAfter := time.Since(killed)

	released := make(chan time.Time, 1)
	go func() {
		if err := r.inf.WaitForFreshness(ctx, applied); err == nil {
			released <- time.Now()
		}
	}()
	time.Sleep(time.Second)
	// When the restarted apiserver first answers a consistent list.
	answering := make(chan time.Time, 1)
	pctx, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	go func() {
		for pctx.Err() == nil {
			if _, err := cs.CoreV1().ConfigMaps(ns).List(pctx, metav1.ListOptions{Limit: 1}); err == nil {
				answering <- time.Now()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	starting := time.Now()
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-released:
		first := <-answering
		t.Logf("outage noticed %v after the kill; a wait for the applied RV %s returned %v after the restarted apiserver first answered a list (%v after it was started); %+v",
			heldAfter.Round(time.Millisecond), applied, at.Sub(first).Round(time.Millisecond), at.Sub(starting).Round(time.Millisecond), r.inf.Stats())
		if at.Before(starting) {
			t.Errorf("the wait returned %v before the apiserver was started again", starting.Sub(at))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the wait was still held 30 s after the apiserver was back")
	}
	if n := r.inf.Stats().Regressions; n != 0 {
		t.Errorf("a plain outage declared %d regressions", n)
	}
}
