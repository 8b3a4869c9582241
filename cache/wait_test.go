package cache

import (
	"context"
	"testing"
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
