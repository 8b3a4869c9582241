package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/integration/controlplane"
	"github.com/freshinformer/freshinformer/reflector"
)

// envRequireHAProxy, set by `make integration` (which installs HAProxy),
// turns a missing haproxy binary from a skip into a failure.
const envRequireHAProxy = "FRESHINFORMER_REQUIRE_HAPROXY"

// envHALong, set by `make ha`, makes the HA scenarios run their long form.
const envHALong = "FRESHINFORMER_HA_LONG"

// haLong reports whether the HA scenarios run their long form (make ha).
func haLong() bool { return os.Getenv(envHALong) == "1" }

// TestHA runs the scenarios of docs/ha.md on one highly available control
// plane (3 kube-apiservers, 3 etcd members, HAProxy), one after the other:
// each leaves the plane whole (the etcd restores, last, leave it serving
// the restored state). `make integration` runs the short form of
// scenarios 1 and 2; `make ha` (FRESHINFORMER_HA_LONG=1) the long form of
// all of them.
func TestHA(t *testing.T) {
	h := haPlane(t)
	t.Run("SteadyState", func(t *testing.T) { testHASteadyState(t, h) })
	t.Run("LaggingReplica", func(t *testing.T) { testHALaggingReplica(t, h) })
	t.Run("Rollout", func(t *testing.T) {
		if !haLong() {
			t.Skipf("long form only (make ha, %s=1): keeps make integration short", envHALong)
		}
		testHARollout(t, h)
	})
	t.Run("EtcdMemberLoss", func(t *testing.T) {
		if !haLong() {
			t.Skipf("long form only (make ha, %s=1): keeps make integration short", envHALong)
		}
		testHAEtcdMemberLoss(t, h)
	})
	t.Run("RolloutCost", func(t *testing.T) {
		if !haLong() {
			t.Skipf("long form only (make ha, %s=1): keeps make integration short", envHALong)
		}
		testHARolloutCost(t, h)
	})
	// Last: a restore rewrites the whole cluster (the earlier scenarios'
	// namespaces go back to the snapshot's state too).
	t.Run("EtcdRestore", func(t *testing.T) {
		if !haLong() {
			t.Skipf("long form only (make ha, %s=1): keeps make integration short", envHALong)
		}
		t.Run("NoBump", func(t *testing.T) { testHAEtcdRestore(t, h, "no bump", controlplane.RestoreOptions{}) })
		t.Run("Bump", func(t *testing.T) {
			testHAEtcdRestore(t, h, "--bump-revision 1000000000 --mark-compacted",
				controlplane.RestoreOptions{BumpRevision: 1_000_000_000, MarkCompacted: true})
		})
	})
}

// haPlane starts a highly available control plane of the test's own (3
// kube-apiservers on 3 etcd members behind HAProxy) and stops it when the
// test ends. Without haproxy the test is skipped, unless
// FRESHINFORMER_REQUIRE_HAPROXY=1.
func haPlane(t *testing.T) *controlplane.HAControlPlane {
	t.Helper()
	if _, err := exec.LookPath("haproxy"); err != nil {
		if os.Getenv(envRequireHAProxy) == "1" {
			t.Fatalf("haproxy not found (%v) although %s=1: `make haproxy` installs it", err, envRequireHAProxy)
		}
		t.Skipf("haproxy not installed: `make haproxy` installs it (Debian package haproxy); `make integration` does")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	h, err := controlplane.StartHA(ctx, controlplane.HAOptions{})
	if err != nil {
		t.Fatalf("starting the HA control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := h.Stop(); err != nil {
			t.Errorf("stopping the HA control plane: %v", err)
		}
	})
	t.Logf("HA control plane ready in %v: %s", time.Since(start).Round(time.Millisecond), h.Describe())
	return h
}

// haClient returns a clientset with a connection of its own through the
// load balancer, and the replica that connection landed on.
func haClient(t *testing.T, ctx context.Context, h *controlplane.HAControlPlane) (kubernetes.Interface, int) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(controlplane.DistinctConnection(h.Config()))
	if err != nil {
		t.Fatal(err)
	}
	i, err := h.WhichAPIServer(ctx, cs.CoreV1().RESTClient())
	if err != nil {
		t.Fatal(err)
	}
	return cs, i
}

// distinctClient is haClient for any config (the single-server plane).
func distinctClient(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(controlplane.DistinctConnection(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// latencies is a set of durations with percentiles for the tables.
type latencies []time.Duration

func (l latencies) pct(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func (l latencies) max() time.Duration {
	if len(l) == 0 {
		return 0
	}
	return slices.Max(l)
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) + " ms"
}

// table renders a Markdown table (logged, and copied into docs/ha.md).
func table(header []string, rows [][]string) string {
	var b strings.Builder
	b.WriteString("\n| " + strings.Join(header, " | ") + " |\n|")
	for range header {
		b.WriteString(" --- |")
	}
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String()
}

func pctOf(n, of int) string {
	if of == 0 {
		return "0"
	}
	return fmt.Sprintf("%d of %d (%.0f%%)", n, of, 100*float64(n)/float64(of))
}

// sideBySide is client-go's factory beside ours on one namespace's
// ConfigMaps, both watching through one connection, with the regressions
// ours declares.
type sideBySide struct {
	ns                      string
	plainLister, oursLister corelisters.ConfigMapLister
	inf                     *cache.FreshInformer

	mu       sync.Mutex // guards declared
	declared []reflector.Regression
}

// startSideBySide makes a namespace named after prefix with five
// ConfigMaps through writer, then starts both factories on watchCS
// (beforeStart, when set, sees client-go's factory before it starts). They
// stop when the test ends.
func startSideBySide(t *testing.T, ctx context.Context, watchCS, writer kubernetes.Interface, prefix string, beforeStart func(informers.SharedInformerFactory)) *sideBySide {
	t.Helper()
	nsObj, err := writer.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := &sideBySide{ns: nsObj.Name}
	for i := range 5 {
		if _, err := writer.CoreV1().ConfigMaps(s.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "lag-" + strconv.Itoa(i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	plain := informers.NewSharedInformerFactoryWithOptions(watchCS, 0, informers.WithNamespace(s.ns))
	s.plainLister = plain.Core().V1().ConfigMaps().Lister()
	if beforeStart != nil {
		beforeStart(plain)
	}
	ours := cache.NewSharedInformerFactoryWithOptions(watchCS, 0, cache.WithNamespace(s.ns),
		cache.WithInformerOptions(cache.WithRegressionHandler(func(r reflector.Regression) {
			s.mu.Lock()
			s.declared = append(s.declared, r)
			s.mu.Unlock()
		})))
	s.oursLister = ours.Core().V1().ConfigMaps().Lister()
	plain.Start(runCtx.Done())
	ours.Start(runCtx.Done())
	t.Cleanup(func() {
		stop()
		plain.Shutdown()
		ours.Shutdown()
	})
	for _, synced := range []map[any]bool{toAny(plain.WaitForCacheSync(ctx.Done())), toAny(ours.WaitForCacheSync(ctx.Done()))} {
		for typ, ok := range synced {
			if !ok {
				t.Fatalf("%v informer did not sync", typ)
			}
		}
	}
	s.inf = ours.FreshInformersForResource(corev1.Resource("configmaps"))[0]
	return s
}

// check fails the test on what no phase may show: no write went through,
// a wait released before our lister held its write, a failed wait for a
// committed write, a wait for an unreached resource version that did not
// fail as too large, a regression declared.
func (s *sideBySide) check(t *testing.T, name string, res lagResult) {
	t.Helper()
	if res.writes == 0 {
		t.Errorf("%s: no write succeeded: %v", name, res.writeErrs)
	}
	if res.early != 0 {
		t.Errorf("%s: %d waits returned nil before our lister held their write", name, res.early)
	}
	if len(res.failed) != 0 {
		t.Errorf("%s: %d waits for committed writes failed, first: %s", name, len(res.failed), res.failed[0])
	}
	if res.unreachable != "ErrTooLargeResourceVersion" {
		t.Errorf("%s: the wait for an unreached resource version ended with %s, want ErrTooLargeResourceVersion", name, res.unreachable)
	}
	if res.regressions != 0 {
		s.mu.Lock()
		t.Errorf("%s: %d regressions declared although nothing went back: %v", name, res.regressions, s.declared)
		s.mu.Unlock()
	}
}
