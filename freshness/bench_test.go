package freshness

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// benchPairs are the same inputs for both implementations: typical etcd
// revisions (7-12 digits), the 64-bit edge, a uint128-sized value and a
// malformed one.
var benchPairs = []struct{ name, a, b string }{
	{"short-equal-len", "1234567", "1234568"},
	{"typical-12", "123456789012", "123456789013"},
	{"diff-len", "99999999", "100000000"},
	{"20-digits", "18446744073709551614", "18446744073709551615"},
	{"39-digits", "340282366920938463463374607431768211454", "340282366920938463463374607431768211455"},
	{"malformed", "12345a7", "1234567"},
}

var sink int

func BenchmarkCompare(b *testing.B) {
	for _, p := range benchPairs {
		b.Run("impl=freshinformer/"+p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c, _ := Compare(p.a, p.b)
				sink += c
			}
		})
		b.Run("impl=apimachinery/"+p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c, _ := resourceversion.CompareResourceVersion(p.a, p.b)
				sink += c
			}
		})
	}
}

func BenchmarkParseRV(b *testing.B) {
	for _, p := range benchPairs[:5] {
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rv, _ := ParseRV(p.a)
				sink += int(rv.n & 1)
			}
		})
	}
}

func BenchmarkRVCompare(b *testing.B) {
	for _, p := range benchPairs[:5] {
		x, _ := ParseRV(p.a)
		y, _ := ParseRV(p.b)
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink += x.Compare(y)
			}
		})
	}
}

func BenchmarkWaitAlreadyFresh(b *testing.B) {
	var tr Tracker
	tr.Advance(mustRV(b, "123456789012"))
	ctx := context.Background()
	b.Run("string", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if tr.Wait(ctx, "123456789000") != nil {
				b.Fatal("not fresh")
			}
		}
	})
	target := mustRV(b, "123456789000")
	b.Run("reached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !tr.Reached(target) {
				b.Fatal("not fresh")
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if tr.Wait(ctx, "123456789000") != nil {
					b.Fatal("not fresh")
				}
			}
		})
	})
}

// noop is the callback that holds a pending target in the benchmarks (a
// waiter would need a goroutine).
func noop(error) {}

// BenchmarkAdvance measures one step of the tracker with n targets pending
// that the step does not reach (the per-event cost on a busy informer).
func BenchmarkAdvance(b *testing.B) {
	for _, n := range []int{0, 1, 100, 10_000} {
		b.Run("pending="+strconv.Itoa(n), func(b *testing.B) {
			var tr Tracker
			for i := range n {
				tr.AfterFunc(rvOf(uint64(1<<62+i)), noop)
			}
			b.ReportAllocs()
			i := uint64(0)
			for b.Loop() {
				i++
				tr.Advance(RV{s: "x", n: i}) // String is not read on this path
			}
		})
	}
}

// BenchmarkWake measures an Advance that releases k targets out of n
// pending (per released target: O(log n)).
func BenchmarkWake(b *testing.B) {
	for _, n := range []int{1, 100, 10_000} {
		b.Run("pending="+strconv.Itoa(n)+"/release=1", func(b *testing.B) {
			var tr Tracker
			queue := make([]RV, 0, 2*n)
			for i := range n {
				queue = append(queue, rvOf(uint64(2+i)))
				tr.AfterFunc(queue[i], noop)
			}
			next := uint64(2 + n)
			b.ReportAllocs()
			for b.Loop() {
				// Release the oldest target, register a new newest one.
				tr.Advance(queue[0])
				queue = append(queue[1:], rvOf(next))
				tr.AfterFunc(queue[len(queue)-1], noop)
				next++
			}
		})
	}
}

// BenchmarkPendingWaiterBytes reports the tracker's own bookkeeping per
// pending target (B/op), held by a callback (whose registration and stop
// func it includes): a waiting goroutine's stack is the caller's.
func BenchmarkPendingWaiterBytes(b *testing.B) {
	var tr Tracker
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		i++
		tr.AfterFunc(rvOf(i+1<<40), noop)
	}
	b.StopTimer()
	tr.Stop()
}

func BenchmarkCompareLong(b *testing.B) {
	a := "1" + strings.Repeat("0", 99)
	c := "1" + strings.Repeat("0", 98) + "1"
	b.Run("impl=freshinformer", func(b *testing.B) {
		for b.Loop() {
			x, _ := Compare(a, c)
			sink += x
		}
	})
	b.Run("impl=apimachinery", func(b *testing.B) {
		for b.Loop() {
			x, _ := resourceversion.CompareResourceVersion(a, c)
			sink += x
		}
	})
}
