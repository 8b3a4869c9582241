package prove

import (
	"context"
	"slices"
	"sync"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/informertest"
	"github.com/freshinformer/freshinformer/internal/recorded"
	"github.com/freshinformer/freshinformer/internal/trust"
	"github.com/freshinformer/freshinformer/reflector"
)

// cm and rv are informertest's.
var (
	cm = informertest.ConfigMap
	rv = informertest.RV
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeInformer is an informer as a Prover sees it: a trust view, a cache
// of keys at resource versions, and a record of the evidence handed in.
type fakeInformer struct {
	mu    sync.Mutex // the apply lock: Compare holds it
	view  trust.View
	floor freshness.RV
	cache fakeCache

	tooLarge []freshness.RV // servers of TooLarge calls
	tooSeq   []uint64
}

type fakeCache struct {
	inf       *fakeInformer
	objs      map[string]string // key to cached resource version
	delivered []freshness.RV
	written   recorded.Keys
	proved    []freshness.RV
	restores  []reflector.Regression
	found     []reflector.Regression
}

func newFake(t *testing.T, applied string, objs map[string]string) *fakeInformer {
	f := &fakeInformer{view: trust.View{State: trust.Trusted, Applied: rv(t, applied)}, floor: rv(t, applied)}
	f.cache = fakeCache{inf: f, objs: objs}
	return f
}

func (f *fakeInformer) View() trust.View { f.mu.Lock(); defer f.mu.Unlock(); return f.view }
func (f *fakeInformer) Compare(fn func(c Cache)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.cache)
}
func (f *fakeInformer) TooLarge(server freshness.RV, seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tooLarge, f.tooSeq = append(f.tooLarge, server), append(f.tooSeq, seq)
}
func (f *fakeInformer) Checking()                 {}
func (f *fakeInformer) CheckDone()                {}
func (f *fakeInformer) Answered(trust.Stamp)      {}
func (f *fakeInformer) Floor() freshness.RV       { f.mu.Lock(); defer f.mu.Unlock(); return f.floor }
func (f *fakeInformer) RelistPending() bool       { return false }
func (f *fakeInformer) RequestRelist()            {}
func (f *fakeInformer) Bookmarked() bool          { return true }
func (f *fakeInformer) Log() klog.Logger          { return klog.Background() }
func (c *fakeCache) Len() int                     { return len(c.objs) }
func (c *fakeCache) Written() *recorded.Keys      { return &c.written }
func (c *fakeCache) Found(r reflector.Regression) { c.found = append(c.found, r) }
func (c *fakeCache) Position() (trust.State, freshness.RV) {
	return c.inf.view.State, c.inf.view.Applied
}
func (c *fakeCache) CachedRV(key string) (string, bool) { s, ok := c.objs[key]; return s, ok }
func (c *fakeCache) Delivered(rv freshness.RV) bool     { return slices.Contains(c.delivered, rv) }
func (c *fakeCache) Proved(rv freshness.RV, _ trust.Stamp) bool {
	c.proved = append(c.proved, rv)
	c.inf.view.Applied = rv
	return true
}
func (c *fakeCache) ProvedGap(_, _ freshness.RV, _ trust.Stamp) {}
func (c *fakeCache) Restore(r reflector.Regression, _ trust.Stamp) {
	c.restores = append(c.restores, r)
	c.inf.view.State, c.inf.view.Applied = trust.Restoring, freshness.RV{}
}

func snap(t *testing.T, at, floor string, items ...runtime.Object) Snapshot {
	return Snapshot{RV: rv(t, at), Floor: rv(t, floor), Items: items, Complete: true}
}

// A snapshot that holds exactly the cached keys at the cached resource
// versions proves the cache holds the server's state at its resource
// version: applied moves there, and the match is counted.
func TestSnapshotThatMatchesMovesApplied(t *testing.T) {
	f := newFake(t, "10", map[string]string{"ns/a": "5", "ns/b": "9"})
	p := New(Config{SnapshotLimit: DefaultSnapshotLimit}, f)
	if !p.CompareSnapshot(snap(t, "12", "10", cm("a", "5"), cm("b", "9")), trust.Stamp{}, true) {
		t.Fatal("a matching snapshot proved nothing")
	}
	if !slices.Equal(f.cache.proved, []freshness.RV{rv(t, "12")}) || len(f.cache.restores) != 0 {
		t.Fatalf("proved %v, restores %v; want 12 proved and no restore", f.cache.proved, f.cache.restores)
	}
	if got := p.Stats().SnapshotMatches; got != 1 {
		t.Fatalf("SnapshotMatches = %d, want 1", got)
	}
}

// A snapshot that differs from the cache, by states newer than applied
// (events still on their way), proves nothing either way: no proof, no
// restore. A key cached but not listed is the same.
func TestSnapshotThatDiffersProvesNothing(t *testing.T) {
	for name, items := range map[string][]runtime.Object{
		"newer state": {cm("a", "11"), cm("b", "9")},
		"key missing": {cm("a", "5")},
		"key added":   {cm("a", "5"), cm("b", "9"), cm("c", "11")},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, "10", map[string]string{"ns/a": "5", "ns/b": "9"})
			p := New(Config{SnapshotLimit: DefaultSnapshotLimit}, f)
			if p.CompareSnapshot(snap(t, "12", "10", items...), trust.Stamp{}, true) {
				t.Fatal("a snapshot that differs from the cache proved it fresh")
			}
			if len(f.cache.proved) != 0 || len(f.cache.restores) != 0 || len(f.cache.found) != 0 {
				t.Fatalf("proved %v, restores %v, found %v; want nothing", f.cache.proved, f.cache.restores, f.cache.found)
			}
		})
	}
}

// A consistent read below the floor when it was sent shows the server's
// history went back: a restore is declared, from a snapshot and from a
// limit=1 read alike.
func TestReadBelowTheFloorDeclaresARestore(t *testing.T) {
	t.Run("snapshot", func(t *testing.T) {
		f := newFake(t, "10", map[string]string{"ns/a": "5"})
		p := New(Config{SnapshotLimit: DefaultSnapshotLimit}, f)
		if p.CompareSnapshot(snap(t, "8", "10", cm("a", "5")), trust.Stamp{}, true) {
			t.Fatal("a snapshot below the floor proved the cache fresh")
		}
		want := reflector.Regression{Reason: reflector.RegressionServerBehind, ListResourceVersion: "8", Floor: "10"}
		if len(f.cache.restores) != 1 || !equalRegression(f.cache.restores[0], want) {
			t.Fatalf("restores %+v, want %+v", f.cache.restores, want)
		}
	})
	t.Run("server resource version", func(t *testing.T) {
		f := newFake(t, "10", map[string]string{"ns/a": "5"})
		p := New(Config{Lister: listAt("8"), SnapshotLimit: -1, RestoreCheckByRV: true}, f)
		if !p.CheckServer(context.Background(), trust.Stamp{}) {
			t.Fatal("the check was not answered")
		}
		if len(f.cache.restores) != 1 || f.cache.restores[0].Reason != reflector.RegressionServerBehind {
			t.Fatalf("restores %+v, want one: the server behind the floor", f.cache.restores)
		}
	})
}

// A key listed at a state the cache had passed (at or below applied) but
// does not hold shows the server's history went back, even above the
// floor: a restored server outrun by new writes.
func TestKeyAtAPassedStateDeclaresARestore(t *testing.T) {
	f := newFake(t, "10", map[string]string{"ns/a": "5", "ns/b": "9"})
	p := New(Config{SnapshotLimit: DefaultSnapshotLimit}, f)
	if p.CompareSnapshot(snap(t, "20", "10", cm("a", "3"), cm("b", "9")), trust.Stamp{}, true) {
		t.Fatal("a snapshot with a key gone back proved the cache fresh")
	}
	if len(f.cache.restores) != 1 || f.cache.restores[0].Reason != reflector.RegressionKeysWentBack ||
		!slices.Equal(f.cache.restores[0].SampleKeys, []string{"ns/a"}) {
		t.Fatalf("restores %+v, want a gone back", f.cache.restores)
	}
}

// A probe whose snapshot proves the cache fresh still fails the waits
// that joined before it for targets beyond the server: the proof and the
// too-large answer are both what one read shows.
func TestProbeThatProvesFreshStillFailsTargetsBeyondTheServer(t *testing.T) {
	f := newFake(t, "10", map[string]string{"ns/a": "5"})
	f.view.AnyTarget, f.view.Lowest, f.view.Seq = true, rv(t, "987654321"), 3
	p := New(Config{Lister: listAt("12", cm("a", "5")), SnapshotLimit: DefaultSnapshotLimit}, f)
	p.KeysListed(1)
	p.probeOnce(context.Background())
	if !slices.Equal(f.cache.proved, []freshness.RV{rv(t, "12")}) {
		t.Fatalf("proved %v, want 12", f.cache.proved)
	}
	if !slices.Equal(f.tooLarge, []freshness.RV{rv(t, "12")}) || !slices.Equal(f.tooSeq, []uint64{3}) {
		t.Fatalf("TooLarge got %v (seq %v), want 12 for the waits joined by 3", f.tooLarge, f.tooSeq)
	}
}

// A recorded write below the cache that the stream delivered needs no
// restore check; one it never delivered starts one.
func TestRecordedWriteBelowTheCacheChecksOnlyWhenNotDelivered(t *testing.T) {
	f := newFake(t, "10", map[string]string{"ns/a": "5"})
	f.cache.delivered = []freshness.RV{rv(t, "7")}
	p := New(Config{Lister: listAt("10", cm("a", "5")), SnapshotLimit: DefaultSnapshotLimit}, f)
	p.Start(context.Background())
	defer p.Stop()
	p.RecordWrite(rv(t, "7"))
	if got := p.Stats().RestoreChecks; got != 0 {
		t.Fatalf("%d restore checks for a delivered write, want 0", got)
	}
	p.RecordWrite(rv(t, "6"))
	p.checks.WaitIdle(context.Background())
	if got := p.Stats().RestoreChecks; got != 1 {
		t.Fatalf("%d restore checks for a write the stream never delivered, want 1", got)
	}
	if got := p.NewestWrite(); got != rv(t, "7") {
		t.Fatalf("NewestWrite = %v, want 7", got)
	}
}

func equalRegression(a, b reflector.Regression) bool {
	return a.Reason == b.Reason && a.ListResourceVersion == b.ListResourceVersion && a.Floor == b.Floor &&
		a.Keys == b.Keys && a.WritesLost == b.WritesLost && slices.Equal(a.SampleKeys, b.SampleKeys)
}

// listAt is a server whose lists answer at resource version at with objs.
func listAt(at string, objs ...*corev1.ConfigMap) toolscache.ListerWatcher {
	return &toolscache.ListWatch{
		ListFunc: func(opts metav1.ListOptions) (runtime.Object, error) {
			l := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: at}}
			for _, o := range objs {
				l.Items = append(l.Items, *o)
			}
			return l, nil
		},
		WatchFunc: func(metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil },
	}
}
