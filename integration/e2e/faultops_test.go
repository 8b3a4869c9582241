package e2e

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/freshinformer/freshinformer/integration/controlplane"
	"github.com/freshinformer/freshinformer/integration/testenv"
)

// TestControlPlaneFaultOperations pins what the fault tests rely on from
// the harness: a snapshot restore with --bump-revision --mark-compacted
// brings old content back at a higher revision and expires older watches;
// one without bump takes the revision back; kill -9 leaves the apiserver
// down until StartAPIServer; a replica serves the same etcd; Stop leaves
// no process behind.
func TestControlPlaneFaultOperations(t *testing.T) {
	shared := map[int]bool{} // the shared plane's processes
	for _, pid := range childPIDs(t) {
		shared[pid] = true
	}
	cp := testenv.NewPlane(t, controlplane.Options{})
	cs, err := cp.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t, 3*time.Minute)
	ns, err := cp.CreateNamespace(ctx, "faultops-")
	if err != nil {
		t.Fatal(err)
	}
	cms := cs.CoreV1().ConfigMaps(ns)
	set := func(v string) *corev1.ConfigMap {
		t.Helper()
		cm, err := cms.Patch(ctx, "c", types.MergePatchType, []byte(`{"data":{"v":"`+v+`"}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	atSnap := set("snapshot")
	snap, err := cp.SnapshotEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	later := set("later")

	if err := cp.RestoreEtcd(ctx, snap, controlplane.RestoreOptions{MarkCompacted: true}); err == nil {
		t.Fatal("MarkCompacted without BumpRevision accepted")
	}
	if err := cp.RestoreEtcd(ctx, snap, controlplane.RestoreOptions{BumpRevision: 1000, MarkCompacted: true}); err != nil {
		t.Fatal(err)
	}
	rev, err := cp.EtcdRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cms.Get(ctx, "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	laterRV, _ := strconv.ParseInt(later.ResourceVersion, 10, 64)
	if got.Data["v"] != "snapshot" || got.ResourceVersion != atSnap.ResourceVersion || rev < snap.Revision+1000 || rev <= laterRV {
		t.Fatalf("after restore with bump: %q at %s, etcd at %d; want the snapshot's content at %s and etcd past %d",
			got.Data["v"], got.ResourceVersion, rev, atSnap.ResourceVersion, snap.Revision+1000)
	}
	// --mark-compacted: a watch from before the restore is expired.
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: later.ResourceVersion})
	if err == nil {
		ev := <-w.ResultChan()
		w.Stop()
		if st, ok := ev.Object.(*metav1.Status); !ok || st.Code != 410 {
			t.Errorf("watch from %s after the restore: %v %#v, want 410", later.ResourceVersion, ev.Type, ev.Object)
		}
	}

	snap2, err := cp.SnapshotEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		set("after-second-snapshot-" + strconv.Itoa(i))
	}
	revBefore, err := cp.EtcdRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.RestoreEtcd(ctx, snap2, controlplane.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	// The restarted apiserver writes a few objects (its lease) at once.
	if rev2, err := cp.EtcdRevision(ctx); err != nil || rev2 >= revBefore {
		t.Fatalf("after restore without bump etcd is at %d (%v), want back near %d (was %d)", rev2, err, snap2.Revision, revBefore)
	}

	if err := cp.KillAPIServer(); err != nil {
		t.Fatal(err)
	}
	if cp.Up(ctx) {
		t.Fatal("apiserver answers after kill -9")
	}
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "c", metav1.GetOptions{}); err != nil {
		t.Fatalf("after kill -9 and start: %v", err)
	}

	replica, err := cp.StartAPIServerReplica(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rcs, err := kubernetes.NewForConfig(replica.Config())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rcs.CoreV1().ConfigMaps(ns).Get(ctx, "c", metav1.GetOptions{}); err != nil || got.Data["v"] != "snapshot" {
		t.Fatalf("through the replica: %v %v", got, err)
	}

	var pids []int
	for _, pid := range childPIDs(t) {
		if !shared[pid] {
			pids = append(pids, pid)
		}
	}
	if len(pids) < 3 {
		t.Fatalf("expected etcd, apiserver and replica among our children, found %v", pids)
	}
	if err := cp.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still exists after Stop", pid)
		}
	}
	if err := cp.RestoreEtcd(context.Background(), snap, controlplane.RestoreOptions{}); !errors.Is(err, controlplane.ErrStopped) {
		t.Errorf("RestoreEtcd after Stop: %v, want ErrStopped", err)
	}
}

// childPIDs lists this process's child processes (Linux; skips elsewhere).
func childPIDs(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("cannot list processes: %v", err)
	}
	self := os.Getpid()
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the parenthesised command name: state ppid ...
		i := strings.LastIndexByte(string(stat), ')')
		if f := strings.Fields(string(stat[i+1:])); i >= 0 && len(f) > 1 && f[1] == strconv.Itoa(self) {
			out = append(out, pid)
		}
	}
	return out
}
