package freshness

// maxUint64 is the largest RV the fast path holds; longer values fall back
// to comparing digits.
const maxUint64 = "18446744073709551615"

// RV is a parsed, validated resource version. Comparing two RVs costs an
// integer comparison when both fit in 64 bits (every etcd revision does) and
// falls back to comparing digits beyond that, so values up to KEP-5504's
// uint128 bound and longer still order correctly.
//
// The zero RV means "none": it is older than every valid RV and its String
// is "". An RV keeps a reference to the string it was parsed from and never
// allocates.
type RV struct {
	s string // the canonical decimal form, "" for the zero RV
	n uint64 // the value if it fits in 64 bits, else 0
}

// ParseRV validates s as a KEP-5504 resource version. It returns an error
// matching ErrIncomparable for anything Compare would reject.
func ParseRV(s string) (RV, error) {
	if !wellFormed(s) {
		return RV{}, &IncomparableError{ResourceVersion: s}
	}
	return RV{s: s, n: parseUint64(s)}, nil
}

// parseUint64 returns the value of the well-formed s, or 0 if it exceeds
// 64 bits.
func parseUint64(s string) uint64 {
	if len(s) > len(maxUint64) || (len(s) == len(maxUint64) && s > maxUint64) {
		return 0
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		n = n*10 + uint64(s[i]-'0')
	}
	return n
}

// String returns the resource version as the server wrote it, or "" for the
// zero RV.
func (r RV) String() string { return r.s }

// IsZero reports whether r is the zero RV ("none").
func (r RV) IsZero() bool { return r.s == "" }

// Uint64 returns r's value and true if it fits in 64 bits.
func (r RV) Uint64() (uint64, bool) { return r.n, r.n != 0 }

// Compare orders r and o: -1 if r is older, 0 if equal, +1 if newer. The
// zero RV is older than every other.
func (r RV) Compare(o RV) int {
	if r.n != 0 && o.n != 0 {
		switch {
		case r.n < o.n:
			return -1
		case r.n > o.n:
			return 1
		}
		return 0
	}
	// One side is zero or beyond 64 bits: digits order the same way.
	return compareWellFormed(r.s, o.s)
}

// AtLeast reports whether r is at least as new as o.
func (r RV) AtLeast(o RV) bool { return r.Compare(o) >= 0 }
