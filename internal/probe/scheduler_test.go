package probe

import (
	"context"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshinformer/freshinformer/freshness"
)

func testScheduler(delay time.Duration, probe func(context.Context) bool) *Scheduler {
	return &Scheduler{
		Delay:   func() time.Duration { return delay },
		Applied: func() freshness.RV { return freshness.RV{} },
		Lowest:  func() (freshness.RV, bool) { return freshness.RV{}, false },
		Busy:    func() bool { return false },
		Probe:   probe,
	}
}

// No probe timer's callback runs after Stop has
// returned (SPEC guarantee 4: no goroutine outlives the informer, which
// stops its Scheduler before RunWithContext returns). Stopping a timer
// does not wait for a callback already fired. Each run here holds the
// Scheduler's lock while it stops and its timer fires, so that both wait
// for it, the stop first. Without the wait for fired callbacks, a run in a
// few dozen returned from Stop with the callback still to run.
func TestSchedulerStopWaitsForAFiredTimer(t *testing.T) {
	for i := range 60 {
		s := testScheduler(20*time.Millisecond, func(ctx context.Context) bool { <-ctx.Done(); return false })
		s.Start(context.Background())
		s.Join(freshness.RV{})
		s.mu().Lock()
		stopped := make(chan struct{})
		go func() { defer close(stopped); s.Stop() }()
		time.Sleep(30 * time.Millisecond) // Stop waits for the lock, and the timer fires behind it
		s.mu().Unlock()
		<-stopped
		if fireWaiting() {
			t.Fatalf("run %d: a timer's callback runs after Stop returned", i)
		}
		s.Leave()
	}
}

// fireWaiting reports whether a goroutine waits for a lock in fire: one
// that got as far as its last deferred call may still be returning.
func fireWaiting() bool {
	buf := make([]byte, 1<<20)
	lock := regexp.MustCompile(`sync\.\(\*Mutex\)\.Lock`)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, ".(*Scheduler).fire(") && lock.MatchString(g) && !strings.Contains(g, "sync.(*WaitGroup).Done") {
			return true
		}
	}
	return false
}

// A probe runs once waits have made no progress for the delay, one at a
// time however many wait, and none once the last wait has left.
func TestSchedulerProbesWhilePendingOnly(t *testing.T) {
	var probes atomic.Int32
	s := testScheduler(time.Millisecond, func(ctx context.Context) bool { probes.Add(1); return false })
	s.Start(context.Background())
	defer s.Stop()
	s.Join(freshness.RV{})
	s.Join(freshness.RV{})
	deadline := time.Now().Add(5 * time.Second)
	for probes.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d probes while waits were pending, want at least 2", probes.Load())
		}
		time.Sleep(time.Millisecond)
	}
	s.Leave()
	s.Leave()
	for !s.Idle() {
		if time.Now().After(deadline) {
			t.Fatal("not idle after the waits left")
		}
		time.Sleep(time.Millisecond)
	}
	n := probes.Load()
	time.Sleep(50 * time.Millisecond)
	if got := probes.Load(); got != n || s.Probes() != uint64(got) {
		t.Fatalf("probes = %d (counted %d) after the waits left, want %d", got, s.Probes(), n)
	}
}

// After a relist that followed a failure and took d, the delay is at least
// d, for d, and never more than MaxDelay; a negative delay (probing off)
// stays off.
func TestSchedulerDelayAfterASlowRecovery(t *testing.T) {
	s := testScheduler(20*time.Millisecond, nil)
	if d := s.delayLocked(); d != 20*time.Millisecond {
		t.Fatalf("delay before any recovery = %v, want the base 20ms", d)
	}
	s.Recovered(time.Now().Add(-300 * time.Millisecond))
	if d := s.delayLocked(); d < 300*time.Millisecond || d > time.Second {
		t.Fatalf("delay right after a 300ms relist = %v, want about 300ms", d)
	}
	s.Recovered(time.Now().Add(-50 * time.Millisecond))
	time.Sleep(60 * time.Millisecond)
	if d := s.delayLocked(); d != 20*time.Millisecond {
		t.Fatalf("delay once a 50ms relist's 50ms have passed = %v, want the base 20ms again", d)
	}
	s.Recovered(time.Now().Add(-time.Minute))
	if d := s.delayLocked(); d != MaxDelay {
		t.Fatalf("delay after a one-minute relist = %v, want MaxDelay", d)
	}
	off := testScheduler(-1, nil)
	off.Recovered(time.Now().Add(-time.Second))
	if d := off.delayLocked(); d >= 0 {
		t.Fatalf("delay with probing off = %v after a recovery, want it off", d)
	}
}
