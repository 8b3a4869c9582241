package stalereads_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshtest"
	"github.com/freshinformer/freshinformer/internal/detector"
	"github.com/freshinformer/freshinformer/readyourwrites"
	"github.com/freshinformer/freshinformer/stalereads"
)

var configmaps = schema.GroupResource{Resource: "configmaps"}

// reports collects what a detector hands its handler.
type reports struct {
	mu  sync.Mutex
	got []stalereads.Report
}

func (r *reports) add(rep stalereads.Report) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, rep)
}

// take returns the reports since the last take.
func (r *reports) take() []stalereads.Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	return got
}

// fixture is a controller's view: a factory of FreshInformers over a
// stamping fake clientset whose watches a Lag holds, and read-your-writes
// recording the controller's writes.
type fixture struct {
	ctx    context.Context
	client *fake.Clientset
	lag    *freshtest.Lag
	lister corelisters.ConfigMapLister
	inf    *cache.FreshInformer
	ryw    *readyourwrites.ReadYourWrites
	owner  readyourwrites.Owner
	got    *reports
}

func newFixture(t *testing.T, opts ...cache.Option) *fixture {
	t.Helper()
	return newLoggingFixture(t, logr.Discard(), opts...)
}

// newLoggingFixture is newFixture with its informers run on logger.
func newLoggingFixture(t *testing.T, logger logr.Logger, opts ...cache.Option) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	f := &fixture{ctx: ctx, client: freshtest.NewClientset(), lag: freshtest.NewLag(), got: &reports{}}
	f.lag.Fake(&f.client.Fake)
	if opts == nil {
		opts = []cache.Option{cache.WithStaleReadDetection(f.got.add)}
	}
	factory := cache.NewSharedInformerFactory(f.client, 0, cache.WithInformerOptions(opts...))
	f.lister = factory.Core().V1().ConfigMaps().Lister()
	factory.StartWithContext(ctx)
	t.Cleanup(func() { f.lag.Release(); cancel(); factory.Shutdown() })
	factory.WaitForCacheSync(ctx.Done())
	f.inf = factory.FreshInformersForResource(configmaps)[0]
	f.ryw = readyourwrites.New(factory, 5*time.Second)
	f.owner = readyourwrites.OwnerOf(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "parent", UID: "p"}})
	return f
}

func (f *fixture) create(t *testing.T, name string) *corev1.ConfigMap {
	t.Helper()
	cm, err := f.client.CoreV1().ConfigMaps("ns").Create(f.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}, metav1.CreateOptions{})
	if err := f.ryw.Wrote(f.owner, cm, err); err != nil {
		t.Fatal(err)
	}
	return cm
}

func (f *fixture) update(t *testing.T, cm *corev1.ConfigMap, v string) *corev1.ConfigMap {
	t.Helper()
	cm = cm.DeepCopy()
	cm.Data = map[string]string{"v": v}
	cm, err := f.client.CoreV1().ConfigMaps("ns").Update(f.ctx, cm, metav1.UpdateOptions{})
	if err := f.ryw.Wrote(f.owner, cm, err); err != nil {
		t.Fatal(err)
	}
	return cm
}

func (f *fixture) fresh(t *testing.T) {
	t.Helper()
	if err := f.ryw.EnsureFresh(f.ctx, f.owner); err != nil {
		t.Fatal(err)
	}
}

func expectOne(t *testing.T, got []stalereads.Report, kind stalereads.Kind, op string) stalereads.Report {
	t.Helper()
	if len(got) != 1 {
		t.Fatalf("got %d reports, want one %v from %s: %v", len(got), kind, op, got)
	}
	r := got[0]
	if r.Kind != kind || r.Op != op || r.Resource != configmaps {
		t.Fatalf("got %v from %s of %s, want %v from %s of configmaps:\n%s", r.Kind, r.Op, r.Resource, kind, op, r)
	}
	return r
}

// A Get that returns the object as it was before this process's update is
// reported with both resource versions and the reading stack; once the
// cache has applied the write, the same Get is not.
func TestGetOlderThanOwnUpdate(t *testing.T) {
	f := newFixture(t)
	cm := f.create(t, "cm")
	f.fresh(t)
	f.lag.Hold()
	updated := f.update(t, cm, "1")

	got, err := f.lister.ConfigMaps("ns").Get("cm")
	if err != nil || got.ResourceVersion != cm.ResourceVersion {
		t.Fatalf("held cache: got %v, %v; want the object at %s", got, err, cm.ResourceVersion)
	}
	r := expectOne(t, f.got.take(), stalereads.ReadOlder, "GetByKey")
	if r.Key != "ns/cm" || r.ResourceVersion != cm.ResourceVersion || r.WrittenResourceVersion != updated.ResourceVersion || r.CacheResourceVersion == "" {
		t.Errorf("report: %+v", r)
	}
	if !strings.Contains(r.Stack, "TestGetOlderThanOwnUpdate") || strings.Contains(r.Stack, "internal/detector") {
		t.Errorf("stack does not start at the read:\n%s", r.Stack)
	}
	if s := r.String(); !strings.Contains(s, "WARNING: STALE READ") || !strings.Contains(s, updated.ResourceVersion) {
		t.Errorf("String:\n%s", s)
	}

	f.lag.Release()
	f.fresh(t)
	if _, err := f.lister.ConfigMaps("ns").Get("cm"); err != nil {
		t.Fatal(err)
	}
	if got := f.got.take(); len(got) != 0 {
		t.Errorf("reports after the cache caught up: %v", got)
	}
}

// A Get, a List and a namespace List that miss an object this process
// created are each reported; a list filtered by labels is checked on what
// the indexer returned (the namespace), before the lister filters it.
func TestReadsMissingOwnCreate(t *testing.T) {
	f := newFixture(t)
	f.create(t, "other")
	f.fresh(t)
	f.lag.Hold()
	created := f.create(t, "cm")

	if _, err := f.lister.ConfigMaps("ns").Get("cm"); !apierrors.IsNotFound(err) {
		t.Fatalf("held cache: Get: %v, want NotFound", err)
	}
	r := expectOne(t, f.got.take(), stalereads.ReadMissing, "GetByKey")
	if r.ResourceVersion != "" || r.WrittenResourceVersion != created.ResourceVersion {
		t.Errorf("report: %+v", r)
	}
	if _, err := f.lister.List(labels.Everything()); err != nil {
		t.Fatal(err)
	}
	expectOne(t, f.got.take(), stalereads.ReadMissing, "List")
	if _, err := f.lister.ConfigMaps("ns").List(labels.SelectorFromSet(labels.Set{"app": "x"})); err != nil {
		t.Fatal(err)
	}
	expectOne(t, f.got.take(), stalereads.ReadMissing, "Index")
	// Another namespace's list does not cover it.
	if _, err := f.lister.ConfigMaps("elsewhere").List(labels.Everything()); err != nil {
		t.Fatal(err)
	}
	if got := f.got.take(); len(got) != 0 {
		t.Errorf("list of another namespace reported: %v", got)
	}
}

// A read that returns an object this process deleted is reported, by UID.
func TestGetDeletedByOwnDelete(t *testing.T) {
	f := newFixture(t)
	cm := f.create(t, "cm")
	f.fresh(t)
	f.lag.Hold()
	err := f.client.CoreV1().ConfigMaps("ns").Delete(f.ctx, "cm", metav1.DeleteOptions{})
	if err := f.ryw.Deleted(f.owner, cm, err); err != nil {
		t.Fatal(err)
	}
	if _, err := f.lister.ConfigMaps("ns").Get("cm"); err != nil {
		t.Fatalf("held cache: %v, want the deleted object", err)
	}
	r := expectOne(t, f.got.take(), stalereads.ReadDeleted, "GetByKey")
	if r.UID != cm.UID {
		t.Errorf("report names uid %q, want %q", r.UID, cm.UID)
	}
	if _, err := f.lister.ConfigMaps("ns").List(labels.Everything()); err != nil {
		t.Fatal(err)
	}
	expectOne(t, f.got.take(), stalereads.ReadDeleted, "Index")
	f.lag.Release()
	f.fresh(t)
	if _, err := f.lister.ConfigMaps("ns").Get("cm"); !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if got := f.got.take(); len(got) != 0 {
		t.Errorf("reports after the cache caught up: %v", got)
	}
}

// A controller that waits for its writes reads nothing stale, whatever it
// writes: no report.
func TestNoReportAfterWaiting(t *testing.T) {
	f := newFixture(t)
	cms := map[string]*corev1.ConfigMap{}
	for i := range 20 {
		name := string(rune('a' + i%5))
		cm, ok := cms[name]
		if !ok {
			cm = f.create(t, name)
		} else {
			cm = f.update(t, cm, string(rune('0'+i)))
		}
		cms[name] = cm
		f.fresh(t)
		got, err := f.lister.ConfigMaps("ns").Get(name)
		if err != nil || got.ResourceVersion != cm.ResourceVersion {
			t.Fatalf("after waiting: %v, %v", got, err)
		}
		if _, err := f.lister.ConfigMaps("ns").List(labels.Everything()); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.got.take(); len(got) != 0 {
		t.Errorf("reports for fresh reads: %v", got)
	}
}

// Writes this process did not record (another actor's) are not reported:
// the cache is behind, but not behind anything this process knows.
func TestOthersWritesNotReported(t *testing.T) {
	f := newFixture(t)
	cm := f.create(t, "cm")
	f.fresh(t)
	f.lag.Hold()
	cm.Data = map[string]string{"v": "other"}
	if _, err := f.client.CoreV1().ConfigMaps("ns").Update(f.ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.CoreV1().ConfigMaps("ns").Create(f.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "new"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.lister.ConfigMaps("ns").Get("cm"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.lister.ConfigMaps("ns").List(labels.Everything()); err != nil {
		t.Fatal(err)
	}
	if got := f.got.take(); len(got) != 0 {
		t.Errorf("reports for writes this process did not make: %v", got)
	}
}

// Off by default: the informer hands out its plain indexer.
func TestOffByDefault(t *testing.T) {
	t.Setenv(stalereads.EnvVar, "")
	f := newFixture(t, cache.WithName("plain"))
	if detector.Of(f.inf.GetIndexer()) != nil {
		t.Fatal("GetIndexer returned a checking indexer without the option or the environment variable")
	}
}

// FRESHINFORMER_DEBUG=stalereads=1 turns it on for an informer made
// without the option: the read is counted (and logged).
func TestEnvironmentTurnsItOn(t *testing.T) {
	t.Setenv(stalereads.EnvVar, "gctrace=1,stalereads=1")
	f := newFixture(t, cache.WithName("env"))
	cm := f.create(t, "cm")
	f.fresh(t)
	f.lag.Hold()
	f.update(t, cm, "1")
	if _, err := f.lister.ConfigMaps("ns").Get("cm"); err != nil {
		t.Fatal(err)
	}
	if n, on := f.inf.StaleReads(); n != 1 || !on {
		t.Errorf("counted %d stale reads (on: %v), want 1", n, on)
	}
}

// logLines collects a logger's lines: the message and its key/value
// pairs.
type logLines struct {
	mu  sync.Mutex
	got []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.got = append(l.got, args)
	}, funcr.Options{})
}

// matching returns the lines that contain s.
func (l *logLines) matching(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var got []string
	for _, line := range l.got {
		if strings.Contains(line, s) {
			got = append(got, line)
		}
	}
	return got
}

// Switched on without a handler, an informer says so once, in its run's
// log, naming itself, its resource, its scope and the mode; its reports
// name the same informer.
func TestInformerSaysItIsOn(t *testing.T) {
	t.Setenv(stalereads.EnvVar, "")
	var log logLines
	f := newLoggingFixture(t, log.logger(), cache.WithName("children"), cache.WithStaleReadDetection(nil))
	on := log.matching("Stale-read detector on")
	if len(on) != 1 {
		t.Fatalf("said it is on %d times: %q", len(on), on)
	}
	for _, want := range []string{`"informer"="children"`, `"resource"="configmaps"`, `"scope"="all namespaces"`, `"mode"="log"`} {
		if !strings.Contains(on[0], want) {
			t.Errorf("%q lacks %s", on[0], want)
		}
	}
	cm := f.create(t, "cm")
	f.fresh(t)
	f.lag.Hold()
	f.update(t, cm, "1")
	if _, err := f.lister.ConfigMaps("ns").Get("cm"); err != nil {
		t.Fatal(err)
	}
	stale := log.matching("Stale read:")
	if len(stale) != 1 {
		t.Fatalf("logged %d stale reads: %q", len(stale), stale)
	}
	for _, want := range []string{`"informer"="children"`, `"resource"="configmaps"`, `"scope"="all namespaces"`, `"key"="ns/cm"`, `"stack"=`} {
		if !strings.Contains(stale[0], want) {
			t.Errorf("%q lacks %s", stale[0], want)
		}
	}
}

// With a handler, the handler takes the log's place: the report reaches
// it and is not logged, and the informer does not announce the detector;
// WithStaleReadLogging logs both as well.
func TestHandlerReplacesTheLog(t *testing.T) {
	t.Setenv(stalereads.EnvVar, "")
	for _, alsoLog := range []bool{false, true} {
		t.Run(fmt.Sprintf("alsoLog=%v", alsoLog), func(t *testing.T) {
			var log logLines
			got := &reports{}
			opts := []cache.Option{cache.WithStaleReadDetection(got.add)}
			if alsoLog {
				opts = append(opts, cache.WithStaleReadLogging())
			}
			f := newLoggingFixture(t, log.logger(), opts...)
			cm := f.create(t, "cm")
			f.fresh(t)
			f.lag.Hold()
			f.update(t, cm, "1")
			if _, err := f.lister.ConfigMaps("ns").Get("cm"); err != nil {
				t.Fatal(err)
			}
			expectOne(t, got.take(), stalereads.ReadOlder, "GetByKey")
			want := 0
			if alsoLog {
				want = 1
			}
			if n := len(log.matching("Stale read:")); n != want {
				t.Errorf("logged %d reports, want %d", n, want)
			}
			if n := len(log.matching("Stale-read detector on")); n != want {
				t.Errorf("said it is on %d times, want %d", n, want)
			}
		})
	}
}
