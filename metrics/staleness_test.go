package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/freshinformer/freshinformer/cache"
)

func TestStalenessGauge(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	p, err := NewProvider(reg)
	if err != nil {
		t.Fatal(err)
	}
	s := newStream("10")
	inf := cache.NewSharedIndexInformer(s, &corev1.ConfigMap{}, 0, nil, cache.WithMetrics(p), cache.WithName("demo"))
	run(t, inf, s)

	// No sample yet: no series (absence is honest, zero would claim freshness).
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasSuffix(mf.GetName(), "staleness_seconds") {
			t.Fatal("staleness exported before anything was known")
		}
	}

	// A write the cache has not reached: still unknown.
	if err := inf.RecordWrite("12"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	s.watcher.Modify(cm("12"))
	waitUntil(t, "the cache to reach 12", func() bool { return inf.LastObservedResourceVersion() == "12" })
	got := gathered(t, reg, "freshinformer_staleness_seconds")
	if got < 0.1 || got > 30 {
		t.Fatalf("staleness_seconds = %v, want about the time since the write was recorded (>= 0.1 s)", got)
	}
}
