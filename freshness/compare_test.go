package freshness

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// seeds are the inputs the issue names plus the edges of the 64-bit fast
// path and of KEP-5504's uint128 bound.
var seeds = []string{
	"", "0", "00", "01", "1", "9", "10", "99", "100",
	strings.Repeat("9", 19), "1" + strings.Repeat("0", 19),
	"18446744073709551615", "18446744073709551616", "18446744073709551614",
	strings.Repeat("1", 20), strings.Repeat("9", 20),
	"340282366920938463463374607431768211455", "340282366920938463463374607431768211456",
	strings.Repeat("7", 39), strings.Repeat("7", 40), strings.Repeat("3", 100),
	"١", "1١", " 1", "1 ", "+1", "-1", "1e3", "0x10", "1.0", "1\x00", "\x00", "12345678\x00",
	"1234567:", "1234567/", "12345678901234567890/", "١٢٣", "\xff", "1\xff2", "9999999\x39",
}

func TestCompareMatchesApimachinery(t *testing.T) {
	for _, a := range seeds {
		for _, b := range seeds {
			checkCompare(t, a, b)
		}
	}
}

func TestCompareOrders(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"1", "2", -1}, {"2", "1", 1}, {"7", "7", 0},
		{"9", "10", -1}, {"100", "99", 1},
		{"18446744073709551615", "18446744073709551616", -1},
		{strings.Repeat("9", 40), "1" + strings.Repeat("0", 40), -1},
		{"123456789012", "123456789013", -1},
	} {
		got, err := Compare(tc.a, tc.b)
		if err != nil || got != tc.want {
			t.Errorf("Compare(%q, %q) = %d, %v; want %d, nil", tc.a, tc.b, got, err, tc.want)
		}
	}
}

func TestCompareErrorNamesOffendingValue(t *testing.T) {
	_, err := Compare("12", "1\x00")
	var ie *IncomparableError
	if !errors.As(err, &ie) || ie.ResourceVersion != "1\x00" {
		t.Fatalf("Compare error = %v, want *IncomparableError for the second argument", err)
	}
	if !errors.Is(err, ErrIncomparable) {
		t.Fatalf("errors.Is(%v, ErrIncomparable) = false", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `"1\x00"`) {
		t.Errorf("message %q does not show the NUL byte quoted", msg)
	}
	// The first malformed argument is the one named, as apimachinery does.
	_, err = Compare("x", "y")
	if !errors.As(err, &ie) || ie.ResourceVersion != "x" {
		t.Errorf("Compare(x, y) names %v, want x", err)
	}
}

func TestIncomparableErrorTruncatesLongValues(t *testing.T) {
	long := strings.Repeat("a", 10_000)
	msg := (&IncomparableError{ResourceVersion: long}).Error()
	if len(msg) > 200 || !strings.Contains(msg, "10000 bytes") {
		t.Errorf("message for a 10000-byte value is %d bytes: %.120q", len(msg), msg)
	}
}

func TestParseRV(t *testing.T) {
	for _, s := range seeds {
		rv, err := ParseRV(s)
		_, cerr := Compare(s, s)
		if (err == nil) != (cerr == nil) {
			t.Fatalf("ParseRV(%q) error %v, Compare error %v", s, err, cerr)
		}
		if err != nil {
			if !errors.Is(err, ErrIncomparable) || !rv.IsZero() {
				t.Errorf("ParseRV(%q) = %v, %v; want zero RV and ErrIncomparable", s, rv, err)
			}
			continue
		}
		if rv.String() != s {
			t.Errorf("ParseRV(%q).String() = %q", s, rv.String())
		}
		n, fits := rv.Uint64()
		want, perr := strconv.ParseUint(s, 10, 64)
		if fits != (perr == nil) || (fits && n != want) {
			t.Errorf("ParseRV(%q).Uint64() = %d, %v; strconv says %d, %v", s, n, fits, want, perr)
		}
	}
}

func TestZeroRVIsOlderThanAll(t *testing.T) {
	var zero RV
	for _, s := range []string{"1", "18446744073709551615", strings.Repeat("9", 30)} {
		rv, _ := ParseRV(s)
		if zero.Compare(rv) != -1 || rv.Compare(zero) != 1 || zero.Compare(zero) != 0 {
			t.Errorf("zero RV does not order below %s", s)
		}
	}
}

// checkCompare is the differential oracle shared by the table test and the
// fuzz target: Compare, RV.Compare and apimachinery agree.
func checkCompare(t *testing.T, a, b string) {
	t.Helper()
	want, wantErr := resourceversion.CompareResourceVersion(a, b)
	got, err := Compare(a, b)
	if (err == nil) != (wantErr == nil) || got != want {
		t.Fatalf("Compare(%q, %q) = %d, %v; apimachinery says %d, %v", a, b, got, err, want, wantErr)
	}
	if err != nil {
		if !errors.Is(err, ErrIncomparable) {
			t.Fatalf("Compare(%q, %q) error %v does not match ErrIncomparable", a, b, err)
		}
		return
	}
	ra, erra := ParseRV(a)
	rb, errb := ParseRV(b)
	if erra != nil || errb != nil {
		t.Fatalf("ParseRV rejects (%q, %q) that Compare accepts: %v, %v", a, b, erra, errb)
	}
	if c := ra.Compare(rb); c != want {
		t.Fatalf("RV(%q).Compare(RV(%q)) = %d, want %d", a, b, c, want)
	}
}

func FuzzCompare(f *testing.F) {
	for i, a := range seeds {
		f.Add(a, seeds[(i+1)%len(seeds)])
		f.Add(a, a)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		checkCompare(t, a, b)
		// Numeric neighbours exercise the ordering, not only validation.
		if n, err := strconv.ParseUint(a, 10, 64); err == nil && n > 0 && n < 1<<63 {
			checkCompare(t, a, strconv.FormatUint(n+1, 10))
			checkCompare(t, a, strconv.FormatUint(n*2, 10))
		}
	})
}
