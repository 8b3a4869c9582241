package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/integration/controlplane"
	"github.com/freshinformer/freshinformer/integration/testenv"
)

// steadyResult is one topology's row of scenario 1.
type steadyResult struct {
	topology   string
	writes     int
	plainStale int // plain client-go lister, read right after the write
	oursStale  int // our lister, read after WaitForFreshness returned nil
	waits      latencies
	waitErrs   []string
}

func (r steadyResult) row() []string {
	return []string{r.topology, strconv.Itoa(r.writes), pctOf(r.plainStale, r.writes), pctOf(r.oursStale, r.writes),
		ms(r.waits.pct(0.5)), ms(r.waits.pct(0.99)), ms(r.waits.max())}
}

// staleIn reports whether lister's copy of ns/name is older than rv.
func staleIn(lister corelisters.ConfigMapLister, ns, name, rv string) bool {
	cm, err := lister.ConfigMaps(ns).Get(name)
	if err != nil {
		return true
	}
	c, err := freshness.Compare(cm.ResourceVersion, rv)
	return err != nil || c < 0
}

// runSteady writes ConfigMaps in ns through writers in turn, at rate per
// second, while client-go's factory (through plainCS) and ours (through
// oursCS) watch ns; after each write it reads client-go's lister at once
// and ours after WaitForFreshness, as the demo does.
func runSteady(t *testing.T, ctx context.Context, topology string, writers []kubernetes.Interface, plainCS, oursCS kubernetes.Interface, ns string, writes int, rate float64) steadyResult {
	t.Helper()
	res := steadyResult{topology: topology}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()

	plain := informers.NewSharedInformerFactoryWithOptions(plainCS, 0, informers.WithNamespace(ns))
	plainLister := plain.Core().V1().ConfigMaps().Lister()
	ours := cache.NewSharedInformerFactoryWithOptions(oursCS, 0, cache.WithNamespace(ns))
	oursLister := ours.Core().V1().ConfigMaps().Lister()
	plain.Start(runCtx.Done())
	ours.Start(runCtx.Done())
	defer func() {
		stop()
		plain.Shutdown()
		ours.Shutdown()
	}()
	for typ, ok := range plain.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%s: client-go's %v informer did not sync", topology, typ)
		}
	}
	for typ, ok := range ours.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%s: our %v informer did not sync", topology, typ)
		}
	}
	gvr := corev1.SchemeGroupVersion.WithResource("configmaps")

	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for i := range writes {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v after %d writes", topology, ctx.Err(), i)
		case <-tick.C:
		}
		name := "steady-" + strconv.Itoa(i%5)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"write": strconv.Itoa(i)}}
		w := writers[i%len(writers)].CoreV1().ConfigMaps(ns)
		out, err := w.Update(ctx, cm, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			out, err = w.Create(ctx, cm, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatalf("%s: write %d: %v", topology, i, err)
		}
		rv := out.ResourceVersion
		res.writes++
		if staleIn(plainLister, ns, name, rv) {
			res.plainStale++
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		start := time.Now()
		err = ours.WaitForFreshness(wctx, gvr, rv)
		took := time.Since(start)
		cancel()
		if err != nil {
			res.waitErrs = append(res.waitErrs, fmt.Sprintf("write %d (rv %s): %v", i, rv, err))
			continue
		}
		res.waits = append(res.waits, took)
		if staleIn(oursLister, ns, name, rv) {
			res.oursStale++
		}
	}
	return res
}

var steadyHeader = []string{"topology", "writes", "plain lister stale right after the write", "ours stale after WaitForFreshness", "wait p50", "wait p99", "wait max"}

// testHASteadyState is scenario 1 of docs/ha.md: writes and informers
// through the load balancer of an HA plane (3 kube-apiservers, 3 etcd
// members, HAProxy), each client on a connection of its own, so writes and
// watches are served by different replicas; then the same on the shared
// single-server plane, for comparison. Reads after WaitForFreshness are
// never stale, and no wait fails.
func testHASteadyState(t *testing.T, h *controlplane.HAControlPlane) {
	writes, rate := 150, 20.0
	if haLong() {
		writes = 2000
	}
	ctx := testenv.Context(t, 10*time.Minute)

	admin, _ := haClient(t, ctx, h)
	nsObj, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ha-steady-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var writers []kubernetes.Interface
	var at []string
	for range 3 {
		cs, i := haClient(t, ctx, h)
		writers = append(writers, cs)
		at = append(at, strconv.Itoa(i))
	}
	plainCS, plainAt := haClient(t, ctx, h)
	oursCS, oursAt := haClient(t, ctx, h)
	t.Logf("connections through HAProxy: writers on kube-apiservers %v, client-go's factory on %d, ours on %d", at, plainAt, oursAt)
	haRes := runSteady(t, ctx, "HA: 3 kube-apiservers, 3 etcd members, HAProxy", writers, plainCS, oursCS, nsObj.Name, writes, rate)

	single := testenv.Config(t)
	singleNS := testenv.Namespace(t)
	singleWriters := []kubernetes.Interface{distinctClient(t, single), distinctClient(t, single), distinctClient(t, single)}
	singleRes := runSteady(t, ctx, "single kube-apiserver, one etcd", singleWriters, distinctClient(t, single), distinctClient(t, single), singleNS, writes, rate)

	t.Logf("scenario 1, steady state (%d writes at %.0f/s, each topology):%s", writes, rate,
		table(steadyHeader, [][]string{haRes.row(), singleRes.row()}))
	for _, r := range []steadyResult{haRes, singleRes} {
		if r.oursStale != 0 {
			t.Errorf("%s: %d reads after WaitForFreshness were stale", r.topology, r.oursStale)
		}
		if len(r.waitErrs) != 0 {
			t.Errorf("%s: %d waits failed, first: %s", r.topology, len(r.waitErrs), r.waitErrs[0])
		}
	}
}
