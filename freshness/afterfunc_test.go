package freshness

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// errLeftBehind is what leftTargets releases a left-over target with.
var errLeftBehind = errors.New("target left behind")

// leftTargets reports how many targets tr still holds (waited for or
// called back at), releasing them with errLeftBehind: call it last. It
// goes through the tracker's Set only; internal/rvwait's own tests check
// that its heap and map agree.
func leftTargets(tr *Tracker) int {
	n := 0
	tr.s.Lock()
	due := tr.s.FailAboveLocked(RV{}, tr.s.SeqLocked(), func(RV) error { n++; return errLeftBehind })
	tr.s.Unlock()
	due.Run()
	return n
}

// TestLeftTargetsSeesPendingTargets shows that leftTargets can fail: it
// counts a callback's target, and a waiter's.
func TestLeftTargetsSeesPendingTargets(t *testing.T) {
	var tr Tracker
	tr.AfterFunc(rvOf(10), func(error) {})
	tr.AfterFunc(rvOf(10), func(error) {})
	ch := waitAsync(t, &tr, context.Background(), "20")
	if n := leftTargets(&tr); n != 2 {
		t.Fatalf("leftTargets = %d, want 2 (10 and 20)", n)
	}
	if err := expectResult(t, ch); !errors.Is(err, errLeftBehind) {
		t.Fatalf("waiter released by leftTargets: %v", err)
	}
	if n := leftTargets(&tr); n != 0 {
		t.Fatalf("leftTargets = %d after releasing them, want 0", n)
	}
}

func TestAfterFuncRunsOnceReached(t *testing.T) {
	var tr Tracker
	tr.Advance(rvOf(5))
	var got []error
	stop := tr.AfterFunc(rvOf(7), func(err error) { got = append(got, err) })
	tr.Advance(rvOf(6))
	if len(got) != 0 {
		t.Fatalf("ran before the target: %v", got)
	}
	tr.Advance(rvOf(7))
	if len(got) != 1 || got[0] != nil {
		t.Fatalf("got %v, want one nil", got)
	}
	if stop() {
		t.Error("stop after the callback ran reported that it stopped it")
	}
	if n := leftTargets(&tr); n != 0 {
		t.Errorf("%d targets left", n)
	}
}

func TestAfterFuncAlreadyReachedRunsAtOnce(t *testing.T) {
	var tr Tracker
	tr.Advance(rvOf(9))
	ran := 0
	stop := tr.AfterFunc(rvOf(9), func(err error) {
		if err != nil {
			t.Errorf("err = %v", err)
		}
		ran++
	})
	if ran != 1 || stop() {
		t.Fatalf("ran %d times, stop = true; want once, false", ran)
	}
}

func TestAfterFuncStopLeavesNothing(t *testing.T) {
	var tr Tracker
	ran := false
	stop := tr.AfterFunc(rvOf(10), func(error) { ran = true })
	if !stop() {
		t.Fatal("stop of a pending callback reported false")
	}
	if stop() {
		t.Error("second stop reported true")
	}
	if n := leftTargets(&tr); n != 0 {
		t.Errorf("%d targets left after stop", n)
	}
	tr.Advance(rvOf(10))
	tr.Stop()
	if ran {
		t.Error("a stopped callback ran")
	}
}

func TestAfterFuncStopKeepsOthersOfTheTarget(t *testing.T) {
	var tr Tracker
	var a, b atomic.Int32
	stopA := tr.AfterFunc(rvOf(3), func(error) { a.Add(1) })
	tr.AfterFunc(rvOf(3), func(error) { b.Add(1) })
	ctx, cancel := context.WithCancel(context.Background())
	ch := waitAsync(t, &tr, ctx, "3")
	defer cancel()
	if !stopA() {
		t.Fatal("stop reported false")
	}
	// The target shared with another callback and a waiter stays: both
	// are released by the advance.
	tr.Advance(rvOf(3))
	if err := expectResult(t, ch); err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if a.Load() != 0 || b.Load() != 1 {
		t.Errorf("stopped ran %d times, kept ran %d times; want 0 and 1", a.Load(), b.Load())
	}
	if n := leftTargets(&tr); n != 0 {
		t.Errorf("%d targets left", n)
	}
}

func TestAfterFuncReleasedByStop(t *testing.T) {
	var tr Tracker
	tr.Advance(rvOf(1))
	var errs []error
	stop := tr.AfterFunc(rvOf(4), func(err error) { errs = append(errs, err) })
	tr.Stop()
	if stop() {
		t.Error("stop after the tracker stopped reported true")
	}
	late := tr.AfterFunc(rvOf(5), func(err error) { errs = append(errs, err) }) // at once
	if late() {
		t.Error("stop of a callback that ran at once reported true")
	}
	if len(errs) != 2 || !errors.Is(errs[0], ErrStopped) || !errors.Is(errs[1], ErrStopped) {
		t.Fatalf("errs = %v; want stopped, stopped", errs)
	}
	if n := leftTargets(&tr); n != 0 {
		t.Errorf("%d targets left", n)
	}
}

func TestAfterFuncStopFromCallback(t *testing.T) {
	var tr Tracker
	var stop func() bool
	done := make(chan bool, 1)
	stop = tr.AfterFunc(rvOf(2), func(error) { done <- stop() })
	tr.Advance(rvOf(2))
	select {
	case stopped := <-done:
		if stopped {
			t.Error("stop from inside the released callback reported true")
		}
	default:
		t.Fatal("the callback did not run during Advance")
	}
}

// TestAfterFuncStopRace runs each callback exactly once or never, with
// stop's answer saying which, while the tracker advances.
func TestAfterFuncStopRace(t *testing.T) {
	var tr Tracker
	const n = 2000
	var ran [n]atomic.Int32
	var stopped [n]bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range uint64(n) {
			tr.Advance(rvOf(i + 1))
		}
	})
	for i := range n {
		stop := tr.AfterFunc(rvOf(uint64(i%50+n/2)), func(error) { ran[i].Add(1) })
		if i%2 == 0 {
			stopped[i] = stop()
		}
	}
	wg.Wait()
	tr.Stop()
	for i := range n {
		want := int32(1)
		if stopped[i] {
			want = 0
		}
		if got := ran[i].Load(); got != want {
			t.Fatalf("callback %d ran %d times, stop said stopped=%v", i, got, stopped[i])
		}
	}
	if n := leftTargets(&tr); n != 0 {
		t.Errorf("%d targets left", n)
	}
}

// A callback may call back into the tracker, even to register another
// callback or advance it, without deadlocking.
func TestAfterFuncCallbackMayReenterTheTracker(t *testing.T) {
	var tr Tracker
	var inner atomic.Bool
	tr.AfterFunc(rvOf(5), func(error) {
		tr.Advance(rvOf(6))
		tr.AfterFunc(rvOf(6), func(error) { inner.Store(true) })
	})
	tr.Advance(rvOf(5))
	if !inner.Load() || tr.Current().String() != "6" {
		t.Fatalf("inner callback ran = %v, current %q", inner.Load(), tr.Current())
	}
}

// recordPanics makes utilruntime's panic handlers record what they are
// handed (not log it) until the test ends.
func recordPanics(t *testing.T) *[]any {
	t.Helper()
	old := utilruntime.PanicHandlers
	var got []any
	utilruntime.PanicHandlers = []func(context.Context, any){func(_ context.Context, r any) { got = append(got, r) }}
	t.Cleanup(func() { utilruntime.PanicHandlers = old })
	return &got
}

func setReallyCrash(t *testing.T, v bool) {
	t.Helper()
	old := utilruntime.ReallyCrash
	utilruntime.ReallyCrash = v
	t.Cleanup(func() { utilruntime.ReallyCrash = old })
}

// threePanicking registers three callbacks at 4 on tr, the first of which
// panics, and returns the order they ran in.
func threePanicking(tr *Tracker) *[]int {
	var ran []int
	for i := range 3 {
		tr.AfterFunc(rvOf(4), func(error) {
			ran = append(ran, i)
			if i == 0 {
				panic("callback 0")
			}
		})
	}
	return &ran
}

// With utilruntime.ReallyCrash off, a panicking callback is reported and
// the callbacks after it still run.
func TestPanickingCallbackDoesNotLoseTheOthers(t *testing.T) {
	reported := recordPanics(t)
	setReallyCrash(t, false)
	var tr Tracker
	ran := threePanicking(&tr)
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Advance panicked with ReallyCrash off: %v", r)
			}
		}()
		tr.Advance(rvOf(4))
	}()
	if !slices.Equal(*ran, []int{0, 1, 2}) {
		t.Fatalf("ran %v, want all three callbacks", *ran)
	}
	if !slices.Equal(*reported, []any{"callback 0"}) {
		t.Fatalf("reported %v, want the callback's panic once", *reported)
	}
	expectUsableAfterPanic(t, &tr)
}

// With utilruntime.ReallyCrash on (the default), the panic is reported,
// then goes on up through Advance, leaving the tracker consistent.
func TestPanickingCallbackPropagatesWithReallyCrash(t *testing.T) {
	reported := recordPanics(t)
	setReallyCrash(t, true)
	var tr Tracker
	ran := threePanicking(&tr)
	func() {
		defer func() {
			if r := recover(); r != "callback 0" {
				t.Errorf("recovered %v, want the callback's panic", r)
			}
		}()
		tr.Advance(rvOf(4))
	}()
	if !slices.Equal(*reported, []any{"callback 0"}) {
		t.Fatalf("reported %v, want the panic reported before it propagated", *reported)
	}
	if !slices.Equal(*ran, []int{0}) {
		t.Fatalf("ran %v, want only the panicking callback (the process is meant to crash)", *ran)
	}
	expectUsableAfterPanic(t, &tr)
}

func expectUsableAfterPanic(t *testing.T, tr *Tracker) {
	t.Helper()
	if cur := tr.Current().String(); cur != "4" {
		t.Fatalf("Current = %q after the panicking advance, want 4", cur)
	}
	if err := tr.Wait(context.Background(), "4"); err != nil {
		t.Fatalf("tracker unusable after a callback panicked: %v", err)
	}
	var after atomic.Bool
	tr.AfterFunc(rvOf(5), func(error) { after.Store(true) })
	tr.Advance(rvOf(5))
	if !after.Load() {
		t.Fatal("a callback registered after the panic did not run")
	}
	if n := leftTargets(tr); n != 0 || tr.Pending() != 0 {
		t.Fatalf("%d targets, %d waiters left", n, tr.Pending())
	}
}
