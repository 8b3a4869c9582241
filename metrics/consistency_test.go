package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/freshinformer/freshinformer/consistency"
)

// The store's metrics: checks by outcome (all exported from the start),
// skips by the resource behind (as users write it), and the two
// histograms, under the store's name; one name registers once.
func TestConsistencyMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewConsistencyMetrics(reg, "replicaset")
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveEnsureReady(consistency.OutcomeReady, 0)
	m.ObserveEnsureReady(consistency.OutcomeWaited, 3*time.Millisecond)
	m.ObserveEnsureReady(consistency.OutcomeSkipped, 100*time.Millisecond)
	m.ObserveSkip(schema.GroupResource{Group: "apps", Resource: "replicasets"})
	m.ObserveFreshAfterSkip(20 * time.Millisecond)
	want := `
# HELP freshinformer_consistency_skips_total Syncs a consistency store skipped because a cache was still behind the owner's writes after the bounded wait, by the resource behind.
# TYPE freshinformer_consistency_skips_total counter
freshinformer_consistency_skips_total{name="replicaset",resource="replicasets.apps"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "freshinformer_consistency_skips_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.checks); n != len(consistency.Outcomes()) {
		t.Errorf("%d outcome series, want %d (bounded, all exported)", n, len(consistency.Outcomes()))
	}
	if got := testutil.ToFloat64(m.checks.WithLabelValues("waited")); got != 1 {
		t.Errorf("waited = %v", got)
	}
	if n := testutil.CollectAndCount(m.wait); n != 1 {
		t.Errorf("wait histogram series = %d", n)
	}
	if _, err := NewConsistencyMetrics(reg, "replicaset"); err == nil {
		t.Error("registering one name twice did not fail")
	}
	if _, err := NewConsistencyMetrics(reg, "job"); err != nil {
		t.Errorf("a second name: %v", err)
	}
}
