package cache

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/freshinformer/freshinformer/internal/prove"
	"github.com/freshinformer/freshinformer/reflector"
)

// stateLW is a scripted server that knows its current state: consistent
// lists (resourceVersion "") return it, paginated by limit as the API
// server does; the Reflector's watches are fake watchers the test drives
// (the stream lags the state as far as the test likes); auxiliary watches
// (the bookmark route) stay silent and are counted.
type stateLW struct {
	t *testing.T

	mu         sync.Mutex
	rv         int
	objects    map[string]*corev1.ConfigMap
	lists      []metav1.ListOptions
	auxWatches int
	watchers   chan *watch.RaceFreeFakeWatcher
	// noWatchCache: auxiliary watches end at once without a bookmark, as
	// on a resource the apiserver serves without a watch cache.
	noWatchCache bool
}

func newStateLW(t *testing.T, rv int, objs ...*corev1.ConfigMap) *stateLW {
	lw := &stateLW{t: t, rv: rv, objects: map[string]*corev1.ConfigMap{}, watchers: make(chan *watch.RaceFreeFakeWatcher, 16)}
	for _, o := range objs {
		lw.objects[o.Name] = o
	}
	return lw
}

// commit changes the server's state at a new revision without telling the
// informer's stream: a write elsewhere (obj nil), or a write to name
// (deleted when del). It returns the write's resource version.
func (lw *stateLW) commit(name string, del bool) string {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.rv++
	rv := strconv.Itoa(lw.rv)
	switch {
	case name == "":
	case del:
		delete(lw.objects, name)
	default:
		lw.objects[name] = cm(name, rv)
	}
	return rv
}

func (lw *stateLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.lists = append(lw.lists, opts)
	list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(lw.rv)}}
	names := make([]string, 0, len(lw.objects))
	for n := range lw.objects {
		names = append(names, n)
	}
	slices.Sort(names)
	for i, n := range names {
		if opts.Limit > 0 && int64(i) == opts.Limit {
			list.Continue = "more"
			break
		}
		list.Items = append(list.Items, *lw.objects[n].DeepCopy())
	}
	return list, nil
}

func (lw *stateLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds == prove.AuxWatchTimeoutSeconds {
		lw.mu.Lock()
		lw.auxWatches++
		closed := lw.noWatchCache
		lw.mu.Unlock()
		w := watch.NewFake()
		if closed {
			w.Stop()
		}
		return w, nil
	}
	w := watch.NewRaceFreeFake()
	lw.watchers <- w
	return w, nil
}

func (lw *stateLW) IsWatchListSemanticsUnSupported() bool { return true }

func (lw *stateLW) counts() (lists, aux int) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return len(lw.lists), lw.auxWatches
}

// lastList returns the options of the last list.
func (lw *stateLW) lastList() metav1.ListOptions {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.lists[len(lw.lists)-1]
}

func startState(t *testing.T, lw *stateLW, opts ...Option) (*FreshInformer, *watch.RaceFreeFakeWatcher) {
	t.Helper()
	inf := NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, nil, opts...)
	runInformer(t, inf)
	var w *watch.RaceFreeFakeWatcher
	select {
	case w = <-lw.watchers:
	case <-time.After(20 * time.Second):
		t.Fatal("the informer opened no watch")
	}
	waitSynced(t, inf)
	return inf, w
}

// A quiet informer waiting for a resource version written elsewhere is
// proven fresh by one consistent list that matches its cache key by key:
// no auxiliary watch, no relist.
func TestSnapshotProvesQuietWait(t *testing.T) {
	lw := newStateLW(t, 10, cm("a", "5"), cm("b", "9"))
	inf, _ := startState(t, lw)
	listsBefore, _ := lw.counts()
	rv := lw.commit("", false)

	waitFresh(t, inf, rv)
	if got := inf.LastObservedResourceVersion(); got != rv {
		t.Fatalf("applied RV %s, want %s", got, rv)
	}
	lists, aux := lw.counts()
	st := inf.ProbeStats()
	if lists-listsBefore != 1 || aux != 0 || st.Snapshots != 1 || st.SnapshotMatches != 1 || st.Requests != 1 || st.Relists != 0 {
		t.Fatalf("%d lists, %d aux watches, %+v: want one snapshot list that matched and nothing else", lists-listsBefore, aux, st)
	}
	if o := lw.lists[len(lw.lists)-1]; o.ResourceVersion != "" || o.Limit != 3 {
		t.Fatalf("snapshot list options %+v: want a consistent list of limit 3 (cached + 1)", o)
	}
	if f := inf.guard.Floor(); f.String() != rv {
		t.Fatalf("guard floor %s, want %s: a relist older than the snapshot would move the cache back", f, rv)
	}
}

// Sync on a small informer is one consistent list: the snapshot itself.
func TestSnapshotSyncIsOneRequest(t *testing.T) {
	lw := newStateLW(t, 10, cm("a", "5"))
	inf, _ := startState(t, lw, WithQuietProbeDelay(time.Hour)) // no probe: Sync alone
	listsBefore, _ := lw.counts()
	rv := lw.commit("", false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := inf.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	lists, aux := lw.counts()
	if got := inf.LastObservedResourceVersion(); got != rv || lists-listsBefore != 1 || aux != 0 {
		t.Fatalf("Sync: applied %s (want %s) after %d lists and %d aux watches, want 1 and 0", got, rv, lists-listsBefore, aux)
	}
}

// Guarantee 1: a snapshot the cache does not match proves nothing. A write
// to the informer's own resource whose event is still on its way makes the
// cache differ (a changed key, a new key, a deleted key), and the wait
// returns only once the stream has delivered it.
func TestSnapshotMismatchWaitsForTheStream(t *testing.T) {
	for _, tc := range []struct {
		name string
		del  bool
		key  string
	}{{"update", false, "a"}, {"create", false, "new"}, {"delete", true, "a"}} {
		t.Run(tc.name, func(t *testing.T) {
			lw := newStateLW(t, 10, cm("a", "5"))
			inf, w := startState(t, lw)
			rv := lw.commit(tc.key, tc.del)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			err := inf.WaitForFreshness(ctx, rv)
			cancel()
			if err == nil {
				t.Fatalf("fresh at %s before the stream delivered the write (cached %q)", rv, cached(inf, tc.key))
			}
			if st := inf.ProbeStats(); st.Snapshots == 0 || st.SnapshotMatches != 0 {
				t.Fatalf("%+v: want snapshots that did not match", st)
			}
			if tc.del {
				w.Delete(cm(tc.key, rv))
			} else {
				w.Modify(cm(tc.key, rv))
			}
			waitFresh(t, inf, rv)
			if got := cached(inf, tc.key); (got == "") != tc.del {
				t.Fatalf("after the event, %s cached at %q", tc.key, got)
			}
		})
	}
}

// Keys created and deleted between the applied RV and the snapshot are in
// neither, yet their events are still on the stream. Once the snapshot has
// moved the applied RV past them they are no fault: not counted as out of
// order, never in the indexer (it holds a newer state), and handlers hear
// of them as they would from client-go's informer.
func TestSnapshotEventsBehindIt(t *testing.T) {
	lw := newStateLW(t, 10, cm("a", "5"))
	inf, w := startState(t, lw)
	rec := recordHandlers(t, inf)
	rec.waitFor(t, 1)
	created := lw.commit("x", false)
	updated := lw.commit("x", false)
	deleted := lw.commit("x", true)
	rv := lw.commit("", false)
	waitFresh(t, inf, rv) // the snapshot: x is in neither

	w.Add(cm("x", created))
	w.Modify(cm("x", updated))
	w.Delete(cm("x", deleted))
	w.Add(cm("y", "20"))
	waitFresh(t, inf, "20")
	if got := cached(inf, "x"); got != "" {
		t.Fatalf("x cached at %s after a snapshot without it", got)
	}
	want := []string{"add a@5 initial=true", "add x@" + created + " initial=false", "update x@" + created + "->" + updated,
		"delete x@" + deleted, "add y@20 initial=false"}
	if got := rec.waitFor(t, len(want)); !slices.Equal(got, want) {
		t.Fatalf("handlers got %q, want %q", got, want)
	}
	if n := inf.Stats().OutOfOrderRejected; n != 0 {
		t.Fatalf("OutOfOrderRejected = %d: events behind a snapshot are no fault", n)
	}
	if n := inf.ProbeStats().BehindSnapshot; n != 3 {
		t.Fatalf("BehindSnapshot = %d, want 3", n)
	}
	// A replay of one of them is a replay again.
	w.Add(cm("x", created))
	w.Add(cm("z", "21"))
	waitFresh(t, inf, "21")
	if got := cached(inf, "x"); got != "" || inf.Stats().OutOfOrderRejected != 1 {
		t.Fatalf("replayed add: x cached at %q, %d rejected; want absent, 1", got, inf.Stats().OutOfOrderRejected)
	}
}

// A key created behind the snapshot whose deletion the stream never
// delivers (its watch resumed past the snapshot) leaves handlers' views by
// a tombstone once the stream passes the snapshot, as after a relist.
func TestSnapshotZoneEndsWithTombstones(t *testing.T) {
	lw := newStateLW(t, 10)
	inf, w := startState(t, lw)
	rec := recordHandlers(t, inf)
	created := lw.commit("x", false)
	lw.commit("x", true)
	rv := lw.commit("", false)
	waitFresh(t, inf, rv)
	w.Add(cm("x", created))
	w.Action(watch.Bookmark, bookmark(rv)) // resumed past the deletion
	want := []string{"add x@" + created + " initial=false", "delete tombstone:ns/x@"}
	if got := rec.waitFor(t, len(want)); !slices.Equal(got, want) {
		t.Fatalf("handlers got %q, want %q", got, want)
	}
}

// Above the limit the snapshot route is not taken: the bookmark route
// (auxiliary watch) is.
func TestSnapshotLimit(t *testing.T) {
	lw := newStateLW(t, 10, cm("a", "5"), cm("b", "6"))
	inf, _ := startState(t, lw, WithSnapshotProbeLimit(1))
	rv := lw.commit("", false)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_ = inf.WaitForFreshness(ctx, rv) // the silent auxiliary watch proves nothing
	if st := inf.ProbeStats(); st.Snapshots != 0 || st.Probes == 0 {
		t.Fatalf("%+v: want probes without snapshots", st)
	}
	if _, aux := lw.counts(); aux == 0 {
		t.Fatal("no auxiliary watch above the snapshot limit")
	}
}

// A snapshot that matches the cache but holds a key older than a write
// recorded for it (etcd restored with --bump-revision from before the
// write, which the informer's stream never delivered) is the server's
// state, yet it lost an acknowledged write: WritesLost is declared before
// the wait for that write returns, as for a list.
func TestSnapshotDeclaresLostWrites(t *testing.T) {
	regs := newRegressionLog()
	lw := newStateLW(t, 10, cm("a", "5"))
	inf, _ := startState(t, lw, WithRegressionHandler(regs.handle))
	if err := inf.RecordWrittenObject(cm("a", "12")); err != nil { // acknowledged, then lost
		t.Fatal(err)
	}
	lw.mu.Lock()
	lw.rv = 1_000_015 // restored with a bumped revision: a is still at 5
	lw.mu.Unlock()
	waitFresh(t, inf, "12")
	select {
	case r := <-regs.ch:
		if r.Reason != reflector.RegressionWritesLost || r.WritesLost != 1 || r.SampleKeys[0] != "ns/a" {
			t.Fatalf("regression %+v, want WritesLost of ns/a", r)
		}
	default:
		t.Fatal("the wait for a lost write returned before the loss was declared")
	}
	if got := inf.LastObservedResourceVersion(); got != "1000015" {
		t.Fatalf("applied RV %s, want the snapshot's", got)
	}
}

// A resource that gets no bookmarks (no watch cache) takes the snapshot
// route whatever the informer's size: its bookmark route is a relist,
// which lists as much and waits out the Reflector's backoff.
func TestSnapshotRouteWithoutWatchCacheAtAnySize(t *testing.T) {
	lw := newStateLW(t, 10, cm("a", "5"), cm("b", "6"))
	lw.noWatchCache = true
	inf, _ := startState(t, lw, WithSnapshotProbeLimit(1))
	waitFresh(t, inf, lw.commit("", false)) // the bookmark route finds no bookmark, and relists
	if st := inf.ProbeStats(); st.Snapshots != 0 || st.Relists == 0 {
		t.Fatalf("%+v: want the bookmark route first, ending in a relist", st)
	}
	before := inf.ProbeStats()
	waitFresh(t, inf, lw.commit("", false))
	if st := inf.ProbeStats(); st.SnapshotMatches != before.SnapshotMatches+1 || st.Relists != before.Relists {
		t.Fatalf("%+v after %+v: want one snapshot and no relist", st, before)
	}
}

// An add with a malformed resource version of a key the indexer does not
// hold, while the stream is behind a snapshot, cannot be placed: it may be
// a state the server deleted before the snapshot. Applied, it would put that
// state in an indexer that waits up to the snapshot already trust, until
// the key's deletion arrives. It is dropped, waits are held, and a relist
// settles the key.
func TestSnapshotZoneUnplacedAddIsNotApplied(t *testing.T) {
	lw := newStateLW(t, 10, cm("a", "5"))
	inf, w := startState(t, lw)
	rec := recordHandlers(t, inf)
	rec.waitFor(t, 1) // a's initial add
	lw.commit("x", false)
	lw.commit("x", true)
	waitFresh(t, inf, lw.commit("", false)) // the snapshot: x is in neither
	lists, _ := lw.counts()
	w.Add(cm("x", "11x")) // malformed
	z := lw.commit("z", false)
	w.Add(cm("z", z)) // past the snapshot
	waitFresh(t, inf, z)
	if got := cached(inf, "x"); got != "" {
		t.Fatalf("x cached at %q: a state the snapshot showed deleted", got)
	}
	if got := cached(inf, "z"); got != z {
		t.Fatalf("z cached at %q, want %s", got, z)
	}
	if n, _ := lw.counts(); n <= lists {
		t.Fatal("no relist after an event the snapshot zone could not place")
	}
	if got := rec.waitFor(t, 2); slices.Contains(got, "add x@11x initial=false") {
		t.Fatalf("handlers heard of the unplaced add: %q", got)
	}
	if n, keys := inf.prover.Keys(), len(inf.GetIndexer().ListKeys()); n != int64(keys) {
		t.Fatalf("the prover counts %d keys, the indexer holds %d", n, keys)
	}
}

// A key created behind the snapshot (in handlers' views, not in the
// indexer) whose next event has a malformed resource version: that event
// cannot be placed either, so the indexer never holds the key, and the
// relist it asks for ends the zone, telling handlers of the key's deletion
// once. A malformed deletion of a zone key reaches handlers at once.
func TestSnapshotZoneKeyWithAMalformedEvent(t *testing.T) {
	lw := newStateLW(t, 10)
	inf, w := startState(t, lw)
	rec := recordHandlers(t, inf)
	y := lw.commit("y", false)
	lw.commit("y", true)
	x := lw.commit("x", false)
	lw.commit("x", false)
	lw.commit("x", true)
	top := lw.commit("", false)
	waitFresh(t, inf, top) // the snapshot: x and y are in neither

	w.Add(cm("y", y))
	w.Delete(cm("y", "12y")) // malformed
	w.Add(cm("x", x))
	w.Modify(cm("x", "14x")) // malformed: unplaced
	waitFresh(t, inf, top)   // held until the relist
	want := []string{"add y@" + y + " initial=false", "delete y@12y", "add x@" + x + " initial=false", "delete tombstone:ns/x@"}
	if got := rec.waitFor(t, len(want)); !slices.Equal(got, want) {
		t.Fatalf("handlers got %q, want %q", got, want)
	}
	for _, k := range []string{"x", "y"} {
		if got := cached(inf, k); got != "" {
			t.Fatalf("%s cached at %q after its deletion", k, got)
		}
	}
}

// A snapshot that lists a key twice (no honest server does) proves
// nothing: as many items as cached keys, each cached at its RV, would
// otherwise pass with a cached key missing from the list.
func TestSnapshotWithADuplicateKeyProvesNothing(t *testing.T) {
	lw := newStateLW(t, 10, cm("a", "5"), cm("b", "9"))
	inf, _ := startState(t, lw, WithQuietProbeDelay(-1))
	s := prove.Snapshot{RV: mustRV(t, "12"), Items: []runtime.Object{cm("a", "5"), cm("a", "5")}, Complete: true}
	st := inf.trust.View().Stamp
	if inf.prover.CompareSnapshot(s, st, true) {
		t.Fatal("a snapshot listing a twice (and not b) proved the cache fresh")
	}
	if got := inf.LastObservedResourceVersion(); got != "10" {
		t.Fatalf("applied RV %s, want 10", got)
	}
}
