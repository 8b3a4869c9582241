package freshness

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// targets returns how many targets the tracker holds, in the heap and by RV.
func (t *Tracker) targetCounts() (heapLen, mapLen int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.targets), len(t.byRV)
}

func TestAfterFuncCancelableRunsOnceReached(t *testing.T) {
	var tr Tracker
	tr.Advance(rvOf(5))
	var got []error
	stop := tr.AfterFuncCancelable(rvOf(7), func(err error) { got = append(got, err) })
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
	if h, m := tr.targetCounts(); h != 0 || m != 0 {
		t.Errorf("targets left: heap %d, map %d", h, m)
	}
}

func TestAfterFuncCancelableAlreadyReachedRunsAtOnce(t *testing.T) {
	var tr Tracker
	tr.Advance(rvOf(9))
	ran := 0
	stop := tr.AfterFuncCancelable(rvOf(9), func(err error) {
		if err != nil {
			t.Errorf("err = %v", err)
		}
		ran++
	})
	if ran != 1 || stop() {
		t.Fatalf("ran %d times, stop = true; want once, false", ran)
	}
}

func TestAfterFuncCancelableStopLeavesNothing(t *testing.T) {
	var tr Tracker
	ran := false
	stop := tr.AfterFuncCancelable(rvOf(10), func(error) { ran = true })
	if h, _ := tr.targetCounts(); h != 1 {
		t.Fatalf("heap %d, want 1 target", h)
	}
	if !stop() {
		t.Fatal("stop of a pending callback reported false")
	}
	if stop() {
		t.Error("second stop reported true")
	}
	if h, m := tr.targetCounts(); h != 0 || m != 0 {
		t.Errorf("targets left after stop: heap %d, map %d", h, m)
	}
	tr.Advance(rvOf(10))
	tr.Stop()
	if ran {
		t.Error("a stopped callback ran")
	}
}

func TestAfterFuncCancelableStopKeepsOthersOfTheTarget(t *testing.T) {
	var tr Tracker
	var a, b atomic.Int32
	stopA := tr.AfterFuncCancelable(rvOf(3), func(error) { a.Add(1) })
	tr.AfterFuncCancelable(rvOf(3), func(error) { b.Add(1) })
	ctx, cancel := context.WithCancel(context.Background())
	ch := waitAsync(t, &tr, ctx, "3")
	defer cancel()
	if !stopA() {
		t.Fatal("stop reported false")
	}
	if h, _ := tr.targetCounts(); h != 1 {
		t.Fatalf("the target shared with another callback and a waiter was removed (heap %d)", h)
	}
	tr.Advance(rvOf(3))
	if err := expectResult(t, ch); err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if a.Load() != 0 || b.Load() != 1 {
		t.Errorf("stopped ran %d times, kept ran %d times; want 0 and 1", a.Load(), b.Load())
	}
}

func TestAfterFuncCancelableReleasedByStopAndIncomparable(t *testing.T) {
	var tr Tracker
	var errs []error
	tr.AfterFuncCancelable(rvOf(4), func(err error) { errs = append(errs, err) })
	tr.SetIncomparable(ErrIncomparable)
	tr.AfterFuncCancelable(rvOf(4), func(err error) { errs = append(errs, err) }) // at once
	tr.Reset(rvOf(1))
	stop := tr.AfterFuncCancelable(rvOf(4), func(err error) { errs = append(errs, err) })
	tr.Stop()
	if stop() {
		t.Error("stop after the tracker stopped reported true")
	}
	if len(errs) != 3 || !errors.Is(errs[0], ErrIncomparable) || !errors.Is(errs[1], ErrIncomparable) || !errors.Is(errs[2], ErrStopped) {
		t.Fatalf("errs = %v; want incomparable, incomparable, stopped", errs)
	}
	if h, m := tr.targetCounts(); h != 0 || m != 0 {
		t.Errorf("targets left: heap %d, map %d", h, m)
	}
}

func TestAfterFuncCancelableStopFromCallback(t *testing.T) {
	var tr Tracker
	var stop func() bool
	done := make(chan bool, 1)
	stop = tr.AfterFuncCancelable(rvOf(2), func(error) { done <- stop() })
	tr.Advance(rvOf(2))
	if <-done {
		t.Error("stop from inside the released callback reported true")
	}
}

// TestAfterFuncCancelableRace runs each callback exactly once or never,
// with stop's answer saying which, while the tracker advances.
func TestAfterFuncCancelableRace(t *testing.T) {
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
		stop := tr.AfterFuncCancelable(rvOf(uint64(i%50+n/2)), func(error) { ran[i].Add(1) })
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
	if h, m := tr.targetCounts(); h != 0 || m != 0 {
		t.Errorf("targets left: heap %d, map %d", h, m)
	}
}

func TestHeldCallbacksRunWhenTheHoldEnds(t *testing.T) {
	var tr Tracker
	var got []string
	tr.AfterFunc(rvOf(3), func(err error) { got = append(got, "pending") })
	tr.HoldCallbacks()
	tr.Advance(rvOf(3))
	tr.AfterFunc(rvOf(2), func(err error) { got = append(got, "reached") }) // already reached: held too
	if len(got) != 0 {
		t.Fatalf("callbacks ran during the hold: %v", got)
	}
	tr.HoldCallbacks() // nested
	tr.RunHeldCallbacks()
	if len(got) != 0 {
		t.Fatalf("callbacks ran before the last hold ended: %v", got)
	}
	tr.RunHeldCallbacks()
	if len(got) != 2 || got[0] != "pending" || got[1] != "reached" {
		t.Fatalf("got %v, want [pending reached]", got)
	}
	// Without a hold, callbacks run at once again.
	tr.AfterFunc(rvOf(1), func(error) { got = append(got, "after") })
	if len(got) != 3 {
		t.Fatalf("got %v after the hold ended", got)
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

func TestPanickingCallbackDoesNotLoseTheOthers(t *testing.T) {
	var tr Tracker
	var ran []int
	for i := range 3 {
		tr.AfterFunc(rvOf(4), func(error) {
			ran = append(ran, i)
			if i == 0 {
				panic("callback 0")
			}
		})
	}
	func() {
		defer func() {
			if r := recover(); r != "callback 0" {
				t.Errorf("recovered %v, want the callback's panic", r)
			}
		}()
		tr.Advance(rvOf(4))
	}()
	if len(ran) != 3 {
		t.Fatalf("ran %v, want all three callbacks", ran)
	}
	if err := tr.Wait(context.Background(), "4"); err != nil {
		t.Fatalf("tracker unusable after a callback panicked: %v", err)
	}
}
