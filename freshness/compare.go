package freshness

import "strings"

// Compare orders two resource versions as KEP-5504 defines it: -1 if a is
// older than b, 0 if they are equal, +1 if a is newer. Both must be
// non-empty, hold only the ASCII digits 0-9 and have no leading zero (so "0"
// is invalid); otherwise Compare returns an error matching ErrIncomparable
// that names the first malformed argument. Results and error-ness are those
// of k8s.io/apimachinery/pkg/util/resourceversion.CompareResourceVersion on
// every input.
//
// Only resource versions of the same resource may be compared.
func Compare(a, b string) (int, error) {
	if !wellFormed(a) {
		return 0, &IncomparableError{ResourceVersion: a}
	}
	if !wellFormed(b) {
		return 0, &IncomparableError{ResourceVersion: b}
	}
	return compareWellFormed(a, b), nil
}

// compareWellFormed orders two valid RVs: the longer is the greater, equal
// lengths compare bytewise.
func compareWellFormed(a, b string) int {
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return strings.Compare(a, b)
}

// wellFormed reports whether s is a KEP-5504 integer. It checks eight bytes
// at a time (the last word overlapping the one before it), and strings of
// four to seven bytes as two overlapping four-byte words: RVs are mostly 7 to
// 20 digits long, where a byte loop would cost one branch per digit.
func wellFormed(s string) bool {
	n := len(s)
	switch {
	case n == 0 || s[0] == '0':
		return false
	case n >= 8:
		for i := 0; i+8 < n; i += 8 {
			if !eightDigits(load64(s[i:])) {
				return false
			}
		}
		return eightDigits(load64(s[n-8:]))
	case n >= 4:
		return eightDigits(uint64(load32(s)) | uint64(load32(s[n-4:]))<<32)
	}
	for i := 1; i < n; i++ {
		if s[i]-'0' > 9 {
			return false
		}
	}
	return s[0]-'0' <= 9
}

// load64 reads the first eight bytes of s little-endian; the compiler merges
// the byte loads into one.
func load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// load32 reads the first four bytes of s little-endian.
func load32(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// eightDigits reports whether every byte of x is an ASCII digit. A byte is a
// digit when its high nibble is 3 and adding 6 leaves the high nibble 3
// (0x30-0x39). Carries between bytes start only at bytes whose high nibble
// is not 3, which fail the first test anyway.
func eightDigits(x uint64) bool {
	const (
		high  = 0xF0F0F0F0F0F0F0F0
		six   = 0x0606060606060606
		three = 0x3333333333333333
	)
	return (x&high)|((x+six)&high)>>4 == three
}
