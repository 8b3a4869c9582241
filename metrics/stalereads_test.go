package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/stalereads"
	"github.com/freshinformer/freshinformer/writes"
)

var _ writes.StaleWriteCounter = (*Provider)(nil)

// detectingInformer is an informer of configmaps in namespace ns, with
// the stale-read detector on, reporting to p. It is never run: its cache
// applies nothing, so each read of a key it was told this process wrote
// is stale.
func detectingInformer(t *testing.T, p *Provider, ns string) *cache.FreshInformer {
	t.Helper()
	return cache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.ConfigMap{}, 0, nil,
		cache.WithResource(schema.GroupResource{Resource: "configmaps"}), cache.WithSelector(cache.Selector{Namespace: ns}),
		cache.WithMetrics(p), cache.WithStaleReadDetection(func(stalereads.Report) {}))
}

// readStale makes n stale reads through inf: each of a key written at
// resource version 5 that the cache does not hold.
func readStale(t *testing.T, inf *cache.FreshInformer, ns string, n int) {
	t.Helper()
	written := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "written", UID: "u", ResourceVersion: "5"}}
	if err := inf.RecordWrittenObject(written); err != nil {
		t.Fatal(err)
	}
	for range n {
		if _, ok, _ := inf.GetIndexer().GetByKey(ns + "/written"); ok {
			t.Fatal("the cache holds the write")
		}
	}
}

func staleReadsSum(t *testing.T, g prometheus.Gatherer) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "freshinformer_stale_reads_total" {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// Two Providers in one process, each given one informer of the same
// resource: each exports its own informer's stale reads, under that
// informer's labels, and nothing of the other's.
func TestProvidersExportOnlyTheirInformersStaleReads(t *testing.T) {
	t.Setenv(stalereads.EnvVar, "")
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	a, err := NewProvider(regA)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewProvider(regB)
	if err != nil {
		t.Fatal(err)
	}
	infA, infB := detectingInformer(t, a, "team-a"), detectingInformer(t, b, "team-b")
	readStale(t, infA, "team-a", 2)
	readStale(t, infB, "team-b", 1)

	if got := staleReadsSum(t, regA); got != 2 {
		t.Errorf("provider A exports %v stale reads, want its informer's 2", got)
	}
	if got := staleReadsSum(t, regB); got != 1 {
		t.Errorf("provider B exports %v stale reads, want its informer's 1", got)
	}
	const help = "# HELP freshinformer_stale_reads_total Reads through the informer (indexer, listers, controller-runtime's cached client) that returned older state than this process's own write of the key, found by the stale-read detector.\n# TYPE freshinformer_stale_reads_total counter\n"
	for _, c := range []struct {
		reg  prometheus.Gatherer
		want string
	}{
		{regA, `freshinformer_stale_reads_total{field_selector="",informer_namespace="team-a",label_selector="",name="",resource="configmaps"} 2`},
		{regB, `freshinformer_stale_reads_total{field_selector="",informer_namespace="team-b",label_selector="",name="",resource="configmaps"} 1`},
	} {
		if err := testutil.GatherAndCompare(c.reg, strings.NewReader(help+c.want+"\n"), "freshinformer_stale_reads_total"); err != nil {
			t.Error(err)
		}
	}
}

// An informer with the detector on exports its count from 0, with its
// resource's stale writes at 0 beside it; one without exports neither;
// a stopped informer's count is gone with it.
func TestStaleReadSeriesLiveWithTheInformer(t *testing.T) {
	t.Setenv(stalereads.EnvVar, "")
	reg := prometheus.NewRegistry()
	p, err := NewProvider(reg)
	if err != nil {
		t.Fatal(err)
	}
	cache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.ConfigMap{}, 0, nil,
		cache.WithResource(schema.GroupResource{Resource: "configmaps"}), cache.WithName("plain"), cache.WithMetrics(p))
	if n := gatheredSeries(t, reg, "freshinformer_stale_reads_total") + gatheredSeries(t, reg, "freshinformer_stale_writes_total"); n != 0 {
		t.Fatalf("%d stale-read and stale-write series without the detector", n)
	}
	st := newStream("10")
	inf := cache.NewSharedIndexInformer(st, &corev1.ConfigMap{}, 0, nil, cache.WithMetrics(p), cache.WithQuietProbeDelay(-1), cache.WithStaleReadDetection(nil))
	if n, got := gatheredSeries(t, reg, "freshinformer_stale_reads_total"), staleReadsSum(t, reg); n != 1 || got != 0 {
		t.Fatalf("%d series at %v for a detecting informer, want 1 at 0", n, got)
	}
	if n := gatheredSeries(t, reg, "freshinformer_stale_writes_total"); n != 1 {
		t.Fatalf("%d stale-write series for a detecting informer's resource, want 1 (at 0)", n)
	}
	run(t, inf, st)()
	if n := gatheredSeries(t, reg, "freshinformer_stale_reads_total"); n != 0 {
		t.Fatalf("%d stale-read series after the informer stopped", n)
	}
}

// A transport counting on a Provider shows each resource from 0 at its
// first write, then its stale writes; another Provider shows none of them.
func TestStaleWritesCountedOnTheirProvider(t *testing.T) {
	reg, other := prometheus.NewRegistry(), prometheus.NewRegistry()
	p, err := NewProvider(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewProvider(other); err != nil {
		t.Fatal(err)
	}
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	p.AddStaleWrites(gr, 0)
	const head = "# HELP freshinformer_stale_writes_total Updates and patches sent through a writes transport whose resourceVersion was older than this process's own last write of the object, found by the stale-write detector (transports made with writes.WithStaleWriteCounter).\n# TYPE freshinformer_stale_writes_total counter\n"
	if err := testutil.GatherAndCompare(reg, strings.NewReader(head+`freshinformer_stale_writes_total{resource="deployments.apps"} 0`+"\n"), "freshinformer_stale_writes_total"); err != nil {
		t.Error(err)
	}
	p.AddStaleWrites(gr, 1)
	p.AddStaleWrites(gr, 1)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(head+`freshinformer_stale_writes_total{resource="deployments.apps"} 2`+"\n"), "freshinformer_stale_writes_total"); err != nil {
		t.Error(err)
	}
	if n := gatheredSeries(t, other, "freshinformer_stale_writes_total"); n != 0 {
		t.Errorf("another provider exports %d stale-write series", n)
	}
}
