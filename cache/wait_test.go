package cache

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/freshinformer/freshinformer/freshness"
)

// The fresh path of WaitForFreshness is a parse and one atomic load: no
// allocation, no lock (SPEC: "one atomic load, zero allocations").
func TestWaitForFreshnessWhenFreshDoesNotAllocate(t *testing.T) {
	inf, _, stop := startQuietFresh(t, 123456789012)
	defer stop()
	ctx := context.Background()
	if allocs := testing.AllocsPerRun(1000, func() {
		if err := inf.WaitForFreshness(ctx, "123456789000"); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Fatalf("WaitForFreshness on a fresh cache allocates %.1f times per call", allocs)
	}
}

// CheckFreshness answers what WaitForFreshness would at once, without
// waiting: nil when reached, the same causes otherwise, and ErrNotFresh for
// a cache behind. It allocates nothing when the cache is fresh.
func TestCheckFreshness(t *testing.T) {
	never := NewSharedIndexInformer(newQuietLW(t, "10"), &corev1.ConfigMap{}, 0, nil, withStartGrace(time.Millisecond))
	_ = never.CheckFreshness("10") // the grace begins
	time.Sleep(2 * time.Millisecond)
	if err := never.CheckFreshness("not-a-number"); !errors.Is(err, freshness.ErrNotStarted) {
		t.Fatalf("CheckFreshness on an informer never started = %v, want ErrNotStarted whatever the resource version", err)
	}

	inf, _, stop := startQuietFresh(t, 1000)
	if err := inf.CheckFreshness("1000"); err != nil {
		t.Fatalf("CheckFreshness(the list's resource version) = %v", err)
	}
	if allocs := testing.AllocsPerRun(1000, func() { _ = inf.CheckFreshness("999") }); allocs != 0 {
		t.Fatalf("CheckFreshness on a fresh cache allocates %.1f times per call", allocs)
	}
	if err := inf.CheckFreshness("0x10"); !errors.Is(err, freshness.ErrIncomparable) {
		t.Fatalf("CheckFreshness(malformed) = %v, want ErrIncomparable", err)
	}
	err := inf.CheckFreshness("1001")
	var we *freshness.WaitError
	if !errors.Is(err, freshness.ErrNotFresh) || !errors.As(err, &we) || we.Target != "1001" || we.Current != "1000" || we.Waited != 0 {
		t.Fatalf("CheckFreshness(ahead of the cache) = %#v, want a WaitError for 1001 at 1000 matching ErrNotFresh", err)
	}
	if strings.Contains(err.Error(), "waited") {
		t.Fatalf("a check says it waited: %q", err)
	}
	stop()
	if err := inf.CheckFreshness("1001"); !errors.Is(err, freshness.ErrStopped) {
		t.Fatalf("CheckFreshness after Stop = %v, want ErrStopped", err)
	}
}
