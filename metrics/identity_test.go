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
		"/configmaps|a|||",
		"/configmaps|b|||",
		"/configmaps|a|app=x|metadata.name=n|",
		"/configmaps||||",
		"/configmaps||||#2",
		"/configmaps||||ctrl",
		"/configmaps||||ctrl#2",
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("identities\n got %q\nwant %q", ids, want)
	}
	if n := gatheredSeries(t, reg, "freshinformer_pending_waiters"); n != len(infs) {
		t.Fatalf("pending_waiters has %d series for %d informers", n, len(infs))
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("promlint: %v %v", problems, err)
	}
}

// A stopped informer frees its identity: the next one alike takes it.
func TestStoppedInformerFreesItsIdentity(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	p, err := NewProvider(reg)
	if err != nil {
		t.Fatal(err)
	}
	s := newStream("10")
	first := cache.NewSharedIndexInformer(s, &corev1.ConfigMap{}, 0, nil, cache.WithMetrics(p))
	stop := run(t, first, s)
	second := cache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.ConfigMap{}, 0, nil, cache.WithMetrics(p))
	if got := p.Identity(second)[4]; got != "#2" {
		t.Fatalf("second alike informer named %q", got)
	}
	stop()
	third := cache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.ConfigMap{}, 0, nil, cache.WithMetrics(p))
	if got := p.Identity(third)[4]; got != "" {
		t.Fatalf("the stopped informer's identity was not freed: %q", got)
	}
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
