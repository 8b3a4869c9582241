package freshtest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/stalereads"
)

// fakeTB records what FailOnStaleReads does with a test.
type fakeTB struct {
	testing.TB
	errors   []string
	cleanups []func()
}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

func TestFailOnStaleReads(t *testing.T) {
	tb := &fakeTB{TB: t}
	var o cache.Options
	FailOnStaleReads(tb)(&o)
	if !o.DetectStaleReads || o.OnStaleRead == nil {
		t.Fatal("the option does not turn the detector on")
	}
	o.OnStaleRead(stalereads.Report{Kind: stalereads.ReadOlder, Key: "ns/cm"})
	if len(tb.errors) != 1 || !strings.Contains(tb.errors[0], "WARNING: STALE READ") || !strings.Contains(tb.errors[0], "ns/cm") {
		t.Fatalf("errors: %q", tb.errors)
	}
	for _, c := range tb.cleanups {
		c()
	}
	o.OnStaleRead(stalereads.Report{Kind: stalereads.ReadOlder})
	if len(tb.errors) != 1 {
		t.Errorf("reported after the test ended: %q", tb.errors)
	}
}
