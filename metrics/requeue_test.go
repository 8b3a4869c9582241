package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/freshinformer/freshinformer/requeue"
)

func TestRequeueMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewRequeueMetrics(reg, "ctl")
	if err != nil {
		t.Fatal(err)
	}
	m.SetParked(3)
	m.ObserveRequeue(requeue.OutcomeFresh, 2*time.Millisecond)
	m.ObserveRequeue(requeue.OutcomeMaxPark, 10*time.Second)
	m.SetParked(1)
	want := `
# HELP freshinformer_requeue_parked_keys Workqueue keys parked until the informer caches hold their owner's writes.
# TYPE freshinformer_requeue_parked_keys gauge
freshinformer_requeue_parked_keys{name="ctl"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "freshinformer_requeue_parked_keys"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.wait); n != 4 {
		t.Errorf("%d outcome series, want 4 (bounded, all exported)", n)
	}
	if got := testutil.ToFloat64(m.parked); got != 1 {
		t.Errorf("parked = %v", got)
	}
	if _, err := NewRequeueMetrics(reg, "ctl"); err == nil {
		t.Error("registering one name twice did not fail")
	}
	if _, err := NewRequeueMetrics(reg, "other"); err != nil {
		t.Errorf("a second name: %v", err)
	}
}
