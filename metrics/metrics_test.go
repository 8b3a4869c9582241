package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/freshinformer/freshinformer/cache"
)

func TestMain(m *testing.M) {
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m)
}

// stream is a scripted ListerWatcher: lists answer listRV (limit=1 lists,
// the probe, answer probeRV), the watch is a fake the test drives.
type stream struct {
	listRV, probeRV string
	watcher         *watch.RaceFreeFakeWatcher
	opened          chan struct{}
}

func newStream(listRV string) *stream {
	return &stream{listRV: listRV, watcher: watch.NewRaceFreeFake(), opened: make(chan struct{}, 1)}
}

func (s *stream) List(o metav1.ListOptions) (runtime.Object, error) {
	rv := s.listRV
	if o.Limit == 1 && s.probeRV != "" {
		rv = s.probeRV
	}
	return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: rv},
		Items: []corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", ResourceVersion: "8"}}}}, nil
}

func (s *stream) Watch(metav1.ListOptions) (watch.Interface, error) {
	s.opened <- struct{}{}
	return s.watcher, nil
}

func (*stream) IsWatchListSemanticsUnSupported() bool { return true }

func run(t *testing.T, inf *cache.FreshInformer, s *stream) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); inf.RunWithContext(ctx) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	<-s.opened
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("no sync")
	}
	return stop
}

func cm(rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", ResourceVersion: rv}}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestInformerMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	clock := testingclock.NewFakeClock(time.Unix(1_700_000_000, 0)) // whole seconds: exact as a float
	p, err := NewProvider(reg, func(o *Options) { o.Clock = clock })
	if err != nil {
		t.Fatal(err)
	}
	s := newStream("10")
	// No quiet probe: the script's consistent reads (at 10) would show a
	// server behind what its stream delivered (15): a restore.
	inf := cache.NewSharedIndexInformer(s, &corev1.ConfigMap{}, 0, nil, cache.WithMetrics(p), cache.WithName("demo"), cache.WithQuietProbeDelay(-1))
	run(t, inf, s)
	lv := []string{"configmaps", "", "", "", "demo"}
	ctx := context.Background()

	if err := inf.WaitForFreshness(ctx, "10"); err != nil {
		t.Fatal(err)
	}
	s.watcher.Action(watch.Bookmark, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "15"}})
	if err := inf.WaitForFreshness(ctx, "15"); err != nil {
		t.Fatal(err)
	}
	if err := inf.RecordWrite("20"); err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := inf.WaitForFreshness(tctx, "20"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	if err := inf.WaitForFreshness(ctx, "bad"); err == nil {
		t.Fatal("malformed target accepted")
	}

	expect := `
# HELP freshinformer_observed_resource_version Highest resource version the cache has applied (float64: exact up to 2^53).
# TYPE freshinformer_observed_resource_version gauge
freshinformer_observed_resource_version{field_selector="",informer_namespace="",label_selector="",name="demo",resource="configmaps"} 15
# HELP freshinformer_resource_version_lag Newest resource version known from the server (stream, recorded writes, optional probe) minus the observed one.
# TYPE freshinformer_resource_version_lag gauge
freshinformer_resource_version_lag{field_selector="",informer_namespace="",label_selector="",name="demo",resource="configmaps"} 5
# HELP freshinformer_bookmarks_total Watch bookmarks applied.
# TYPE freshinformer_bookmarks_total counter
freshinformer_bookmarks_total{field_selector="",informer_namespace="",label_selector="",name="demo",resource="configmaps"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expect), "freshinformer_observed_resource_version", "freshinformer_resource_version_lag", "freshinformer_bookmarks_total"); err != nil {
		t.Fatal(err)
	}
	for outcome, want := range map[string]float64{"fresh": 2, "timeout": 1, "incomparable": 1, "canceled": 0, "stopped": 0} {
		if got := testutil.ToFloat64(p.waits.WithLabelValues(append(lv, outcome)...)); got != want {
			t.Errorf("waits_total{outcome=%s} = %v, want %v", outcome, got, want)
		}
	}

	// The write becomes visible; an older update is rejected and counted.
	s.watcher.Modify(cm("20"))
	s.watcher.Modify(cm("19"))
	s.watcher.Action(watch.Bookmark, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "21"}})
	if err := inf.WaitForFreshness(ctx, "21"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(p.writeVisible); n != 1 {
		t.Fatalf("write_to_visible series = %d", n)
	}
	waitUntil(t, "write_to_visible sample", func() bool {
		return histogramCount(t, reg, "freshinformer_write_to_visible_seconds") == 1
	})
	if got := gathered(t, reg, "freshinformer_out_of_order_rejected_total"); got != 1 {
		t.Fatalf("out_of_order_rejected_total = %v", got)
	}
	if got := gathered(t, reg, "freshinformer_resource_version_lag"); got != 0 {
		t.Fatalf("lag after catching up = %v", got)
	}

	// The progress timestamp stays while nothing happens, and moves on
	// progress.
	progressed := float64(clock.Now().Unix())
	if got := gathered(t, reg, "freshinformer_last_progress_timestamp_seconds"); got != progressed {
		t.Fatalf("progress timestamp = %v, want %v", got, progressed)
	}
	clock.Step(90 * time.Second)
	if got := gathered(t, reg, "freshinformer_last_progress_timestamp_seconds"); got != progressed {
		t.Fatalf("progress timestamp without progress = %v, want %v", got, progressed)
	}
	s.watcher.Action(watch.Bookmark, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "30"}})
	if err := inf.WaitForFreshness(ctx, "30"); err != nil {
		t.Fatal(err)
	}
	if got := gathered(t, reg, "freshinformer_last_progress_timestamp_seconds"); got != progressed+90 {
		t.Fatalf("progress timestamp after a bookmark = %v, want %v", got, progressed+90)
	}

	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("promlint: %v %v", problems, err)
	}
}

func TestStoppedInformerLeavesNoSeries(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	p, err := NewProvider(reg)
	if err != nil {
		t.Fatal(err)
	}
	s := newStream("10")
	inf := cache.NewSharedIndexInformer(s, &corev1.ConfigMap{}, 0, nil, cache.WithMetrics(p))
	stop := run(t, inf, s)
	if err := inf.WaitForFreshness(context.Background(), "10"); err != nil {
		t.Fatal(err)
	}
	if n := informerSeries(t, reg); n == 0 {
		t.Fatal("no series while running")
	}
	stop()
	if n := informerSeries(t, reg); n != 0 {
		t.Fatalf("%d series left after stop", n)
	}
}

func TestLagProbe(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	clock := testingclock.NewFakeClock(time.Now())
	p, err := NewProvider(reg, WithLagProbe(time.Minute), func(o *Options) { o.Clock = clock })
	if err != nil {
		t.Fatal(err)
	}
	s := newStream("10")
	s.probeRV = "110"
	inf := cache.NewSharedIndexInformer(s, &corev1.ConfigMap{}, 0, nil, cache.WithMetrics(p))
	run(t, inf, s)
	if err := inf.WaitForFreshness(context.Background(), "10"); err != nil {
		t.Fatal(err)
	}
	if got := gathered(t, reg, "freshinformer_resource_version_lag"); got != 100 {
		t.Fatalf("lag with probe at 110 = %v, want 100", got)
	}
}

func TestRegisteringTwiceIsAnErrorThatNamesTheFirstProvider(t *testing.T) {
	reg := prometheus.NewRegistry()
	first, err := NewProvider(reg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewProvider(reg)
	var are prometheus.AlreadyRegisteredError
	if err == nil || !errors.As(err, &are) || !strings.Contains(err.Error(), "already registered") {
		t.Fatalf("second NewProvider on one registry = %v", err)
	}
	if are.ExistingCollector != first {
		t.Fatalf("ExistingCollector = %T %p, want the first Provider %p", are.ExistingCollector, are.ExistingCollector, first)
	}
	// Detailed metrics on a registry with the default ones: the series
	// overlap, so it is an error too, never a silent second set.
	if _, err := NewProvider(reg, WithDetailedMetrics()); err == nil {
		t.Fatal("a detailed Provider registered beside a default one")
	}
}

// metricNamed returns the first series of the named metric family.
func metricNamed(t *testing.T, reg prometheus.Gatherer, name string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0]
		}
	}
	return nil
}

// gathered returns a gauge's or counter's value.
func gathered(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	m := metricNamed(t, reg, name)
	if m == nil {
		t.Fatalf("no metric %s", name)
	}
	if g := m.GetGauge(); g != nil {
		return g.GetValue()
	}
	return m.GetCounter().GetValue()
}

func histogramCount(t *testing.T, reg prometheus.Gatherer, name string) uint64 {
	t.Helper()
	return metricNamed(t, reg, name).GetHistogram().GetSampleCount()
}
