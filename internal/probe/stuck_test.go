package probe

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshinformer/freshinformer/freshness"
)

// movingScheduler is a Scheduler over a stream that moves by one every
// millisecond, counting its probes.
func movingScheduler(t *testing.T) (s *Scheduler, probes *atomic.Int64, applied func() freshness.RV) {
	start := time.Now()
	applied = func() freshness.RV {
		return rvOf(t, 100+uint64(time.Since(start)/time.Millisecond))
	}
	probes = &atomic.Int64{}
	s = testScheduler(10*time.Millisecond, func(context.Context) bool { probes.Add(1); return false })
	s.Applied = applied
	s.Start(context.Background())
	t.Cleanup(s.Stop)
	return s, probes, applied
}

// A stream that keeps moving puts probes off while it reaches the waits'
// targets, but not for a target it has not reached in StuckAfter: that one
// may be beyond the server, which only a probe's read can show.
func TestSchedulerProbesATargetAMovingStreamDoesNotReach(t *testing.T) {
	s, probes, _ := movingScheduler(t)
	s.Join(rvOf(t, 987654321))
	defer s.Leave()
	deadline := time.Now().Add(StuckAfter + 3*time.Second)
	for probes.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no probe %v after a wait joined for a target the moving stream does not reach", StuckAfter+3*time.Second)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Waits the moving stream meets cost no probe, however long waits stay
// pending.
func TestSchedulerDoesNotProbeWhileAMovingStreamMeetsTheWaits(t *testing.T) {
	s, probes, applied := movingScheduler(t)
	end := time.Now().Add(2*StuckAfter + 500*time.Millisecond)
	s.Join(rvOf(t, mustUint(t, applied()))) // one wait more throughout: waits stay pending
	for time.Now().Before(end) {
		s.Join(rvOf(t, mustUint(t, applied())+5)) // reached in about 5 ms
		time.Sleep(20 * time.Millisecond)
		s.Leave()
	}
	s.Leave()
	if n := probes.Load(); n != 0 {
		t.Fatalf("%d probes while the moving stream met every wait", n)
	}
}

func mustUint(t *testing.T, rv freshness.RV) uint64 {
	t.Helper()
	n, ok := rv.Uint64()
	if !ok {
		t.Fatalf("resource version %s beyond 64 bits", rv)
	}
	return n
}

func rvOf(t *testing.T, n uint64) freshness.RV {
	t.Helper()
	rv, err := freshness.ParseRV(strconv.FormatUint(n, 10))
	if err != nil {
		t.Fatal(err)
	}
	return rv
}
