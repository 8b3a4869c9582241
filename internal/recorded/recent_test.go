package recorded

import (
	"strconv"
	"testing"

	"github.com/freshinformer/freshinformer/freshness"
)

func rv(t *testing.T, n uint64) freshness.RV {
	t.Helper()
	v, err := freshness.ParseRV(strconv.FormatUint(n, 10))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRecentRemembersTheLastValues(t *testing.T) {
	var r Recent
	if r.Contains(rv(t, 1)) {
		t.Fatal("an empty Recent contains 1")
	}
	for n := uint64(1); n <= RecentCapacity+10; n++ {
		r.Add(rv(t, n*2)) // even values only
	}
	for _, c := range []struct {
		n    uint64
		want bool
	}{
		{2, false},                        // forgotten: the ring wrapped
		{20, false},                       // the last one forgotten
		{22, true},                        // the oldest kept
		{2 * (RecentCapacity + 10), true}, // the newest
		{23, false},                       // never added
	} {
		if got := r.Contains(rv(t, c.n)); got != c.want {
			t.Errorf("Contains(%d) = %v, want %v", c.n, got, c.want)
		}
	}
	r.Reset()
	if r.Contains(rv(t, 22)) {
		t.Error("Contains(22) after Reset")
	}
}
