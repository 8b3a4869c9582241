package freshness

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSuspendHoldsReachedTargetsUntilResume(t *testing.T) {
	var tr Tracker
	tr.Advance(mustRV(t, "10"))
	tr.Suspend()
	if tr.Reached(mustRV(t, "5")) {
		t.Fatal("Reached while suspended")
	}
	waited := make(chan error, 1)
	go func() { waited <- tr.Wait(context.Background(), "5") }()
	called := make(chan error, 1)
	tr.AfterFunc(mustRV(t, "12"), func(err error) { called <- err })
	tr.Advance(mustRV(t, "12")) // moves, releases nobody
	select {
	case err := <-waited:
		t.Fatalf("Wait returned %v while suspended", err)
	case err := <-called:
		t.Fatalf("AfterFunc ran with %v while suspended", err)
	case <-time.After(50 * time.Millisecond):
	}
	if got := tr.Current().String(); got != "12" {
		t.Fatalf("Current = %s while suspended, want 12", got)
	}
	tr.Resume()
	if err := <-waited; err != nil {
		t.Fatalf("Wait after Resume: %v", err)
	}
	if err := <-called; err != nil {
		t.Fatalf("AfterFunc after Resume: %v", err)
	}
	if !tr.Reached(mustRV(t, "12")) {
		t.Fatal("not Reached after Resume")
	}
}

func TestSuspendNestsAndResetBelowKeepsWaiters(t *testing.T) {
	var tr Tracker
	tr.Advance(mustRV(t, "10"))
	tr.Suspend()
	tr.Suspend()
	tr.Reset(mustRV(t, "3")) // the probe found the server behind
	tr.Resume()
	if tr.Reached(mustRV(t, "3")) {
		t.Fatal("Reached with one Suspend still open")
	}
	tr.Resume()
	if !tr.Reached(mustRV(t, "3")) || tr.Reached(mustRV(t, "10")) {
		t.Fatalf("after Resume: Current %s, want 3 and 10 not reached", tr.Current())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := tr.Wait(ctx, "10"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait(10) after a reset to 3: %v, want deadline", err)
	}
}

func TestSuspendedWaitEndsWithStopAndContext(t *testing.T) {
	var tr Tracker
	tr.Advance(mustRV(t, "10"))
	tr.Suspend()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := tr.Wait(ctx, "5"); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled Wait while suspended: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- tr.Wait(context.Background(), "5") }()
	time.Sleep(10 * time.Millisecond)
	tr.Stop()
	if err := <-done; !errors.Is(err, ErrStopped) {
		t.Fatalf("Wait after Stop while suspended: %v", err)
	}
}

func TestResumeWithoutSuspendPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	var tr Tracker
	tr.Resume()
}

func TestCompareOrdersThePositionEvenWhileSuspended(t *testing.T) {
	var tr Tracker
	if got := tr.Compare(mustRV(t, "1")); got != -1 {
		t.Fatalf("zero tracker vs 1: %d", got)
	}
	tr.Advance(mustRV(t, "10"))
	for _, suspended := range []bool{false, true} {
		if suspended {
			tr.Suspend()
		}
		for rv, want := range map[string]int{"9": 1, "10": 0, "11": -1, "100000000000000000000000": -1} {
			if got := tr.Compare(mustRV(t, rv)); got != want {
				t.Errorf("suspended=%v: Compare(%s) = %d, want %d", suspended, rv, got, want)
			}
		}
	}
	tr.Resume()
	tr.Advance(mustRV(t, "100000000000000000000000"))
	if got := tr.Compare(mustRV(t, "99")); got != 1 {
		t.Fatalf("beyond 64 bits vs 99: %d", got)
	}
}
