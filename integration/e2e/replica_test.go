package e2e

import (
	"testing"
	"time"

	"github.com/freshinformer/freshinformer/integration/controlplane"
	"github.com/freshinformer/freshinformer/integration/testenv"
)

const replicaKeys = 10

// startReplicaProxy starts a second kube-apiserver on the shared etcd and a
// laggingProxy in front of it.
func startReplicaProxy(t *testing.T) (*controlplane.ControlPlane, *laggingProxy) {
	t.Helper()
	cp := testenv.Plane(t)
	ctx := testenv.Context(t, 2*time.Minute)
	replica, err := cp.StartAPIServerReplica(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := replica.Stop(); err != nil {
			t.Errorf("stopping the replica: %v", err)
		}
	})
	return cp, newLaggingProxy(t, replica.Config())
}

// TestLaggingReplicaHeldWatch: the informer watches through a replica whose
// watch events are held back while writes go to the other apiserver. No
// write may be reported fresh while its event is held; once released,
// every waiter returns and the cache matches the server.
func TestLaggingReplicaHeldWatch(t *testing.T) {
	for _, path := range streamPaths {
		t.Run(path.name, func(t *testing.T) {
			_, proxy := startReplicaProxy(t)
			cs := testenv.Clientset(t)
			ns := testenv.Namespace(t)
			ctx := testenv.Context(t, 3*time.Minute)
			r := newFaultRig(t, ctx, cs, ns, rigOptions{informerClient: proxy.client(t), listWatch: !path.watchList})

			r.round(replicaKeys)
			r.settle()
			proxy.hold()
			for range 3 {
				r.round(replicaKeys)
			}
			time.Sleep(3 * time.Second)
			pending := r.inf.Stats().PendingWaiters
			t.Logf("after 3 s of held watch events: %d waiters pending", pending)
			proxy.release()
			r.converge(60 * time.Second)
			r.verify(0)
			if pending == 0 {
				// Legitimate only if the informer caught up by another way
				// (a relist applies the objects); verify has checked that
				// every nil return came with the write in the indexer.
				t.Logf("no waiter was pending while events were held (the informer caught up through a list)")
			}
		})
	}
}

// TestLaggingReplicaStaleList: the informer (list then watch) is made to
// relist through a replica that serves a list recorded earlier. The stale
// list must be refused (counted), nothing goes back, and once the replica
// serves current lists again the cache matches the server.
func TestLaggingReplicaStaleList(t *testing.T) {
	_, proxy := startReplicaProxy(t)
	cs := testenv.Clientset(t)
	ns := testenv.Namespace(t)
	ctx := testenv.Context(t, 3*time.Minute)
	proxy.recordNextList()
	r := newFaultRig(t, ctx, cs, ns, rigOptions{informerClient: proxy.client(t), listWatch: true, acceptRegressionAfter: 2 * time.Minute})
	for range 3 {
		r.round(replicaKeys)
	}
	r.settle()

	proxy.serveStale(2)
	proxy.forceRelist()
	stop := r.runWriters(1, replicaKeys, 50*time.Millisecond)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if stale, _ := proxy.counts(); stale >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	stale, gone := proxy.counts()
	r.converge(60 * time.Second)
	r.verify(0)
	st := r.inf.Stats()
	t.Logf("proxy served %d stale lists and %d 410s; stale lists refused %d", stale, gone, st.StaleListsRefused)
	if stale < 2 || gone < 1 {
		t.Fatalf("the proxy did not inject the fault: %d stale lists, %d 410s", stale, gone)
	}
	if st.StaleListsRefused < 1 {
		t.Errorf("stale lists were served but none refused: %+v", st)
	}
}

// TestLaggingReplicaStaleListPastBound: the replica keeps serving the old
// list past the informer's bound. The informer accepts it as exactly one
// declared regression (not a wedge, not a silent one), then catches up
// once the replica serves current state.
func TestLaggingReplicaStaleListPastBound(t *testing.T) {
	_, proxy := startReplicaProxy(t)
	cs := testenv.Clientset(t)
	ns := testenv.Namespace(t)
	ctx := testenv.Context(t, 3*time.Minute)
	proxy.recordNextList()
	r := newFaultRig(t, ctx, cs, ns, rigOptions{informerClient: proxy.client(t), listWatch: true, acceptRegressionAfter: 3 * time.Second})
	for range 3 {
		r.round(replicaKeys)
	}
	r.settle()

	proxy.serveStale(-1)
	proxy.forceRelist()
	deadline := time.Now().Add(90 * time.Second)
	for r.regressions() == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	proxy.serveStale(0)
	r.round(replicaKeys)
	r.converge(60 * time.Second)
	r.verify(1)
	stale, _ := proxy.counts()
	t.Logf("proxy served %d stale lists; stats %+v", stale, r.inf.Stats())
	if r.inf.Stats().StaleListsRefused < 1 {
		t.Errorf("the stale list was accepted without first being refused: %+v", r.inf.Stats())
	}
}
