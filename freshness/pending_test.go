package freshness

import (
	"context"
	"testing"
	"time"
)

func TestLowestWaited(t *testing.T) {
	var tr Tracker
	if _, ok := tr.LowestWaited(); ok {
		t.Fatal("LowestWaited with no waiter")
	}
	tr.AfterFunc(mustRV(t, "3"), func(error) {}) // callbacks are not waiters
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 2)
	for _, rv := range []string{"9", "5"} {
		go func() { done <- tr.Wait(ctx, rv) }()
	}
	deadline := time.Now().Add(5 * time.Second)
	for tr.Pending() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("waiters did not block")
		}
		time.Sleep(time.Millisecond)
	}
	if low, ok := tr.LowestWaited(); !ok || low.String() != "5" {
		t.Fatalf("LowestWaited = %v, %v; want 5", low, ok)
	}
	tr.Advance(mustRV(t, "6"))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if low, ok := tr.LowestWaited(); !ok || low.String() != "9" {
		t.Fatalf("LowestWaited after 6 = %v, %v; want 9", low, ok)
	}
	cancel()
	<-done
}
