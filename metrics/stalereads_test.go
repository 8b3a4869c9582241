package metrics

import (
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/internal/detector"
	"github.com/freshinformer/freshinformer/stalereads"
)

var staleCounterRuns atomic.Int64

// The detector's counters are exported per resource, from zero, once an
// informer of the resource detects; a resource nothing detects on has no
// series.
func TestStaleReadCounters(t *testing.T) {
	t.Setenv(stalereads.EnvVar, "")
	reg := prometheus.NewRegistry()
	if _, err := NewProvider(reg); err != nil {
		t.Fatal(err)
	}
	// The counts are the process's: a resource of its own for each run
	// (-count).
	gr := schema.GroupResource{Group: "example.com", Resource: "counted-" + strconv.FormatInt(staleCounterRuns.Add(1), 10)}
	staleSeries := func() map[string]float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == gr.String() {
					got[mf.GetName()] = m.GetCounter().GetValue()
				}
			}
		}
		return got
	}
	if got := staleSeries(); len(got) != 0 {
		t.Fatalf("series before any detector: %v", got)
	}
	cache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.ConfigMap{}, 0, nil, cache.WithResource(gr), cache.WithStaleReadDetection(nil))
	if got := staleSeries(); len(got) != 2 || got["freshinformer_stale_reads_total"] != 0 || got["freshinformer_stale_writes_total"] != 0 {
		t.Fatalf("series of a detecting informer: %v", got)
	}
	detector.CountsFor(gr).Reads.Add(3)
	detector.CountsFor(gr).Writes.Add(2)
	if got := staleSeries(); got["freshinformer_stale_reads_total"] != 3 || got["freshinformer_stale_writes_total"] != 2 {
		t.Fatalf("after 3 stale reads and 2 stale writes: %v", got)
	}
}
