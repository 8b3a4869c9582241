package metrics

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	klabels "k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
)

// Several informers of one resource on one Provider: one per namespace, a
// filtered one, a cluster-wide one, and two alike (two factories). The
// scrape must succeed (promhttp with HTTPErrorOnError, as controller-runtime
// serves it) and every informer must have its own series.
func TestSeveralInformersOfOneResource(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	p, err := NewProvider(reg)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(sel cache.Selector, opts ...cache.Option) *cache.FreshInformer {
		return cache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.ConfigMap{}, 0, nil,
			append([]cache.Option{cache.WithMetrics(p), cache.WithSelector(sel)}, opts...)...)
	}
	infs := []*cache.FreshInformer{
		mk(cache.Selector{Namespace: "a"}),
		mk(cache.Selector{Namespace: "b"}),
		mk(cache.Selector{Namespace: "a", Labels: klabels.SelectorFromSet(klabels.Set{"app": "x"}), Fields: fields.OneTermEqualSelector("metadata.name", "n")}),
		mk(cache.Selector{}),
		mk(cache.Selector{}), // alike: a second factory
		mk(cache.Selector{}, cache.WithName("ctrl")),
		mk(cache.Selector{}, cache.WithName("ctrl")),
	}
	for _, inf := range infs {
		if err := inf.RecordWrite("5"); err != nil { // a histogram series each
			t.Fatal(err)
		}
	}

	if _, err := reg.Gather(); err != nil {
		t.Fatalf("Gather with several informers of one resource: %v", err)
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape answered %d", resp.StatusCode)
	}

	var ids []string
	for _, inf := range infs {
		ids = append(ids, strings.Join(p.Identity(inf), "|"))
	}
	want := []string{
		"configmaps|a|||",
		"configmaps|b|||",
		"configmaps|a|app=x|metadata.name=n|",
		"configmaps||||",
		"configmaps||||", // alike: one identity, whichever came first
		"configmaps||||ctrl",
		"configmaps||||ctrl",
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("identities\n got %q\nwant %q", ids, want)
	}
	distinct := len(infs) - 2
	if n := gatheredSeries(t, reg, "freshinformer_pending_waiters"); n != distinct {
		t.Fatalf("pending_waiters has %d series for %d identities", n, distinct)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("promlint: %v %v", problems, err)
	}
}

// An identity's series stay while one of its informers runs, and go with
// the last one.
func TestIdentityLastsWhileOneInformerRuns(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	p, err := NewProvider(reg)
	if err != nil {
		t.Fatal(err)
	}
	s1, s2 := newStream("10"), newStream("10")
	first := cache.NewSharedIndexInformer(s1, &corev1.ConfigMap{}, 0, nil, cache.WithMetrics(p))
	second := cache.NewSharedIndexInformer(s2, &corev1.ConfigMap{}, 0, nil, cache.WithMetrics(p))
	stopFirst := run(t, first, s1)
	stopSecond := run(t, second, s2)
	if err := second.RecordWrite("10"); err != nil { // a histogram series
		t.Fatal(err)
	}
	stopFirst()
	if n := gatheredSeries(t, reg, "freshinformer_pending_waiters"); n != 1 {
		t.Fatalf("pending_waiters has %d series with one of two alike informers running", n)
	}
	if n := gatheredSeries(t, reg, "freshinformer_write_to_visible_seconds"); n != 1 {
		t.Fatalf("write_to_visible_seconds has %d series with one of two alike informers running", n)
	}
	stopSecond()
	if n := informerSeries(t, reg); n != 0 {
		t.Fatalf("%d series after both stopped", n)
	}
	// A late observation does not bring the series back.
	if err := second.RecordWrite("11"); err != nil {
		t.Fatal(err)
	}
	if n := informerSeries(t, reg); n != 0 {
		t.Fatalf("%d series after a write recorded on a stopped informer", n)
	}
}

// informerSeries counts the series of informers, leaving out the
// stale-read detector's process-wide counters (which stay once a detector
// watched a resource, in any test of the process).
func informerSeries(t *testing.T, reg prometheus.Gatherer) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		switch mf.GetName() {
		case "freshinformer_stale_reads_total", "freshinformer_stale_writes_total":
		default:
			n += len(mf.GetMetric())
		}
	}
	return n
}

func gatheredSeries(t *testing.T, reg prometheus.Gatherer, name string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}
