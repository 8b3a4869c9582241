package detector

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/stalereads"
)

func TestMain(m *testing.M) {
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m)
}

func rv(s string) freshness.RV {
	r, err := freshness.ParseRV(s)
	if err != nil {
		panic(err)
	}
	return r
}

func cm(name, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv, UID: types.UID("uid-" + name)}}
}

// setup is a Detector over an indexer and a tracker at applied, with its
// reports collected.
type setup struct {
	d       *Detector
	tracker *freshness.Tracker
	idx     toolscache.Indexer
	view    toolscache.Indexer
	mu      sync.Mutex
	got     []stalereads.Report
	inScope bool
}

func newSetup(t *testing.T, applied string) *setup {
	s := &setup{tracker: &freshness.Tracker{}, inScope: true,
		idx: toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})}
	s.tracker.Advance(rv(applied))
	s.d = New(Config{Resource: schema.GroupResource{Resource: "configmaps"}, Informer: "test", Indexer: s.idx,
		Applied: s.tracker.Current, AfterApplied: func(rv freshness.RV, fn func(error)) { s.tracker.AfterFunc(rv, fn) },
		InScope: func(metav1.Object) bool { return s.inScope }, OnReport: s.add})
	s.view = s.d.View(s.idx)
	t.Cleanup(s.tracker.Stop)
	return s
}

func (s *setup) add(r stalereads.Report) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, r)
}

func (s *setup) take() []stalereads.Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	got := s.got
	s.got = nil
	return got
}

func (s *setup) kinds() []stalereads.Kind {
	var ks []stalereads.Kind
	for _, r := range s.take() {
		ks = append(ks, r.Kind)
	}
	return ks
}

func TestParseEnv(t *testing.T) {
	for in, want := range map[string]Mode{
		"":                          Off,
		"stalereads=1":              On,
		"stalereads=halt":           Halt,
		"stalereads=0":              Off,
		"gctrace=1, stalereads=1":   On,
		"stalereads=1,stalereads=0": Off, // the last one wins, as in GODEBUG
		"stalereads=yes":            Off,
		"stalereadsx=1":             Off,
	} {
		if got := parse(in); got != want {
			t.Errorf("parse(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestNextRV(t *testing.T) {
	for in, want := range map[string]string{"": "1", "9": "10", "18446744073709551614": "18446744073709551615"} {
		got, ok := nextRV(freshness.RV{})
		if in != "" {
			got, ok = nextRV(rv(in))
		}
		if !ok || got.String() != want {
			t.Errorf("nextRV(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if _, ok := nextRV(rv("18446744073709551615")); ok {
		t.Error("nextRV past 64 bits succeeded")
	}
}

// Each kind of stale read, and the reads that are not stale.
func TestJudgesReads(t *testing.T) {
	s := newSetup(t, "10")
	_ = s.idx.Add(cm("a", "5"))
	_ = s.idx.Add(cm("gone", "6"))
	s.d.Wrote(cm("a", "12"))     // cached at 5: older
	s.d.Wrote(cm("b", "13"))     // created, not cached: missing
	s.d.Deleted(cm("gone", "6")) // still cached alive: deleted
	s.d.Wrote(cm("fresh", "9"))  // the cache applied it already: not recorded
	if n := s.d.pending.Load(); n != 3 {
		t.Fatalf("%d writes pending, want 3", n)
	}

	for _, c := range []struct {
		key  string
		want []stalereads.Kind
	}{
		{"ns/a", []stalereads.Kind{stalereads.ReadOlder}},
		{"ns/b", []stalereads.Kind{stalereads.ReadMissing}},
		{"ns/gone", []stalereads.Kind{stalereads.ReadDeleted}},
		{"ns/fresh", nil},
		{"ns/unwritten", nil},
		{"other/a", nil},
	} {
		if _, _, err := s.view.GetByKey(c.key); err != nil {
			t.Fatal(err)
		}
		if got := s.kinds(); !equalKinds(got, c.want) {
			t.Errorf("GetByKey(%s): %v, want %v", c.key, got, c.want)
		}
	}
	if _, _, err := s.view.Get(cm("a", "")); err != nil {
		t.Fatal(err)
	}
	if got := s.kinds(); !equalKinds(got, []stalereads.Kind{stalereads.ReadOlder}) {
		t.Errorf("Get: %v", got)
	}
	s.view.List()
	if got := s.kinds(); len(got) != 3 {
		t.Errorf("List: %v, want all three", got)
	}
	if _, err := s.view.ByIndex(toolscache.NamespaceIndex, "ns"); err != nil {
		t.Fatal(err)
	}
	if got := s.kinds(); len(got) != 3 {
		t.Errorf("ByIndex(namespace): %v, want all three", got)
	}
	if _, err := s.view.ByIndex(toolscache.NamespaceIndex, "other"); err != nil {
		t.Fatal(err)
	}
	if got := s.kinds(); len(got) != 0 {
		t.Errorf("ByIndex(other namespace): %v", got)
	}

	// The cache applies the writes: the same reads are not stale.
	_ = s.idx.Update(cm("a", "12"))
	_ = s.idx.Add(cm("b", "13"))
	_ = s.idx.Delete(cm("gone", "6"))
	s.tracker.Advance(rv("13"))
	s.view.List()
	for _, k := range []string{"ns/a", "ns/b", "ns/gone"} {
		_, _, _ = s.view.GetByKey(k)
	}
	if got := s.take(); len(got) != 0 {
		t.Errorf("reads after the cache applied the writes: %v", got)
	}
	if n := s.d.pending.Load(); n != 0 {
		t.Errorf("%d writes still pending once applied", n)
	}
	f := s.d.filters.Load()
	for i := range f.byKey {
		if f.byKey[i].Load() != 0 || f.byName[i].Load() != 0 {
			t.Fatalf("filter word %d not cleared", i)
		}
	}
}

func equalKinds(a, b []stalereads.Kind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// An absent object is reported only when the write certainly put it in
// the informer's scope, and only while the cache has not applied it: the
// object may be gone since, deleted by another actor.
func TestMissingOnlyWhenCertain(t *testing.T) {
	s := newSetup(t, "10")
	s.inScope = false
	s.d.Wrote(cm("moved-out", "11"))
	s.inScope = true
	s.d.Wrote(cm("created", "12"))
	_, _, _ = s.view.GetByKey("ns/moved-out")
	if got := s.take(); len(got) != 0 {
		t.Errorf("absent object out of scope reported: %v", got)
	}
	e, cur, check := s.d.beforeGet(objKey{"ns", "created"})
	if !check {
		t.Fatal("nothing to check")
	}
	s.tracker.Advance(rv("13")) // applied, then deleted by someone else, during the read
	s.d.afterGet("GetByKey", objKey{"ns", "created"}, e, cur, nil, false)
	if got := s.take(); len(got) != 0 {
		t.Errorf("absent object the cache caught up with during the read reported: %v", got)
	}
}

// A list checks only the writes recorded before it began.
func TestListIgnoresWritesDuringIt(t *testing.T) {
	s := newSetup(t, "10")
	b := s.d.before()
	s.d.Wrote(cm("late", "11"))
	s.d.checkList("List", b, nil, listScope{all: true, missing: true})
	if got := s.take(); len(got) != 0 {
		t.Errorf("write recorded during the list reported: %v", got)
	}
	s.d.checkList("List", s.d.before(), nil, listScope{all: true, missing: true})
	if got := s.kinds(); !equalKinds(got, []stalereads.Kind{stalereads.ReadMissing}) {
		t.Errorf("list after the write: %v", got)
	}
}

// A key's newest write wins; a delete always replaces a write.
func TestNewestWriteKept(t *testing.T) {
	s := newSetup(t, "1")
	s.d.Wrote(cm("a", "20"))
	s.d.Wrote(cm("a", "15"))
	if e, _ := s.d.lookup(objKey{"ns", "a"}); e.rv.String() != "20" {
		t.Errorf("kept %s, want 20", e.rv)
	}
	_ = s.idx.Add(cm("a", "20"))
	s.d.Deleted(cm("a", "3"))
	if e, _ := s.d.lookup(objKey{"ns", "a"}); !e.deleted {
		t.Error("delete did not replace the write")
	}
	if n := s.d.pending.Load(); n != 1 {
		t.Errorf("%d pending, want 1", n)
	}
}

// Memory: at most MaxEntries writes pending, however far behind the cache.
func TestBoundedEntries(t *testing.T) {
	s := newSetup(t, "1")
	for i := range MaxEntries + 100 {
		s.d.Wrote(cm("k"+strconv.Itoa(i), strconv.Itoa(i+2)))
	}
	if n := s.d.pending.Load(); n != MaxEntries {
		t.Errorf("%d pending, want the bound %d", n, MaxEntries)
	}
	s.d.Reset()
	if n := s.d.pending.Load(); n != 0 || len(s.d.entries) != 0 {
		t.Errorf("after Reset: %d pending, %d entries", n, len(s.d.entries))
	}
}

// A delete the cache shows is pruned at the cache's next step.
func TestDeletePrunedWhenShown(t *testing.T) {
	s := newSetup(t, "10")
	_ = s.idx.Add(cm("a", "5"))
	s.d.Deleted(cm("a", "5"))
	if s.d.pending.Load() != 1 {
		t.Fatal("delete not recorded")
	}
	_ = s.idx.Delete(cm("a", "5"))
	s.tracker.Advance(rv("11"))
	if n := s.d.pending.Load(); n != 0 {
		t.Errorf("%d pending after the cache showed the delete", n)
	}
	s.d.Deleted(cm("never-cached", "5"))
	if n := s.d.pending.Load(); n != 0 {
		t.Errorf("a delete of an object the cache does not hold was recorded")
	}
}

// The informer stopping drops every write.
func TestStopDropsWrites(t *testing.T) {
	s := newSetup(t, "10")
	s.d.Wrote(cm("a", "11"))
	s.tracker.Stop()
	if n := s.d.pending.Load(); n != 0 {
		t.Errorf("%d pending after stop", n)
	}
}

// lines collects what a logger logs, one string per line: the message
// and its key/value pairs.
type lines struct {
	mu  sync.Mutex
	got []string
}

func (l *lines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.got = append(l.got, args)
	}, funcr.Options{})
}

func (l *lines) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	got := l.got
	l.got = nil
	return got
}

func TestReporterRateLimit(t *testing.T) {
	var log lines
	var handled []stalereads.Report
	var counted int
	r := newReporter(output{Handler: func(rep stalereads.Report) { handled = append(handled, rep) }, LogReports: true},
		func(stalereads.Report) { counted++ }, log.logger())
	rep := stalereads.Report{Kind: stalereads.ReadOlder, Resource: schema.GroupResource{Resource: "rate-limit-test"}}
	for range logBurst + 5 {
		r.report(rep)
	}
	logged := log.take()
	if len(handled) != logBurst+5 || len(logged) != logBurst {
		t.Fatalf("handled %d, logged %d; want %d and %d", len(handled), len(logged), logBurst+5, logBurst)
	}
	for i, h := range handled {
		if (h.Stack != "") != (i < logBurst) {
			t.Errorf("report %d: stack %q (only logged reports get one)", i, h.Stack)
		}
	}
	r.mu.Lock()
	r.last = r.last.Add(-2 * time.Second) // two tokens back
	r.mu.Unlock()
	r.report(rep)
	if logged = log.take(); len(logged) != 1 || !strings.Contains(logged[0], `"notLoggedBefore"=5`) {
		t.Errorf("after a pause: %q", logged)
	}
	if counted != logBurst+6 {
		t.Errorf("counted %d", counted)
	}
}

// A handler takes the log's place: its reports are not logged, nor does
// the detector say it is on, unless LogReports asks for both. Without a
// handler, each report is logged.
func TestHandlerTakesTheLogsPlace(t *testing.T) {
	for _, c := range []struct {
		name         string
		handler      bool
		logReports   bool
		wantLogged   int
		wantAnnounce bool
	}{
		{"no handler", false, false, 1, true},
		{"handler", true, false, 0, false},
		{"handler, also logged", true, true, 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var log lines
			s := newSetup(t, "10")
			cfg := s.d.cfg
			cfg.OnReport, cfg.LogReports = nil, c.logReports
			handled := 0
			if c.handler {
				cfg.OnReport = func(stalereads.Report) { handled++ }
			}
			s.d = New(cfg)
			s.view = s.d.View(s.idx)
			s.d.Started(log.logger())
			s.d.Started(log.logger()) // once
			announced := log.take()
			if c.wantAnnounce != (len(announced) == 1) || len(announced) > 1 {
				t.Errorf("announced %q, want it %v, once", announced, c.wantAnnounce)
			}
			s.d.Wrote(cm("a", "11"))
			if _, ok, _ := s.view.GetByKey("ns/a"); ok {
				t.Fatal("the indexer holds the key")
			}
			if got := log.take(); len(got) != c.wantLogged {
				t.Errorf("logged %d lines, want %d: %q", len(got), c.wantLogged, got)
			}
			if c.handler && handled != 1 {
				t.Errorf("the handler got %d reports, want 1", handled)
			}
			if s.d.Reported() != 1 {
				t.Errorf("counted %d, want 1", s.d.Reported())
			}
		})
	}
}

// Said once, the detector's line names the informer, its resource and
// scope (the run's logger carries the first two, as
// FreshInformer.RunWithContext makes it) and the mode.
func TestStartedSaysWhatItWatches(t *testing.T) {
	var log lines
	d := New(Config{Resource: schema.GroupResource{Group: "apps", Resource: "deployments"}, Informer: "web", Scope: "namespace team-a", Halt: true})
	d.Started(informerLogger(log.logger(), d.cfg))
	got := log.take()
	want := []string{`"informer"="web"`, `"resource"="deployments.apps"`, `"scope"="namespace team-a"`, `"mode"="halt"`, `"env"="FRESHINFORMER_DEBUG"`}
	if len(got) != 1 {
		t.Fatalf("logged %q, want one line", got)
	}
	for _, w := range want {
		if !strings.Contains(got[0], w) {
			t.Errorf("the line %q lacks %s", got[0], w)
		}
	}
}

// Halt mode fails through the detector's own failure func at a report no
// handler takes, after logging it with its stack; a handler takes the
// report instead.
func TestHaltFailsThroughTheFailureFunc(t *testing.T) {
	var log lines
	var failed []stalereads.Report
	fail := func(r stalereads.Report) { failed = append(failed, r) }
	newReporter(output{Handler: func(stalereads.Report) {}, Halt: true, Fail: fail}, func(stalereads.Report) {}, log.logger()).
		report(stalereads.Report{Kind: stalereads.ReadOlder})
	if len(failed) != 0 {
		t.Fatalf("failed with a handler")
	}
	newReporter(output{Halt: true, Fail: fail}, func(stalereads.Report) {}, log.logger()).
		report(stalereads.Report{Kind: stalereads.ReadOlder, Key: "ns/a"})
	if len(failed) != 1 || failed[0].Key != "ns/a" || failed[0].Stack == "" {
		t.Fatalf("failed with %+v, want the report with its stack", failed)
	}
	if got := log.take(); len(got) != 2 || !strings.Contains(got[0], `"key"="ns/a"`) || !strings.Contains(got[1], "stalereads=halt") {
		t.Errorf("logged %q, want the report, then the failure", got)
	}
}

// By default halt mode panics with the report on the reading goroutine,
// as client-go's cache mutation detector does; it never exits.
func TestHaltPanicsByDefault(t *testing.T) {
	s := newSetup(t, "10")
	cfg := s.d.cfg
	cfg.OnReport, cfg.Halt = nil, true
	s.d = New(cfg)
	s.d.Wrote(cm("a", "11"))
	var got any
	func() {
		defer func() { got = recover() }()
		_, _, _ = s.d.View(s.idx).GetByKey("ns/a")
	}()
	msg, ok := got.(string)
	if !ok || !strings.Contains(msg, "stalereads=halt") || !strings.Contains(msg, "WARNING: STALE READ") || !strings.Contains(msg, "configmaps ns/a") {
		t.Fatalf("panicked with %#v, want the report", got)
	}
}

// The stack leaves this package's frames out (the tests' too, being in
// it: package stalereads' tests check it starts at the read).
func TestStackLeavesThisPackageOut(t *testing.T) {
	stack := callerStack()
	first, _, _ := strings.Cut(strings.TrimSpace(stack), "\n")
	if strings.Contains(stack, thisPackage()) || first != "testing.tRunner()" {
		t.Errorf("stack:\n%s", stack)
	}
}

// Each slot's counter is its own: counting up and down in one half of a
// word leaves the other as it was.
func TestFilterSlots(t *testing.T) {
	var f filter
	for range 3 {
		f.add(5, 1) // word 2, high half
	}
	f.add(4, 1) // word 2, low half
	if !f.has(4) || !f.has(5) || f.has(6) || f.has(5+slotCount*2) != true {
		t.Fatal("has after adds")
	}
	f.add(4, -1)
	if f.has(4) || !f.has(5) || f[2].Load() != 3<<16 {
		t.Fatalf("after removing the low half's one: word %#x", f[2].Load())
	}
	for range 3 {
		f.add(5, -1)
	}
	if f[2].Load() != 0 {
		t.Fatalf("word %#x, want 0", f[2].Load())
	}
}

func TestWritesCheck(t *testing.T) {
	var got []stalereads.Report
	counted := map[schema.GroupResource]int{}
	w := NewWrites(WritesConfig{OnReport: func(r stalereads.Report) { got = append(got, r) }, Count: func(gr schema.GroupResource, n int) { counted[gr] += n }})
	k := WriteKey{Host: "h", Resource: schema.GroupResource{Resource: "configmaps"}, Namespace: "ns", Name: "a"}
	w.Wrote(k, "10")
	if n, ok := counted[k.Resource]; !ok || n != 0 {
		t.Fatalf("counted %v after a write, want the resource at 0", counted)
	}
	w.Wrote(k, "8") // older: ignored
	for _, sent := range []string{"10", "11", "", "x"} {
		w.Check(logr.Discard(), k, "update", sent)
	}
	other := k
	other.Host = "elsewhere"
	w.Check(logr.Discard(), other, "update", "9")
	if len(got) != 0 {
		t.Fatalf("reported %v", got)
	}
	w.Check(logr.Discard(), k, "patch", "9")
	if len(got) != 1 || got[0].Kind != stalereads.WriteOlder || got[0].WrittenResourceVersion != "10" || got[0].ResourceVersion != "9" || got[0].Op != "patch" {
		t.Fatalf("reported %+v", got)
	}
	if counted[k.Resource] != 1 {
		t.Fatalf("counted %v, want 1 stale write of configmaps", counted)
	}
	for i := range MaxEntries {
		w.Wrote(WriteKey{Host: "h", Name: strconv.Itoa(i)}, "20")
	}
	if len(w.last) != MaxEntries {
		t.Errorf("%d keys remembered, want the bound %d", len(w.last), MaxEntries)
	}
	w.Check(logr.Discard(), k, "update", "9") // forgotten: the oldest goes first
	if len(got) != 1 {
		t.Errorf("a forgotten key was checked")
	}
}
