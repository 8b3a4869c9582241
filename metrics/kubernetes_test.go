package metrics

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
)

// targetLabels are the labels Prometheus' Kubernetes service discovery and
// the usual relabelling (kube-prometheus, prometheus-operator) put on every
// scraped series; a metric label of the same name becomes exported_<name>
// unless honor_labels is set.
var targetLabels = []string{"namespace", "pod", "container", "service", "endpoint", "job", "instance", "node"}

func TestLabelsNeverClashWithTargetLabels(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	p, err := NewProvider(reg, WithDetailedMetrics())
	if err != nil {
		t.Fatal(err)
	}
	s := newStream("10")
	inf := cache.NewSharedIndexInformer(s, &corev1.ConfigMap{}, 0, nil, cache.WithMetrics(p),
		cache.WithSelector(cache.Selector{Namespace: "ns"}))
	run(t, inf, s)
	if err := inf.RecordWrite("10"); err != nil {
		t.Fatal(err)
	}
	if err := inf.WaitForFreshness(context.Background(), "10"); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	scoped := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				for _, tl := range targetLabels {
					if l.GetName() == tl {
						t.Errorf("%s has label %q, which Prometheus' Kubernetes discovery also sets", mf.GetName(), tl)
					}
				}
				if l.GetName() == "informer_namespace" {
					scoped++
					if l.GetValue() != "ns" {
						t.Errorf("%s: informer_namespace=%q, want ns", mf.GetName(), l.GetValue())
					}
				}
			}
		}
	}
	if scoped == 0 {
		t.Fatal("no series carries the informer's namespace")
	}
}

// The resource label is written as users write it: schema.GroupResource's
// String, "configmaps", "deployments.apps".
func TestResourceLabelAsUsersWriteIt(t *testing.T) {
	p, err := NewProvider(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		obj  runtime.Object
		gr   schema.GroupResource
		want string
	}{
		{&corev1.ConfigMap{}, schema.GroupResource{Resource: "configmaps"}, "configmaps"},
		{&appsv1.Deployment{}, schema.GroupResource{Group: "apps", Resource: "deployments"}, "deployments.apps"},
	} {
		inf := cache.NewSharedIndexInformer(&toolscache.ListWatch{}, c.obj, 0, nil, cache.WithMetrics(p), cache.WithResource(c.gr))
		if got := p.Identity(inf)[0]; got != c.want {
			t.Errorf("resource label of %v = %q, want %q", c.gr, got, c.want)
		}
	}
}

// Two informers of one scope and name get one identity, whichever is made
// first: the series are the same across restarts, and the scrape succeeds.
// Their series report both (counters summed, gauges the worse), and stay
// until the last one stops.
func TestAlikeInformersShareAStableIdentity(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	p, err := NewProvider(reg)
	if err != nil {
		t.Fatal(err)
	}
	s1, s2 := newStream("10"), newStream("30")
	first := cache.NewSharedIndexInformer(s1, &corev1.ConfigMap{}, 0, nil, cache.WithMetrics(p), cache.WithName("ctrl"))
	second := cache.NewSharedIndexInformer(s2, &corev1.ConfigMap{}, 0, nil, cache.WithMetrics(p), cache.WithName("ctrl"))
	if a, b := strings.Join(p.Identity(first), "|"), strings.Join(p.Identity(second), "|"); a != b || a != "configmaps||||ctrl" {
		t.Fatalf("alike informers' identities %q and %q, want both %q", a, b, "configmaps||||ctrl")
	}
	stopFirst := run(t, first, s1)
	run(t, second, s2)
	if n := gatheredSeries(t, reg, "freshinformer_lists_total"); n != 1 {
		t.Fatalf("lists_total has %d series for two alike informers, want 1", n)
	}
	if got := gathered(t, reg, "freshinformer_lists_total"); got != 2 {
		t.Fatalf("lists_total = %v, want both informers' lists (2)", got)
	}
	if got := gathered(t, reg, "freshinformer_observed_resource_version"); got != 10 {
		t.Fatalf("observed_resource_version = %v, want the lower of 10 and 30", got)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("promlint: %v %v", problems, err)
	}
	stopFirst()
	if got := gathered(t, reg, "freshinformer_observed_resource_version"); got != 30 {
		t.Fatalf("observed_resource_version after the first stopped = %v, want 30", got)
	}
}

// TestSeriesBudget measures what a controller-runtime cache on 100
// namespaces and 5 kinds exports by default (docs/metrics.md): one
// informer per namespace and kind, each waited on and with a write
// recorded, so every default series exists.
func TestSeriesBudget(t *testing.T) {
	const namespaces, kinds = 100, 5
	for _, c := range []struct {
		name   string
		opts   []Option
		budget int
	}{
		{"default", nil, SeriesPerInformer},
		{"detailed", []Option{WithDetailedMetrics()}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			p, err := NewProvider(reg, c.opts...)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			defer func() { cancel(); wg.Wait() }()
			var infs []*cache.FreshInformer
			for k := range kinds {
				gr := schema.GroupResource{Group: fmt.Sprintf("kind%d.example.com", k), Resource: "things"}
				for n := range namespaces {
					s := newStream("10")
					inf := cache.NewSharedIndexInformer(s, &corev1.ConfigMap{}, 0, nil, cache.WithMetrics(p),
						cache.WithResource(gr), cache.WithSelector(cache.Selector{Namespace: fmt.Sprintf("ns-%d", n)}))
					wg.Add(1)
					go func() { defer wg.Done(); inf.RunWithContext(ctx) }()
					infs = append(infs, inf)
				}
			}
			synced := make([]toolscache.InformerSynced, len(infs))
			for i, inf := range infs {
				synced[i] = inf.HasSynced
			}
			if !toolscache.WaitForCacheSync(ctx.Done(), synced...) {
				t.Fatal("the informers did not sync")
			}
			for _, inf := range infs {
				// The list is applied: the write is visible at once.
				if err := inf.RecordWrite("10"); err != nil {
					t.Fatal(err)
				}
			}
			if n := histogramCountSum(t, reg, "freshinformer_write_to_visible_seconds"); n != uint64(len(infs)) {
				t.Fatalf("%d writes observed, want %d", n, len(infs))
			}
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			total := 0
			perFamily := map[string]int{}
			for _, mf := range mfs {
				n := len(mf.GetMetric())
				if h := mf.GetMetric(); len(h) > 0 && h[0].GetHistogram() != nil {
					n *= len(h[0].GetHistogram().GetBucket()) + 3 // buckets, +Inf, _sum, _count
				}
				perFamily[mf.GetName()] = n / len(infs)
				total += n
			}
			per := float64(total) / float64(len(infs))
			var lines []string
			for name, n := range perFamily {
				lines = append(lines, fmt.Sprintf("%s %d", name, n))
			}
			sort.Strings(lines)
			t.Logf("%s: %d informers (%d namespaces x %d kinds) export %d series, %.1f per informer:\n%s",
				c.name, len(infs), namespaces, kinds, total, per, strings.Join(lines, "\n"))
			if c.budget > 0 && per > float64(c.budget) {
				t.Errorf("%.1f series per informer, budget %d", per, c.budget)
			}
			// promlint on one series of each family: it checks names, units
			// and help, and takes seconds on all 10000 under -race.
			for _, mf := range mfs {
				mf.Metric = mf.Metric[:1]
			}
			problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
			if err != nil || len(problems) > 0 {
				t.Fatalf("promlint: %v %v", problems, err)
			}
		})
	}
}

// histogramCountSum adds the sample counts of every series of a histogram.
func histogramCountSum(t *testing.T, reg prometheus.Gatherer, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}
