package cache

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/internal/guard"
	"github.com/freshinformer/freshinformer/internal/trust"
	"github.com/freshinformer/freshinformer/reflector"
)

// queuedInformer returns an informer that is not run, with the Queue its
// Reflector would fill: the test queues lists and events itself and
// applies them (drain) when it chooses, so that what the queue holds when
// a restore is declared or a request fails is exact.
func queuedInformer(t *testing.T, transform toolscache.TransformFunc, opts ...Option) (*FreshInformer, *guard.Queue, *scriptedLW) {
	t.Helper()
	lw := newScriptedLW(t, listThenWatch, listResponse{rv: "10"})
	inf, q := queuedInformerOn(t, lw, transform, scriptOptions(opts...)...)
	return inf, q, lw
}

// queuedInformerOn is queuedInformer over lw, with opts as given.
func queuedInformerOn(t *testing.T, lw toolscache.ListerWatcher, transform toolscache.TransformFunc, opts ...Option) (*FreshInformer, *guard.Queue) {
	t.Helper()
	inf := NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, nil, opts...)
	if err := inf.SetTransform(transform); err != nil {
		t.Fatal(err)
	}
	q := inf.guard.NewQueue(toolscache.RealFIFOOptions{KeyFunction: toolscache.MetaNamespaceKeyFunc, Transformer: transform})
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); inf.processor.Run(stop) }() // handlers are called
	t.Cleanup(func() { close(stop); <-done; q.Close() })
	return inf, q
}

// declareRestore declares, as a restore check would, that the server went
// back to 50.
func declareRestore(t *testing.T, inf *FreshInformer) {
	t.Helper()
	st := inf.trust.View().Stamp
	inf.applyMu.Lock()
	inf.beginRestore(reflector.Regression{Reason: reflector.RegressionServerBehind, ListResourceVersion: "50", Floor: inf.guard.Floor().String()}, st)
	inf.unlockApply()
}

// drain applies the next n changes the queue holds (a list is one).
func drain(t *testing.T, q *guard.Queue, inf *FreshInformer, n int) {
	t.Helper()
	for n > 0 {
		k, err := pop(q, inf)
		if err != nil {
			t.Fatalf("applying the queue: %v", err)
		}
		n -= k
	}
}

// pop applies what the queue hands out at once, and reports how many
// changes that was.
func pop(q *guard.Queue, inf *FreshInformer) (n int, err error) {
	err = q.PopBatch(func(d []toolscache.Delta, initial bool) error {
		n = len(d)
		return inf.handleBatch(d, initial)
	}, func(obj any, initial bool) error {
		n = 1
		return inf.handleDeltas(obj, initial)
	})
	return n, err
}

// askList sends a list request through the informer's Guard, as its
// Reflector does before it queues the answer (the test queues it).
func askList(t *testing.T, inf *FreshInformer) {
	t.Helper()
	lw := inf.guard.ListerWatcher(inf.cfg.lw).(toolscache.ListerWatcherWithContext)
	if _, err := lw.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "0"}); err != nil {
		t.Fatal(err)
	}
}

func replace(t *testing.T, q *guard.Queue, rv string, objs ...*corev1.ConfigMap) {
	t.Helper()
	list := make([]any, len(objs))
	for i, o := range objs {
		list[i] = o
	}
	if err := q.Replace(list, rv); err != nil {
		t.Fatalf("queueing the list at %s: %v", rv, err)
	}
}

// A list the Reflector queued before a restore was declared is of the
// history the server lost, as the events behind it are: only the relist
// the declaration asked for starts the cache over (the old list, applied
// as if it were the relist, would put the old history back and release
// waits for the restored server's new writes on it).
func TestListQueuedBeforeADeclaredRestoreIsDropped(t *testing.T) {
	inf, q, _ := queuedInformer(t, nil)
	rec := recordHandlers(t, inf)
	replace(t, q, "100", cm("a", "100"))
	drain(t, q, inf, 1)
	// The old server's relist and an event behind it, not yet applied
	// when the restore check finds the server at 50.
	replace(t, q, "104", cm("a", "100"), cm("b", "104"))
	if err := q.Update(cm("a", "105")); err != nil {
		t.Fatal(err)
	}
	declareRestore(t, inf)
	drain(t, q, inf, 2)
	if inf.trust.Reached(mustRV(t, "60")) || cached(inf, "a") != "100" || cached(inf, "b") != "" {
		t.Fatalf("after the old list: fresh at 60 %v, a=%q b=%q; want nothing applied before the relist",
			inf.trust.Reached(mustRV(t, "60")), cached(inf, "a"), cached(inf, "b"))
	}
	askList(t, inf)
	replace(t, q, "60", cm("a", "40")) // the relist the declaration asked for
	drain(t, q, inf, 1)
	if !inf.trust.Reached(mustRV(t, "60")) || inf.trust.Reached(mustRV(t, "61")) || cached(inf, "a") != "40" {
		t.Fatalf("after the relist: current %v, a=%q; want 60 and a@40", inf.current(), cached(inf, "a"))
	}
	if s := inf.Stats(); s.Regressions != 1 {
		t.Fatalf("%d regressions declared, want the restore once", s.Regressions)
	}
	if got, want := rec.waitFor(t, 2), []string{"add a@100 initial=true", "update a@100->40"}; !slices.Equal(got, want) {
		t.Fatalf("handlers got %q, want %q", got, want)
	}
}

// A relist whose resource version cannot be ordered ends a declared
// restore too: the informer then works as a plain one and applies what
// follows, rather than dropping every later event for good.
func TestRestoreRelistThatCannotBeOrderedEndsTheRestore(t *testing.T) {
	inf, q, _ := queuedInformer(t, nil)
	replace(t, q, "100", cm("a", "100"))
	drain(t, q, inf, 1)
	declareRestore(t, inf)
	askList(t, inf)
	replace(t, q, "x7", cm("a", "x6"))
	if err := q.Update(cm("a", "x8")); err != nil {
		t.Fatal(err)
	}
	drain(t, q, inf, 2)
	if got := cached(inf, "a"); got != "x8" {
		t.Fatalf("a=%q after the relist and an event, want x8 (a plain informer applies what follows)", got)
	}
}

// A list the queue refused to take (the informer's transform failed) was
// never applied: the lists that follow still end an outage, and a restore
// whose relist failed so is still waiting for its relist.
func TestListTheQueueRefusedIsNotCounted(t *testing.T) {
	failTransform := true
	inf, q, _ := queuedInformer(t, func(obj any) (any, error) {
		if o, ok := obj.(*corev1.ConfigMap); ok && o.Name == "bad" && failTransform {
			return nil, errors.New("transform failed")
		}
		return obj, nil
	})
	replace(t, q, "100", cm("a", "100"))
	drain(t, q, inf, 1)
	if err := q.Replace([]any{cm("bad", "101")}, "101"); err == nil {
		t.Fatal("the queue took a list its transform failed on")
	}
	inf.trust.Submit(trust.Failure{}) // a request fails; its check does not run here
	if inf.trust.Reached(mustRV(t, "100")) {
		t.Fatal("the outage does not hold waits")
	}
	askList(t, inf)
	replace(t, q, "102", cm("a", "100")) // requested after the failure
	drain(t, q, inf, 1)
	if !inf.trust.Reached(mustRV(t, "102")) {
		t.Fatal("a list requested after the failure did not end the outage (the refused list was counted as queued)")
	}

	declareRestore(t, inf)
	askList(t, inf)
	if err := q.Replace([]any{cm("bad", "40")}, "60"); err == nil {
		t.Fatal("the queue took a list its transform failed on")
	}
	failTransform = false
	askList(t, inf) // the Reflector lists again
	replace(t, q, "61", cm("a", "40"), cm("bad", "40"))
	drain(t, q, inf, 1)
	if !inf.trust.Reached(mustRV(t, "61")) || cached(inf, "a") != "40" {
		t.Fatalf("the restore's relist, listed again: current %v, a=%q; want 61 and a@40", inf.current(), cached(inf, "a"))
	}
}

// A relist that cannot be applied (here an object without a key) leaves
// the restore waiting for another relist, which is asked for, rather than
// dropping every later list and event for good.
func TestRestoreRelistThatFailsIsAskedForAgain(t *testing.T) {
	inf, q, _ := queuedInformer(t, nil)
	replace(t, q, "100", cm("a", "100"))
	drain(t, q, inf, 1)
	declareRestore(t, inf)
	askList(t, inf)
	if err := q.Replace([]any{"not an object"}, "60"); err != nil {
		t.Fatal(err)
	}
	if _, err := pop(q, inf); err == nil {
		t.Fatal("a list holding an object without a key was applied")
	}
	if !inf.guard.RelistPending() {
		t.Fatal("the restore's relist failed to apply and no other is asked for")
	}
	askList(t, inf)
	replace(t, q, "61", cm("a", "40"))
	drain(t, q, inf, 1)
	if !inf.trust.Reached(mustRV(t, "61")) || cached(inf, "a") != "40" {
		t.Fatalf("after the second relist: current %v, a=%q; want 61 and a@40", inf.current(), cached(inf, "a"))
	}
}

// pagedLW serves lists of objects at rv in pages of at most size items,
// whatever larger limit is asked (as an API server may).
type pagedLW struct {
	rv      string
	objects []*corev1.ConfigMap
	size    int
}

func (p pagedLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	from := 0
	if opts.Continue != "" {
		from, _ = strconv.Atoi(opts.Continue)
	}
	n := len(p.objects) - from
	if opts.Limit > 0 {
		n = min(n, int(opts.Limit), p.size)
	}
	list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: p.rv}}
	for _, o := range p.objects[from : from+n] {
		list.Items = append(list.Items, *o.DeepCopy())
	}
	if from+n < len(p.objects) {
		list.Continue = strconv.Itoa(from + n)
	}
	return list, nil
}

func (pagedLW) Watch(metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil }

// The restore check reads every page of its snapshot (up to its limit): a
// server may answer a list with fewer objects than asked for and a continue
// token (a key gone back on a second page must not go unseen, or waits
// return on the lost history).
func TestRestoreCheckReadsEveryPage(t *testing.T) {
	// Restored without a bumped revision, then outrun by writes: a and b
	// were written again past the floor, c is as cached, d went back.
	lw := pagedLW{rv: "130", size: 2, objects: []*corev1.ConfigMap{cm("a", "110"), cm("b", "120"), cm("c", "30"), cm("d", "5")}}
	regs := newRegressionLog()
	inf, q := queuedInformerOn(t, lw, nil, WithRegressionHandler(regs.handle))
	replace(t, q, "100", cm("a", "10"), cm("b", "20"), cm("c", "30"), cm("d", "40"))
	drain(t, q, inf, 1)
	st := inf.trust.View().Stamp
	if !inf.prover.CheckServer(context.Background(), st) {
		t.Fatal("the check was not answered")
	}
	if got := regs.all(); len(got) != 1 || got[0].Reason != reflector.RegressionKeysWentBack || got[0].Keys != 1 || !slices.Equal(got[0].SampleKeys, []string{"ns/d"}) {
		t.Fatalf("declared %+v, want d gone back", got)
	}
}
