package guard

import (
	"context"
	"errors"
	"fmt"
	"github.com/freshinformer/freshinformer/reflector"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/freshinformer/freshinformer/freshness"
)

func rv(t *testing.T, s string) freshness.RV {
	t.Helper()
	r, err := freshness.ParseRV(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func obj(rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", ResourceVersion: rv}}
}

// The delivered floor only grows with plausible, well-formed RVs.
func TestQueueFloorIgnoresOlderMalformedAndImplausible(t *testing.T) {
	g := New(Options{})
	q := g.NewQueue(toolscache.RealFIFOOptions{KeyFunction: toolscache.MetaNamespaceKeyFunc})
	defer q.Close()
	if err := q.Replace(nil, "10"); err != nil {
		t.Fatal(err)
	}
	for _, step := range []func() error{
		func() error { return q.Add(obj("30")) },
		func() error { return q.Update(obj("20")) }, // older: queued, floor stays
		func() error { return q.Bookmark("25") },
		func() error { return q.Delete(obj("x1")) },
		func() error { return q.Bookmark("9999999999999999999999999999999999999999") },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if f := g.Floor().String(); f != "30" {
		t.Fatalf("floor = %s, want 30", f)
	}
	s := g.Stats()
	if s.MalformedSkipped != 1 || s.ImplausibleSkipped != 1 {
		t.Fatalf("stats %+v", s)
	}
	if err := q.Replace(nil, "20"); !errors.Is(err, reflector.ErrStaleList) {
		t.Fatalf("list at 20 below the floor 30: %v", err)
	}
}

// scriptWL serves watches that record Stop.
type scriptWL struct {
	watchers []*watch.RaceFreeFakeWatcher
	lists    []metav1.ListOptions
	watches  []metav1.ListOptions
	listRV   string // what lists answer
}

func (s *scriptWL) List(o metav1.ListOptions) (runtime.Object, error) {
	s.lists = append(s.lists, o)
	return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: s.listRV}}, nil
}

// last returns the watch served last (the Guard hands the Reflector a
// wrapper of it).
func (s *scriptWL) last() *watch.RaceFreeFakeWatcher { return s.watchers[len(s.watchers)-1] }

func (s *scriptWL) Watch(o metav1.ListOptions) (watch.Interface, error) {
	s.watches = append(s.watches, o)
	w := watch.NewRaceFreeFake()
	s.watchers = append(s.watchers, w)
	return w, nil
}

func TestRefusedWatchListIsStoppedAndFallbackCountedOnce(t *testing.T) {
	g := New(Options{InitialFloor: rv(t, "100")})
	inner := &scriptWL{}
	lw := g.ListerWatcher(inner).(toolscache.ListerWatcherWithContext)
	q := g.NewQueue(toolscache.RealFIFOOptions{KeyFunction: toolscache.MetaNamespaceKeyFunc})
	defer q.Close()
	ctx := context.Background()

	// A re-watch-list from the last synced RV (the first, at "", is a
	// consistent read: below the floor it would prove a restore).
	_, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "90", SendInitialEvents: ptr.To(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Replace(nil, "50"); !errors.Is(err, reflector.ErrStaleList) {
		t.Fatalf("watch-list at 50: %v", err)
	}
	if !inner.last().IsStopped() {
		t.Fatal("the refused watch-list's watch was left open")
	}
	// client-go's fallback list in the same attempt.
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "90"}); err != nil {
		t.Fatal(err)
	}
	if o := inner.lists[0]; o.ResourceVersion != "100" || o.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan {
		t.Fatalf("fallback list asked %q %q, want 100 NotOlderThan", o.ResourceVersion, o.ResourceVersionMatch)
	}
	if err := q.Replace(nil, "60"); !errors.Is(err, reflector.ErrStaleList) {
		t.Fatalf("fallback list at 60: %v", err)
	}
	if s := g.Stats(); s.StaleListsRefused != 1 || s.WatchesStopped != 1 {
		t.Fatalf("stats %+v: want one refusal, one watch stopped", s)
	}
	// The next attempt counts again.
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "90"}); err != nil {
		t.Fatal(err)
	}
	if err := q.Replace(nil, "70"); !errors.Is(err, reflector.ErrStaleList) {
		t.Fatal(err)
	}
	if s := g.Stats(); s.StaleListsRefused != 2 {
		t.Fatalf("stats %+v", s)
	}
	// An accepted watch-list keeps its watch.
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "90", SendInitialEvents: ptr.To(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Replace(nil, "150"); err != nil {
		t.Fatal(err)
	}
	if inner.last().IsStopped() {
		t.Fatal("an accepted watch-list's watch was stopped")
	}
	w.Stop()
}

func TestClassifyError(t *testing.T) {
	g := New(Options{InitialFloor: rv(t, "100")})
	q := g.NewQueue(toolscache.RealFIFOOptions{KeyFunction: toolscache.MetaNamespaceKeyFunc})
	defer q.Close()
	refusal := q.Replace(nil, "50")
	flat := fmt.Errorf("unable to sync list result: %v", refusal)
	if errors.Is(flat, reflector.ErrStaleList) {
		t.Fatal("test premise broken: a flattened error kept its chain")
	}
	got := g.ClassifyError(flat)
	var se *reflector.StaleListError
	if !errors.Is(got, reflector.ErrStaleList) || !errors.As(got, &se) || se.ListResourceVersion != "50" || got.Error() != flat.Error() {
		t.Fatalf("ClassifyError = %v", got)
	}
	if !reflector.IsStaleList(flat) {
		t.Fatal("IsStaleList missed a flattened refusal")
	}
	other := errors.New("connection refused")
	if g.ClassifyError(other) != other || reflector.IsStaleList(other) {
		t.Fatal("an unrelated error was classified as a refusal")
	}
}

// BeginRestore: the current watch stops, and the next plain watch relists
// first, on the watch path (no Reflector backoff): a consistent read
// accepted whatever its resource version, declared only once, queued, and
// the watch starts from it.
func TestBeginRestore(t *testing.T) {
	var got []reflector.Regression
	g := New(Options{OnRegression: func(r reflector.Regression) { got = append(got, r) }})
	inner := &scriptWL{}
	lw := g.ListerWatcher(inner).(toolscache.ListerWatcherWithContext)
	q := g.NewQueue(toolscache.RealFIFOOptions{KeyFunction: toolscache.MetaNamespaceKeyFunc})
	defer q.Close()
	ctx := context.Background()
	if err := q.Replace(nil, "100"); err != nil {
		t.Fatal(err)
	}
	_, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "100"})
	if err != nil {
		t.Fatal(err)
	}
	g.BeginRestore(reflector.Regression{Reason: reflector.RegressionServerBehind, ListResourceVersion: "60", Floor: "100"})
	if !inner.last().IsStopped() {
		t.Fatal("the current watch was not stopped")
	}
	inner.listRV = "60"
	if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "100"}); err != nil {
		t.Fatalf("watch after a restore = %v, want a relist and a watch", err)
	}
	if o := inner.lists[len(inner.lists)-1]; o.ResourceVersion != "" || o.ResourceVersionMatch != "" {
		t.Fatalf("relist after a restore asked %q %q, want a consistent read", o.ResourceVersion, o.ResourceVersionMatch)
	}
	if o := inner.watches[len(inner.watches)-1]; o.ResourceVersion != "60" {
		t.Fatalf("the watch after the relist starts at %q, want the list's 60", o.ResourceVersion)
	}
	if a, b := g.TakeList(), g.TakeList(); a != (ListAdmission{}) || b != (ListAdmission{Declared: true, Relist: true}) {
		t.Fatalf("TakeList: %+v then %+v, want the list at 60 marked the declared restore's relist", a, b)
	}
	if len(got) != 1 || g.Stats().Regressions != 1 {
		t.Fatalf("declared %v", got)
	}
	if f := g.Floor().String(); f != "60" {
		t.Fatalf("floor after restore = %s", f)
	}
}

// A probe's gap proof raises the floor (the informer's stream holds nothing
// below it), unless a regression was declared since the proof began.
func TestAdvanceRaisesTheFloorUnlessARegressionIntervened(t *testing.T) {
	g := New(Options{})
	q := g.NewQueue(toolscache.RealFIFOOptions{KeyFunction: toolscache.MetaNamespaceKeyFunc})
	defer q.Close()
	if err := q.Replace(nil, "10"); err != nil {
		t.Fatal(err)
	}
	gen := g.Stats().Regressions
	g.Advance(floorAt("20"), gen)
	if got := g.Floor().String(); got != "20" {
		t.Fatalf("Floor after Advance(20) = %s", got)
	}
	g.Advance(floorAt("15"), gen) // never lowers it
	if got := g.Floor().String(); got != "20" {
		t.Fatalf("Floor after Advance(15) = %s", got)
	}
	g.DeclareRegression(reflector.Regression{Reason: reflector.RegressionStaleList})
	g.Advance(floorAt("30"), gen) // the proof began before the regression
	if got := g.Floor().String(); got != "20" {
		t.Fatalf("Floor after a voided Advance(30) = %s, want 20", got)
	}
}

// A list asked for before a restore was declared, queued after it, is not
// the relist the restore waits for (found in review: it passed for it and
// started the cache over on the old history): it is queued to be dropped,
// the floor stays down, and the next watch relists.
func TestListAskedForBeforeARestoreIsNotItsRelist(t *testing.T) {
	g := New(Options{})
	inner := &scriptWL{listRV: "104"}
	lw := g.ListerWatcher(inner).(toolscache.ListerWatcherWithContext)
	q := g.NewQueue(toolscache.RealFIFOOptions{KeyFunction: toolscache.MetaNamespaceKeyFunc})
	defer q.Close()
	ctx := context.Background()
	if err := q.Replace(nil, "100"); err != nil {
		t.Fatal(err)
	}
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "100"}); err != nil {
		t.Fatal(err)
	}
	g.BeginRestore(reflector.Regression{Reason: reflector.RegressionServerBehind, ListResourceVersion: "50", Floor: "100"})
	if err := q.Replace(nil, "104"); err != nil { // the answer to the list asked for before
		t.Fatal(err)
	}
	if a, b := g.TakeList(), g.TakeList(); a != (ListAdmission{}) || b != (ListAdmission{}) {
		t.Fatalf("TakeList: %+v then %+v, want neither marked the relist", a, b)
	}
	if !g.Floor().IsZero() || !g.RelistPending() {
		t.Fatalf("floor %v, relist pending %v: want the restore still waiting for its relist", g.Floor(), g.RelistPending())
	}
	inner.listRV = "60"
	if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "104"}); err != nil {
		t.Fatal(err)
	}
	if a := g.TakeList(); a != (ListAdmission{Declared: true, Relist: true}) {
		t.Fatalf("the relist on the watch path: %+v, want it marked the restore's relist", a)
	}
}

// A transform that panics while a list is queued leaves no admission
// behind (client-go's Reflector recovers and lists again): the lists that
// follow keep their places.
func TestListWhoseTransformPanicsIsUndone(t *testing.T) {
	g := New(Options{})
	q := g.NewQueue(toolscache.RealFIFOOptions{KeyFunction: toolscache.MetaNamespaceKeyFunc, Transformer: func(any) (any, error) { panic("transform") }})
	defer q.Close()
	func() {
		defer func() { _ = recover() }()
		_ = q.Replace([]any{obj("1")}, "100")
	}()
	if n := g.ListsQueued(); n != 0 {
		t.Fatalf("ListsQueued = %d after a list whose transform panicked, want 0", n)
	}
}
