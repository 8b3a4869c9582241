package reflector

import (
	"testing"

	"github.com/freshinformer/freshinformer/freshness"
)

func TestPlausibleBound(t *testing.T) {
	rv := func(s string) freshness.RV {
		r, err := freshness.ParseRV(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, c := range []struct {
		rv, floor string
		want      bool
	}{
		{"5", "", true}, // no floor: everything
		{"11", "10", true},
		{"5", "10", true}, // older is plausible: ordering rejects it elsewhere
		{"9999999999999999999999999999999999999999", "10", false},
		{"99999999999999999999999", "18446744073709551615", false}, // beyond 64 bits: one more digit at most
		{"184467440737095516150", "18446744073709551615", true},
		{"4294967396", "10", true},              // 10*10 + 2^32
		{"4294967397", "10", false},             // one past the bound
		{"1000000000010", "100", false},         // far ahead
		{"1000000000", "100000000", true},       // a bumped revision passes
		{"99999999999999999999999", "1", false}, // beyond 64 bits
	} {
		var floor freshness.RV
		if c.floor != "" {
			floor = rv(c.floor)
		}
		if got := Plausible(rv(c.rv), floor); got != c.want {
			t.Errorf("Plausible(%s, floor %q) = %v, want %v", c.rv, c.floor, got, c.want)
		}
	}
}
