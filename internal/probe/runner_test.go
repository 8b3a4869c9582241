package probe

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunnerRunsOneAtATimeAndCoalesces(t *testing.T) {
	var starts, idles atomic.Int32
	r := &Runner{OnStart: func() { starts.Add(1) }, OnIdle: func() { idles.Add(1) }}
	if r.Run(func(context.Context) { t.Error("ran before Start") }, true) {
		t.Fatal("Run before Start reported a start")
	}
	r.Start(context.Background())
	release := make(chan struct{})
	var runs atomic.Int32
	probe := func(context.Context) {
		if runs.Add(1) == 1 {
			<-release
		}
	}
	if !r.Run(probe, true) {
		t.Fatal("first Run did not start")
	}
	for range 3 { // coalesce into one follow-up
		if r.Run(probe, true) {
			t.Fatal("a second run started while one was in flight")
		}
	}
	if !r.Running() {
		t.Fatal("not Running with a run in flight")
	}
	close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r.WaitIdle(ctx) // returns after OnIdle
	if ctx.Err() != nil || r.Running() {
		t.Fatal("runs did not end")
	}
	if runs.Load() != 2 || r.Runs() != 2 || starts.Load() != 1 || idles.Load() != 1 {
		t.Fatalf("runs %d (Runs %d), starts %d, idles %d; want 2, 2, 1, 1", runs.Load(), r.Runs(), starts.Load(), idles.Load())
	}
	r.Stop()
}

func TestRunnerCancelAndStopEndTheRunInFlight(t *testing.T) {
	r := &Runner{}
	r.Start(context.Background())
	ended := make(chan error, 2)
	probe := func(ctx context.Context) { <-ctx.Done(); ended <- ctx.Err() }
	r.Run(probe, false)
	r.Run(probe, true) // queued, then dropped by Cancel
	time.Sleep(10 * time.Millisecond)
	r.Cancel()
	if err := <-ended; err == nil {
		t.Fatal("Cancel did not end the run")
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.Running() {
		if time.Now().After(deadline) {
			t.Fatal("a run followed a Cancel")
		}
		time.Sleep(time.Millisecond)
	}
	r.Run(probe, false)
	r.Stop() // cancels and waits
	if r.Running() {
		t.Fatal("Running after Stop")
	}
	if r.Run(probe, false) {
		t.Fatal("Run after Stop started")
	}
}

// WaitIdle returns once the run in flight and the one coalesced behind it
// have returned, at once when nothing runs, and when its context ends.
func TestRunnerWaitIdle(t *testing.T) {
	r := &Runner{}
	r.Start(context.Background())
	defer r.Stop()
	r.WaitIdle(context.Background()) // nothing runs

	release := make(chan struct{})
	var runs atomic.Int32
	probe := func(context.Context) {
		if runs.Add(1) == 1 {
			<-release
		}
	}
	r.Run(probe, true)
	r.Run(probe, true) // coalesced behind the first
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	r.WaitIdle(ctx)
	cancel()
	if ctx.Err() == nil || runs.Load() != 1 {
		t.Fatalf("WaitIdle returned with a run in flight (runs %d)", runs.Load())
	}
	close(release)
	r.WaitIdle(context.Background())
	if runs.Load() != 2 || r.Running() {
		t.Fatalf("WaitIdle returned after %d runs, running=%v; want both, idle", runs.Load(), r.Running())
	}
}

// OnIdle runs with the Runner's lock released: what it sets off (a
// tracker's callbacks) may call the Runner, and a run it starts follows.
func TestRunnerOnIdleMayCallTheRunner(t *testing.T) {
	r := &Runner{}
	ran := make(chan uint64, 2)
	r.OnIdle = func() {
		if n := r.Runs(); n == 1 {
			r.Run(func(context.Context) {}, false)
		} else {
			ran <- n
		}
	}
	r.Start(context.Background())
	r.Run(func(context.Context) {}, false)
	select {
	case n := <-ran:
		if n != 2 {
			t.Fatalf("Runs() = %d in the second OnIdle, want 2", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnIdle calling the Runner deadlocked")
	}
	r.Stop()
}
