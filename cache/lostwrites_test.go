package cache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/recorded"
	"github.com/freshinformer/freshinformer/reflector"
)

// etcd restored with --bump-revision from a snapshot older than
// writes the server acknowledged, while the informer had not received them
// (behind, or disconnected). The relist is newer than the writes and holds
// the written keys at older states; the cache never held the writes, so
// nothing cached goes back. The recorded writes prove the loss: one
// regression, declared before WaitForFreshness for a lost write returns.
func TestLostWritesAreDeclared(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode streamMode) {
		regs := newRegressionLog()
		type result struct {
			err         error
			regressions uint64
		}
		results := make(chan result, 2)
		var releasedEarly atomic.Int32
		declare := func(r reflector.Regression) {
			// Waiters for the list's resource version are released after
			// this returns, not while it runs.
			time.Sleep(20 * time.Millisecond)
			releasedEarly.Store(int32(len(results)))
			regs.handle(r)
		}
		inf, lw, w := startScripted(t, mode, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5"), cm("b", "6"), cm("c", "7"), cm("gone", "8")}},
			WithRegressionHandler(declare), WithQuietProbeDelay(-1))
		// Acknowledged by the server, never delivered to the informer.
		for _, o := range []*corev1.ConfigMap{cm("a", "300"), cm("b", "301"), cm("gone", "302")} {
			if err := inf.RecordWrittenObject(o); err != nil {
				t.Fatal(err)
			}
		}
		// Waiters for the lost writes, pending before the relist.
		for _, rv := range []string{"300", "301"} {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				err := inf.WaitForFreshness(ctx, rv)
				results <- result{err, inf.Stats().Regressions}
			}()
		}
		eventually(t, "two pending waits", func() bool { return inf.trust.View().Pending == 2 })

		// The restored server: a, b at their snapshot states; c untouched
		// (no recorded write); gone deleted since (absent: not a proof).
		lw.queueLists(listResponse{rv: "1000000400", objects: []*corev1.ConfigMap{cm("a", "5"), cm("b", "6"), cm("c", "7")}})
		w.Error(goneError())
		r := regs.next(t)
		if r.Reason != reflector.RegressionWritesLost || r.WritesLost != 2 || r.Keys != 0 ||
			!slices.Equal(r.SampleKeys, []string{"ns/a", "ns/b"}) || r.ListResourceVersion != "1000000400" || r.Floor != "10" {
			t.Fatalf("regression %+v", r)
		}
		if n := releasedEarly.Load(); n != 0 {
			t.Fatalf("%d waiters for lost writes were released before the regression was declared", n)
		}
		for range 2 {
			got := <-results
			if got.err != nil || got.regressions != 1 {
				t.Fatalf("WaitForFreshness for a lost write = %v with %d regressions counted when it returned; want nil after the declaration", got.err, got.regressions)
			}
		}
		// A later healthy relist declares nothing more: the lost writes are forgotten.
		lw.queueLists(listResponse{rv: "1000000500", objects: []*corev1.ConfigMap{cm("a", "5"), cm("b", "6")}})
		lw.nextWatcher().Error(goneError())
		waitFresh(t, inf, "1000000500")
		time.Sleep(50 * time.Millisecond)
		if s := inf.Stats(); s.Regressions != 1 || len(regs.all()) != 1 {
			t.Fatalf("stats %+v, regressions %v: want exactly one", s.Stats, regs.all())
		}
	})
}

// Writes the server kept are never declared lost, whether the stream
// delivered them, a relist brings them, or a relist no longer holds their
// keys (deleted since); writes newer than a list are not judged by it.
func TestKeptWritesAreNotDeclaredLost(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode streamMode) {
		regs := newRegressionLog()
		inf, lw, w := startScripted(t, mode, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5"), cm("b", "6"), cm("c", "7")}},
			WithRegressionHandler(regs.handle), WithQuietProbeDelay(-1))
		record := func(o *corev1.ConfigMap) {
			t.Helper()
			if err := inf.RecordWrittenObject(o); err != nil {
				t.Fatal(err)
			}
		}
		record(cm("a", "20"))
		w.Modify(cm("a", "20")) // delivered
		waitFresh(t, inf, "20")
		record(cm("a", "25"))
		record(cm("b", "30"))
		record(cm("c", "35"))
		record(cm("d", "60")) // newer than the next list
		// The relist holds a updated since, b as written, c deleted since.
		lw.queueLists(listResponse{rv: "50", objects: []*corev1.ConfigMap{cm("a", "40"), cm("b", "30")}})
		w.Error(goneError())
		waitFresh(t, inf, "50")
		// d's write is still to come; a relist at 70 holds it.
		lw.queueLists(listResponse{rv: "70", objects: []*corev1.ConfigMap{cm("a", "40"), cm("b", "30"), cm("d", "60")}})
		lw.nextWatcher().Error(goneError())
		waitFresh(t, inf, "70")
		time.Sleep(50 * time.Millisecond)
		if s := inf.Stats(); s.Regressions != 0 || len(regs.all()) != 0 {
			t.Fatalf("stats %+v, regressions %v: want none", s.Stats, regs.all())
		}
	})
}

// A list that both moves cached keys back and lacks recorded writes is one
// regression, KeysWentBack, counting both.
func TestKeysBackAndLostWritesAreOneRegression(t *testing.T) {
	regs := newRegressionLog()
	inf, lw, w := startScripted(t, watchList, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5"), cm("b", "6")}},
		WithRegressionHandler(regs.handle), WithQuietProbeDelay(-1))
	w.Modify(cm("a", "300"))
	waitFresh(t, inf, "300")
	if err := inf.RecordWrittenObject(cm("b", "301")); err != nil {
		t.Fatal(err)
	}
	lw.queueLists(listResponse{rv: "1000000400", objects: []*corev1.ConfigMap{cm("a", "5"), cm("b", "6")}})
	w.Error(goneError())
	r := regs.next(t)
	if r.Reason != reflector.RegressionKeysWentBack || r.Keys != 1 || r.WritesLost != 1 || !slices.Equal(r.SampleKeys, []string{"ns/a", "ns/b"}) {
		t.Fatalf("regression %+v", r)
	}
	waitFresh(t, inf, "1000000400")
	time.Sleep(50 * time.Millisecond)
	if n := len(regs.all()); n != 1 {
		t.Fatalf("%d regressions declared, want 1", n)
	}
}

func TestRecordWrittenObjectRejectsMalformed(t *testing.T) {
	inf, _, _ := startScripted(t, watchList, listResponse{rv: "10"})
	err := inf.RecordWrittenObject(&metav1.ObjectMeta{Namespace: "ns", Name: "a", ResourceVersion: "x1"})
	if !errors.Is(err, freshness.ErrIncomparable) {
		t.Fatalf("RecordWrittenObject(malformed) = %v, want ErrIncomparable", err)
	}
}

// The recorded-write keys of a healthy informer are pruned as the stream
// applies them: with many distinct keys written over time, the map stays
// about twice the writes in flight, far below its cap.
func TestWrittenKeysStayBoundedOnAHealthyStream(t *testing.T) {
	inf, _, w := startScripted(t, listThenWatch, listResponse{rv: "10"})
	const inFlight, rounds = 500, 20
	rv := 10
	peak := 0
	for range rounds {
		for range inFlight {
			rv++
			if err := inf.RecordWrittenObject(cm(fmt.Sprintf("k%d", rv), strconv.Itoa(rv))); err != nil {
				t.Fatal(err)
			}
			inf.applyMu.Lock()
			peak = max(peak, inf.written.Len())
			inf.applyMu.Unlock()
		}
		w.Action(watch.Bookmark, bookmark(strconv.Itoa(rv)))
		waitFresh(t, inf, strconv.Itoa(rv))
	}
	if peak > 2*inFlight+recorded.MinPrune {
		t.Fatalf("%d distinct keys written, %d in flight at most: the map peaked at %d keys", rounds*inFlight, inFlight, peak)
	}
}

// Regressions found by two changes (a list's, a snapshot's) before either
// is declared each hold the tracker; declaring them releases both holds,
// or every wait would block for the informer's life.
func TestEveryHoldUntilDeclaredIsReleased(t *testing.T) {
	regs := newRegressionLog()
	inf, _, w := startScripted(t, listThenWatch, listResponse{rv: "10"}, WithRegressionHandler(regs.handle))
	w.Add(cm("a", "100"))
	waitFresh(t, inf, "100")
	inf.applyMu.Lock()
	for _, reason := range []reflector.RegressionReason{reflector.RegressionKeysWentBack, reflector.RegressionWritesLost} {
		inf.found(reflector.Regression{Reason: reason, ListResourceVersion: "100", Floor: "100"}, false)
	}
	if inf.trust.Reached(mustRV(t, "100")) {
		inf.unlockApply()
		t.Fatal("waits released before the regressions were declared")
	}
	inf.unlockApply()
	regs.next(t)
	regs.next(t)
	if !inf.trust.Reached(mustRV(t, "100")) {
		t.Fatal("the tracker is still held after both regressions were declared")
	}
}
