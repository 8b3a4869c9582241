package freshness

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ErrIncomparable is matched (with errors.Is) by every error that reports a
// resource version which is not a KEP-5504 comparable integer.
var ErrIncomparable = errors.New("resource version is not comparable")

// ErrStopped is matched (with errors.Is) by the error a Wait returns because
// its Tracker was stopped before reaching the target.
var ErrStopped = errors.New("freshness tracker stopped")

// ErrNotStarted is matched (with errors.Is) by the error of a wait on an
// informer that was never started: nothing would ever reach its cache.
var ErrNotStarted = errors.New("informer was never started")

// ErrNotFresh is matched (with errors.Is) by the error of a check, made
// without waiting, that found the cache behind the resource version it
// needs (FreshInformer.CheckFreshness, readyourwrites' CheckFresh and
// NotFreshError, freshctrl's reads with FailIfNotFresh).
var ErrNotFresh = errors.New("cache is not yet fresh")

// ErrTooLargeResourceVersion is matched (with errors.Is) by a
// *TooLargeResourceVersionError.
var ErrTooLargeResourceVersion = errors.New("too large resource version")

// TooLargeResourceVersionError reports a wait for a resource version that a
// consistent read, sent after the wait began, showed the server has not
// reached: a resource version from another cluster, a made-up one, or a
// write that a restore of the server's etcd lost. Waiting longer would not
// help. The apiserver calls this "Too large resource version".
type TooLargeResourceVersionError struct {
	// ResourceVersion is the one waited for.
	ResourceVersion string
	// ServerResourceVersion is what the consistent read returned.
	ServerResourceVersion string
}

// Error names both resource versions.
func (e *TooLargeResourceVersionError) Error() string {
	return fmt.Sprintf("too large resource version %s: a consistent read shows the server at %s", e.ResourceVersion, e.ServerResourceVersion)
}

// Is reports whether target is ErrTooLargeResourceVersion.
func (e *TooLargeResourceVersionError) Is(target error) bool {
	return target == ErrTooLargeResourceVersion
}

// maxQuoted bounds how much of a malformed value an error message repeats:
// a value served by a misbehaving server may be arbitrarily long.
const maxQuoted = 64

// IncomparableError reports a resource version that is not a comparable
// integer: empty, "0", with a leading zero, or holding anything but the ASCII
// digits 0-9.
type IncomparableError struct {
	// ResourceVersion is the offending value, as given.
	ResourceVersion string
}

// Error names the value, quoted so that control bytes are visible and
// truncated when it is long.
func (e *IncomparableError) Error() string {
	v := e.ResourceVersion
	if len(v) > maxQuoted {
		return fmt.Sprintf("resource version %s... (%d bytes) is not a comparable integer (KEP-5504)", strconv.Quote(v[:maxQuoted]), len(v))
	}
	return fmt.Sprintf("resource version %s is not a comparable integer (KEP-5504)", strconv.Quote(v))
}

// Is reports whether target is ErrIncomparable.
func (e *IncomparableError) Is(target error) bool { return target == ErrIncomparable }

// WaitError reports a wait that returned before its target was reached:
// the context ended, the tracker or informer stopped (or was never
// started), the server's resource versions cannot be ordered, or the
// target is beyond the server; or a check made without waiting found the
// cache behind (ErrNotFresh). It unwraps to the cause, so errors.Is(err,
// context.DeadlineExceeded), errors.Is(err, context.Canceled),
// errors.Is(err, ErrStopped), errors.Is(err, ErrNotStarted),
// errors.Is(err, ErrNotFresh),
// errors.Is(err, ErrIncomparable) and errors.Is(err,
// ErrTooLargeResourceVersion) hold as appropriate.
type WaitError struct {
	// Target is the resource version waited for.
	Target string
	// Current is the resource version the tracker had reached when the wait
	// ended ("" if it had reached none).
	Current string
	// Waited is how long the caller was blocked (0 for a check).
	Waited time.Duration
	// Err is the cause.
	Err error
}

// Error says what was waited for, where the tracker was and for how long.
func (e *WaitError) Error() string {
	cur := e.Current
	if cur == "" {
		cur = "none"
	}
	if e.Waited == 0 {
		return fmt.Sprintf("resource version %s, cache is at %s: %v", e.Target, cur, e.Err)
	}
	return fmt.Sprintf("waited %s for resource version %s, cache is at %s: %v", e.Waited, e.Target, cur, e.Err)
}

// Unwrap returns the cause.
func (e *WaitError) Unwrap() error { return e.Err }
