package freshness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestTooLargeResourceVersionError(t *testing.T) {
	tl := &TooLargeResourceVersionError{ResourceVersion: "1000", ServerResourceVersion: "420"}
	wrapped := &WaitError{Target: "1000", Current: "400", Waited: time.Second, Err: tl}
	for name, err := range map[string]error{
		"bare":                     tl,
		"in a WaitError":           wrapped,
		"wrapped by fmt":           fmt.Errorf("sync: %w", tl),
		"WaitError wrapped by fmt": fmt.Errorf("sync: %w", wrapped),
	} {
		if !errors.Is(err, ErrTooLargeResourceVersion) {
			t.Errorf("%s: errors.Is(%v, ErrTooLargeResourceVersion) = false", name, err)
		}
		for _, other := range []error{ErrIncomparable, ErrStopped, ErrNotStarted, context.DeadlineExceeded, context.Canceled} {
			if errors.Is(err, other) {
				t.Errorf("%s: %v matches %v", name, err, other)
			}
		}
		var got *TooLargeResourceVersionError
		if !errors.As(err, &got) || got != tl {
			t.Errorf("%s: errors.As(%v) = %v, want the error itself", name, err, got)
		}
		// Both resource versions are named: the one waited for and the
		// server's.
		for _, want := range []string{"1000", "420", "too large resource version"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: message %q lacks %q", name, err, want)
			}
		}
	}
	if want := "too large resource version 1000: a consistent read shows the server at 420"; tl.Error() != want {
		t.Errorf("message %q, want %q", tl.Error(), want)
	}
	// The WaitError says where the cache was too.
	if !strings.Contains(wrapped.Error(), "cache is at 400") {
		t.Errorf("WaitError message %q lacks the cache's RV", wrapped)
	}
	// A sentinel is not the typed error.
	if errors.Is(ErrTooLargeResourceVersion, ErrIncomparable) || errors.As(ErrTooLargeResourceVersion, new(*TooLargeResourceVersionError)) {
		t.Error("ErrTooLargeResourceVersion matches what it should not")
	}
}

func TestErrNotStarted(t *testing.T) {
	err := error(&WaitError{Target: "7", Current: "", Waited: 0, Err: ErrNotStarted})
	if !errors.Is(err, ErrNotStarted) {
		t.Fatalf("errors.Is(%v, ErrNotStarted) = false", err)
	}
	for _, other := range []error{ErrStopped, ErrIncomparable, ErrTooLargeResourceVersion, context.Canceled} {
		if errors.Is(err, other) {
			t.Errorf("%v matches %v", err, other)
		}
	}
	var we *WaitError
	if !errors.As(fmt.Errorf("read: %w", err), &we) || we.Target != "7" {
		t.Fatalf("errors.As through a wrap = %+v", we)
	}
	// Both resource versions are named: the target and the cache's ("none"
	// before any).
	for _, want := range []string{"resource version 7", "cache is at none", ErrNotStarted.Error()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	if errors.Is(ErrNotStarted, ErrStopped) || errors.Is(ErrStopped, ErrNotStarted) {
		t.Error("ErrNotStarted and ErrStopped are not told apart")
	}
}
