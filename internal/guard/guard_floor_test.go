package guard

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/freshinformer/freshinformer/internal/informertest"
	"github.com/freshinformer/freshinformer/internal/trust"
	"github.com/freshinformer/freshinformer/reflector"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

var rv = informertest.RV // informertest's

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
	failNext error  // what the next watch request fails with, once
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
	if err := s.failNext; err != nil {
		s.failNext = nil
		return nil, err
	}
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

// client-go's Reflector flattens a list's error chain before its watch
// error handler sees it: Reported puts the Guard's refusal back, and
// leaves other errors as they are (a failure, not 410 Gone, makes the next
// list a consistent read).
func TestReportedRestoresTheRefusal(t *testing.T) {
	g := New(Options{InitialFloor: rv(t, "100")})
	inner := &scriptWL{listRV: "120"}
	lw := g.ListerWatcher(inner).(toolscache.ListerWatcherWithContext)
	q := g.NewQueue(toolscache.RealFIFOOptions{KeyFunction: toolscache.MetaNamespaceKeyFunc})
	defer q.Close()
	if err := q.Replace(nil, "100"); err != nil {
		t.Fatal(err)
	}
	refusal := q.Replace(nil, "50")
	flat := fmt.Errorf("unable to sync list result: %v", refusal)
	if errors.Is(flat, reflector.ErrStaleList) {
		t.Fatal("test premise broken: a flattened error kept its chain")
	}
	got := g.Reported(flat)
	var se *reflector.StaleListError
	if !errors.Is(got, reflector.ErrStaleList) || !errors.As(got, &se) || se.ListResourceVersion != "50" || got.Error() != flat.Error() {
		t.Fatalf("Reported = %v", got)
	}
	other := errors.New("connection refused")
	if g.Reported(other) != other {
		t.Fatal("an unrelated error was taken for a refusal")
	}
	if _, err := lw.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "100"}); err != nil {
		t.Fatal(err)
	}
	if o := inner.lists[0]; o.ResourceVersion != "" {
		t.Fatalf("the list after a reported failure %+v, want a consistent read", o)
	}
}

// While the Owner's declared restore waits for its relist, there is no
// floor: a relist asked for (RequestRelist) stops the current watch, and
// the next plain watch relists first, on the watch path (no Reflector
// backoff), with a consistent read accepted whatever its resource
// version, queued with the stamp of its request; the watch starts from it.
func TestRestoreRelistsConsistently(t *testing.T) {
	owner := &fakeOwner{}
	g := New(owner.options(Options{}))
	inner := &scriptWL{}
	lw := g.ListerWatcher(inner).(toolscache.ListerWatcherWithContext)
	q := g.NewQueue(toolscache.RealFIFOOptions{KeyFunction: toolscache.MetaNamespaceKeyFunc})
	defer q.Close()
	ctx := context.Background()
	if err := q.Replace(nil, "100"); err != nil {
		t.Fatal(err)
	}
	g.TakeList()
	owner.trust.Submit(trust.List{RV: floorAt("100"), Stamp: owner.trust.Stamp()})
	if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "100"}); err != nil {
		t.Fatal(err)
	}
	if _, begun := owner.trust.Submit(trust.Read{Shows: trust.ReadRestored, Stamp: owner.trust.Stamp()}); !begun {
		t.Fatal("the restore did not begin")
	}
	if !g.Floor().IsZero() {
		t.Fatalf("floor %s while a restore waits for its relist, want none", g.Floor())
	}
	g.RequestRelist()
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
	if a := g.TakeList(); a.Stamp != (Stamp{Epoch: 1}) || a.Regression != nil || a.Sent.IsZero() {
		t.Fatalf("TakeList: %+v, want the relist with its request's stamp", a)
	}
	if _, _, n := owner.counts(); n != 1 {
		t.Fatalf("%d epochs begun, want the restore's alone: the Guard found a regressing list, where the trust state declared the restore", n)
	}
	owner.trust.Submit(trust.List{RV: floorAt("60"), Stamp: owner.trust.Stamp()}) // the relist applied
	if f := g.Floor().String(); f != "60" {
		t.Fatalf("floor after the restore = %s", f)
	}
}

// The floor is at least what the trust state proved off the stream, and
// never lowered by it.
func TestFloorIsAtLeastTheOwnersProof(t *testing.T) {
	owner := &fakeOwner{}
	g := New(owner.options(Options{}))
	q := g.NewQueue(toolscache.RealFIFOOptions{KeyFunction: toolscache.MetaNamespaceKeyFunc})
	defer q.Close()
	if err := q.Replace(nil, "10"); err != nil {
		t.Fatal(err)
	}
	owner.trust.Submit(trust.List{RV: floorAt("1"), Stamp: owner.trust.Stamp()})
	for _, tc := range []struct{ proven, want string }{{"5", "10"}, {"20", "20"}} {
		if _, ok := owner.trust.Submit(trust.Proof{To: floorAt(tc.proven), Stamp: owner.trust.Stamp()}); !ok {
			t.Fatalf("the proof at %s was void", tc.proven)
		}
		if got := g.Floor().String(); got != tc.want {
			t.Fatalf("Floor with %s proven = %s, want %s", tc.proven, got, tc.want)
		}
	}
}

// A list queued carries the stamp of its request, not of its answer: the
// Owner tells a list asked for before a restore from the relist.
func TestAdmissionCarriesTheRequestsStamp(t *testing.T) {
	owner := &fakeOwner{}
	for _, e := range []trust.Evidence{trust.Regression{Step: trust.Admitted}, trust.Regression{Step: trust.Admitted}, trust.Regression{Step: trust.Admitted}, trust.Failure{}} {
		owner.trust.Submit(e)
	}
	g := New(owner.options(Options{}))
	inner := &scriptWL{listRV: "104"}
	lw := g.ListerWatcher(inner).(toolscache.ListerWatcherWithContext)
	q := g.NewQueue(toolscache.RealFIFOOptions{KeyFunction: toolscache.MetaNamespaceKeyFunc})
	defer q.Close()
	if _, err := lw.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "0"}); err != nil {
		t.Fatal(err)
	}
	owner.trust.Submit(trust.Regression{Step: trust.Admitted}) // a regression, a request failed
	owner.trust.Submit(trust.Failure{})
	if err := q.Replace(nil, "104"); err != nil { // the answer to the list asked for before
		t.Fatal(err)
	}
	if a := g.TakeList(); a.Stamp != (Stamp{Epoch: 3, Failures: 1}) || a.Regression != nil || a.Sent.IsZero() {
		t.Fatalf("TakeList: %+v, want the request's stamp", a)
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
	g.mu.Lock()
	n := len(g.queued)
	g.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d admissions left after a list whose transform panicked, want 0", n)
	}
}
