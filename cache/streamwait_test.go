package cache

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/freshinformer/freshinformer/freshness"
)

// WaitForStream and AfterStream return when the stream delivers the
// resource version, and send no probe meanwhile, where WaitForFreshness
// would have probed after the probe delay.
func TestStreamWaitsSendNoProbe(t *testing.T) {
	inf, _, w := startScripted(t, listThenWatch, listResponse{rv: "10"}, WithQuietProbeDelay(5*time.Millisecond))
	if !inf.AdmitsNamespace() {
		t.Fatal("AdmitsNamespace() = false for an informer without selectors")
	}
	fired := make(chan error, 1)
	inf.AfterStream("20", func(err error) { fired <- err })
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- inf.WaitForStream(ctx, "20")
	}()
	time.Sleep(100 * time.Millisecond) // twenty probe delays
	select {
	case err := <-done:
		t.Fatalf("WaitForStream(20) = %v before the stream reached 20", err)
	case err := <-fired:
		t.Fatalf("AfterStream(20) ran (%v) before the stream reached 20", err)
	default:
	}
	if p := inf.ProbeStats(); p.Probes != 0 || p.Requests != 0 {
		t.Fatalf("stream waits probed: %+v", p)
	}
	w.Add(cm("a", "20"))
	for _, ch := range []chan error{done, fired} {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatalf("stream wait = %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("stream wait not released by the event at 20")
		}
	}
	if got := cached(inf, "a"); got != "20" {
		t.Errorf("released before the event was in the indexer (cache holds %q)", got)
	}
	if err := inf.WaitForStream(context.Background(), "x"); !errors.Is(err, freshness.ErrIncomparable) {
		t.Errorf("WaitForStream(x) = %v, want ErrIncomparable", err)
	}
	if n := inf.Stats().PendingWaiters; n != 0 {
		t.Errorf("PendingWaiters = %d after the waits ended", n)
	}
}
