package consistency_test

import (
	"testing"
	"time"

	"github.com/freshinformer/freshinformer/consistency"
)

// The Store's writes come back on its informers' own streams: neither the
// bounded wait nor the callback kept after a skip makes the informer probe
// the server for them. Under watch lag a probe would only ask what the
// stream is about to deliver (kcm-bench counted these requests: a
// snapshot list, often an auxiliary watch, per quiet spell of 20 ms).
func TestWaitsForOwnWritesSendNoProbe(t *testing.T) {
	e := newEnv(t)
	m := newRecorder()
	s := consistency.NewStore(e.f, consistency.WithMetrics(m), consistency.WithMaxWait(400*time.Millisecond))
	e.lag.Hold()
	rv := e.createPod(t, "p1")
	s.WroteAt(owner, "uid1", podsGR, rv)
	go func() { // the event arrives well after the probe delay (20 ms)
		time.Sleep(200 * time.Millisecond)
		e.lag.Release()
	}()
	if err := s.EnsureReady(owner); err != nil {
		t.Fatalf("EnsureReady = %v, want nil once the stream delivers the write", err)
	}
	if _, ok, _ := e.pods.GetIndexer().GetByKey("ns/p1"); !ok {
		t.Fatal("EnsureReady returned nil before the cache held the written pod")
	}
	if p := e.pods.ProbeStats(); p.Probes != 0 || p.Requests != 0 || p.Snapshots != 0 {
		t.Errorf("the bounded wait probed the server: %+v", p)
	}

	// Skipped: the callback kept on the informer waits for the stream too.
	s2 := consistency.NewStore(e.f, consistency.WithMetrics(m), consistency.WithMaxWait(time.Millisecond))
	e.lag.Hold()
	rv = e.createPod(t, "p2")
	s2.WroteAt(owner, "uid1", podsGR, rv)
	if err := s2.EnsureReady(owner); err == nil {
		t.Fatal("EnsureReady = nil with the write held back")
	}
	time.Sleep(200 * time.Millisecond)
	if p := e.pods.ProbeStats(); p.Probes != 0 || p.Requests != 0 || p.Snapshots != 0 {
		t.Errorf("the callback kept after a skip probed the server: %+v", p)
	}
	e.lag.Release()
	eventually(t, "the callback kept after the skip to fire", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.fresh) == 1
	})
	if err := s2.EnsureReady(owner); err != nil {
		t.Fatalf("EnsureReady after the callback fired = %v", err)
	}
}
