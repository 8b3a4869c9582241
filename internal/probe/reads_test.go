package probe

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/freshinformer/freshinformer/freshness"
)

func rv(t *testing.T, n uint64) freshness.RV {
	t.Helper()
	r, err := freshness.ParseRV(strconv.FormatUint(n, 10))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestReadsKeepsTheNewest: concurrent reads answering in any order leave
// the newest answer.
func TestReadsKeepsTheNewest(t *testing.T) {
	var r Reads
	if got, _ := r.Newest(); !got.IsZero() {
		t.Fatalf("zero Reads: newest %v", got)
	}
	base := time.Now()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				n := uint64(1 + (i*4+g*7)%800)
				r.Record(base.Add(time.Duration(n)*time.Millisecond), rv(t, n))
			}
		})
	}
	wg.Wait()
	if got, age := r.Newest(); got.String() != "800" || age < 0 {
		t.Errorf("newest %v (age %v), want 800", got, age)
	}
	if n := r.Samples(); n == 0 || n > MaxSamples {
		t.Errorf("%d samples, want 1..%d", n, MaxSamples)
	}
}

// TestReadsStaleness: the bound is now minus the newest sample time the
// cache has covered; a sample made useless by a later, no newer one is
// dropped, and so is one recorded late.
func TestReadsStaleness(t *testing.T) {
	var r Reads
	base := time.Unix(1000, 0)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	if _, ok := r.Staleness(rv(t, 100), at(0)); ok {
		t.Fatal("a bound before any sample")
	}
	r.Sample(at(10), rv(t, 10))
	r.Sample(at(20), rv(t, 30))
	r.Sample(at(30), rv(t, 20)) // reaching 20 implies reaching 30: the sample at 20 goes
	r.Sample(at(25), rv(t, 50)) // late: dropped
	if n := r.Samples(); n != 2 {
		t.Fatalf("%d samples, want 2 (10@10, 20@30)", n)
	}
	if _, ok := r.Staleness(freshness.RV{}, at(40)); ok {
		t.Error("a bound with nothing covered")
	}
	if d, ok := r.Staleness(rv(t, 15), at(40)); !ok || d != 30*time.Millisecond {
		t.Errorf("covering 15: %v, %v; want 30ms (sample at 10)", d, ok)
	}
	if n := r.Samples(); n != 1 {
		t.Errorf("%d samples after covering the first, want 1", n)
	}
	if d, ok := r.Staleness(rv(t, 20), at(50)); !ok || d != 20*time.Millisecond {
		t.Errorf("covering 20: %v, %v; want 20ms (sample at 30)", d, ok)
	}
	if d, ok := r.Staleness(freshness.RV{}, at(60)); !ok || d != 30*time.Millisecond {
		t.Errorf("not trusted now: %v, %v; want the last bound, 30ms", d, ok)
	}
	if d, ok := r.Staleness(freshness.RV{}, at(0)); !ok || d != 0 {
		t.Errorf("clock before the sample: %v, %v; want 0", d, ok)
	}
}

// TestReadsThinsOutSamples: past MaxSamples every other sample goes, the
// newest stays.
func TestReadsThinsOutSamples(t *testing.T) {
	var r Reads
	base := time.Unix(1000, 0)
	for i := 1; i <= 3*MaxSamples; i++ {
		r.Sample(base.Add(time.Duration(i)*time.Millisecond), rv(t, uint64(i)))
	}
	if n := r.Samples(); n > MaxSamples || n < MaxSamples/2 {
		t.Errorf("%d samples, want %d..%d", n, MaxSamples/2, MaxSamples)
	}
	last := base.Add(3 * MaxSamples * time.Millisecond)
	if d, ok := r.Staleness(rv(t, 3*MaxSamples), last); !ok || d != 0 {
		t.Errorf("covering the newest: %v, %v; want 0", d, ok)
	}
}
