package rvwait

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// ver is the Version of these tests: a decimal integer without leading
// zeros, ordered as freshness.RV orders them (the longer is the newer,
// equal lengths compare bytewise), so that it may exceed 64 bits.
type ver string

var _ Version[ver] = ver("")

func (v ver) Compare(o ver) int {
	if c := cmp.Compare(len(v), len(o)); c != 0 {
		return c
	}
	return strings.Compare(string(v), string(o))
}

func (v ver) IsZero() bool { return v == "" }

func (v ver) Uint64() (uint64, bool) {
	n, err := strconv.ParseUint(string(v), 10, 64)
	return n, err == nil && n != 0
}

func (v ver) String() string { return string(v) }

func vn(n uint64) ver { return ver(strconv.FormatUint(n, 10)) }

// big is beyond 64 bits.
const big = ver("100000000000000000000")

// waitError is the error the tests' fail func builds.
type waitError struct {
	target, pos ver
	waited      time.Duration
	cause       error
}

func (e *waitError) Error() string {
	return fmt.Sprintf("waited %s for %q at %q: %v", e.waited, e.target, e.pos, e.cause)
}

func (e *waitError) Unwrap() error { return e.cause }

func failWith(target, pos ver, waited time.Duration, cause error) error {
	return &waitError{target: target, pos: pos, waited: waited, cause: cause}
}

var (
	errFailed  = errors.New("set failed")
	errStopped = errors.New("set stopped")
)

// sizes returns how many targets s holds in its heap and in its map, after
// checking that they are the same targets, each at the heap index it
// records and in heap order, that each has a waiter or a callback, and
// that their waiters add up to PendingLocked.
func (s *Set[V]) sizes(t testing.TB) (heapLen, mapLen int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	waiters := 0
	for i, w := range s.targets {
		if w.index != i {
			t.Errorf("target %s at heap index %d records index %d", w.rv, i, w.index)
		}
		if i > 0 && s.targets[(i-1)/2].rv.Compare(w.rv) > 0 {
			t.Errorf("target %s at heap index %d is below its parent %s", w.rv, i, s.targets[(i-1)/2].rv)
		}
		if s.byRV[w.rv.String()] != w {
			t.Errorf("target %s in the heap is not the map's", w.rv)
		}
		if w.waiters == 0 && len(w.funcs) == 0 {
			t.Errorf("target %s is kept with no waiter and no callback", w.rv)
		}
		waiters += w.waiters
	}
	if waiters != s.pending {
		t.Errorf("targets hold %d waiters, pending is %d", waiters, s.pending)
	}
	return len(s.targets), len(s.byRV)
}

func expectNoTargets(t *testing.T, s *Set[ver]) {
	t.Helper()
	if h, m := s.sizes(t); h != 0 || m != 0 {
		t.Errorf("targets left behind: heap %d, map %d", h, m)
	}
}

func publish(s *Set[ver], pos ver, open bool) {
	s.Lock()
	due := s.PublishLocked(pos, open)
	s.Unlock()
	due.Run()
}

func failSet(s *Set[ver], err error) {
	s.Lock()
	due := s.FailLocked(err)
	s.Unlock()
	due.Run()
}

func stopSet(s *Set[ver], err error) {
	s.Lock()
	due := s.StopLocked(err)
	s.Unlock()
	due.Run()
}

// callAt is AfterFuncLocked with the lock taken and the Due run.
func callAt(s *Set[ver], target ver, f func(error)) (stop func() bool) {
	s.Lock()
	stop, due := s.AfterFuncLocked(target, f)
	s.Unlock()
	due.Run()
	return stop
}

func reached(s *Set[ver], target ver) bool {
	if s.ReachedFast(target) {
		return true
	}
	s.Lock()
	defer s.Unlock()
	return s.ReachedLocked(target)
}

func pending(s *Set[ver]) int {
	s.Lock()
	defer s.Unlock()
	return s.PendingLocked()
}

func position(s *Set[ver]) (ver, bool) {
	s.Lock()
	defer s.Unlock()
	return s.PositionLocked()
}

// waitAsync starts Wait in a goroutine and returns the channel its result
// arrives on, once the waiter is blocked.
func waitAsync(t *testing.T, s *Set[ver], ctx context.Context, target ver) <-chan error {
	t.Helper()
	before := pending(s)
	ch := make(chan error, 1)
	go func() { ch <- s.Wait(ctx, target, failWith) }()
	deadline := time.Now().Add(5 * time.Second)
	for pending(s) == before {
		if time.Now().After(deadline) {
			t.Fatalf("waiter for %q never blocked", target)
		}
		time.Sleep(time.Millisecond)
	}
	return ch
}

func expectBlocked(t *testing.T, chans ...<-chan error) {
	t.Helper()
	time.Sleep(20 * time.Millisecond)
	for i, ch := range chans {
		select {
		case err := <-ch:
			t.Fatalf("wait %d returned %v before its target was reached", i, err)
		default:
		}
	}
}

// waitNow is a Wait that should return at once: one that blocks ends
// with context.DeadlineExceeded after a second.
func waitNow(s *Set[ver], target ver) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return s.Wait(ctx, target, failWith)
}

func expectResult(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return")
		return nil
	}
}

// expectCause checks that err is the fail func's error for target at pos,
// caused by cause.
func expectCause(t *testing.T, err error, target, pos ver, cause error) {
	t.Helper()
	var we *waitError
	if !errors.Is(err, cause) || !errors.As(err, &we) || we.target != target || we.pos != pos {
		t.Fatalf("wait for %q = %v; want %v for target %q at %q", target, err, cause, target, pos)
	}
}

func TestZeroSetIsOpenAtZero(t *testing.T) {
	var s Set[ver]
	if pos, open := position(&s); pos != "" || !open {
		t.Fatalf("zero Set at %q, open %v; want \"\", true", pos, open)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Wait(ctx, "", failWith); err != nil {
		t.Fatalf("Wait for the zero version = %v", err)
	}
	expectCause(t, s.Wait(ctx, vn(1), failWith), vn(1), "", context.Canceled)
	if pending(&s) != 0 {
		t.Fatal("a wait with an ended context stayed pending")
	}
	expectNoTargets(t, &s)
}

func TestWaitersOfOneTargetShareIt(t *testing.T) {
	var s Set[ver]
	var chans []<-chan error
	for range 5 {
		chans = append(chans, waitAsync(t, &s, context.Background(), vn(7)))
	}
	chans = append(chans, waitAsync(t, &s, context.Background(), vn(8)))
	if h, m := s.sizes(t); h != 2 || m != 2 {
		t.Fatalf("6 waiters on 7,7,7,7,7,8 make heap %d, map %d; want 2 targets", h, m)
	}
	s.Lock()
	waiters := s.byRV["7"].waiters
	s.Unlock()
	if waiters != 5 {
		t.Fatalf("target 7 has %d waiters, want 5", waiters)
	}
	publish(&s, vn(7), true)
	for _, ch := range chans[:5] {
		if err := expectResult(t, ch); err != nil {
			t.Fatal(err)
		}
	}
	expectBlocked(t, chans[5])
	if h, m := s.sizes(t); h != 1 || m != 1 || pending(&s) != 1 {
		t.Fatalf("after 7: heap %d, map %d, pending %d; want 1, 1, 1", h, m, pending(&s))
	}
	publish(&s, vn(8), true)
	if err := expectResult(t, chans[5]); err != nil {
		t.Fatal(err)
	}
	expectNoTargets(t, &s)
}

func TestCanceledWaitLeavesNoTarget(t *testing.T) {
	var s Set[ver]
	publish(&s, vn(41), true)
	ctx, cancel := context.WithCancel(context.Background())
	ch := waitAsync(t, &s, ctx, vn(50))
	keep := waitAsync(t, &s, context.Background(), vn(60))
	cancel()
	expectCause(t, expectResult(t, ch), vn(50), vn(41), context.Canceled)
	if h, m := s.sizes(t); h != 1 || m != 1 || pending(&s) != 1 {
		t.Fatalf("after cancel: heap %d, map %d, pending %d; want only 60's", h, m, pending(&s))
	}
	publish(&s, vn(60), true)
	if err := expectResult(t, keep); err != nil {
		t.Fatal(err)
	}
	expectNoTargets(t, &s)
}

// A held publish (the old Tracker.Suspend) moves the position but reaches
// nothing, not even what was reached before, until an open publish.
func TestHeldPublishKeepsReachedTargetsWaiting(t *testing.T) {
	var s Set[ver]
	publish(&s, vn(10), true)
	publish(&s, vn(10), false)
	if reached(&s, vn(5)) || s.ReachedFast(vn(5)) {
		t.Fatal("5 reached while held")
	}
	if pos, open := position(&s); pos != "10" || open {
		t.Fatalf("held position %q, open %v; want 10, false", pos, open)
	}
	waited := waitAsync(t, &s, context.Background(), vn(5))
	var calls []string
	record := func(name string) func(error) {
		return func(err error) { calls = append(calls, fmt.Sprint(name, " ", err)) }
	}
	callAt(&s, vn(12), record("12"))
	callAt(&s, vn(5), record("5")) // reached before the hold: waits too
	publish(&s, vn(12), false)     // moves, releases nobody
	expectBlocked(t, waited)
	if len(calls) != 0 {
		t.Fatalf("callbacks ran while held: %v", calls)
	}
	if pos, _ := position(&s); pos != "12" {
		t.Fatalf("held position %q, want 12", pos)
	}
	if h, _ := s.sizes(t); h != 2 {
		t.Fatalf("heap %d while held, want targets 5 and 12", h)
	}

	s.Lock()
	due := s.PublishLocked(vn(12), true)
	s.Unlock()
	expectBlocked(t, waited) // woken by the Due
	if len(calls) != 0 {
		t.Fatalf("the open publish ran %v before its Due", calls)
	}
	due.Run()
	if err := expectResult(t, waited); err != nil {
		t.Fatalf("Wait(5) after the open publish: %v", err)
	}
	if !slices.Equal(calls, []string{"5 <nil>", "12 <nil>"}) {
		t.Fatalf("callbacks ran %v, want 5 then 12, with nil", calls)
	}
	if !s.ReachedFast(vn(12)) || !reached(&s, vn(12)) {
		t.Fatal("12 not reached after the open publish")
	}
	expectNoTargets(t, &s)
}

// No waiter returns before the Due of its release is run, whatever
// released it (a cancellable wait selects, the others receive): the
// informer runs the Due once the handlers were told of the change, so
// that the scheduler runs a woken wait first.
func TestWaitersWakeWhenTheDueRuns(t *testing.T) {
	for _, tc := range []struct {
		name    string
		release func(*Set[ver]) Due
		want    error
	}{
		{"published", func(s *Set[ver]) Due { return s.PublishLocked(vn(20), true) }, nil},
		{"failed", func(s *Set[ver]) Due { return s.FailLocked(errFailed) }, errFailed},
		{"failed above", func(s *Set[ver]) Due {
			return s.FailAboveLocked(vn(15), s.SeqLocked(), func(v ver) error { return fmt.Errorf("above: %w", errFailed) })
		}, errFailed},
		{"stopped", func(s *Set[ver]) Due { return s.StopLocked(errStopped) }, errStopped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Set[ver]
			publish(&s, vn(10), true)
			plain := waitAsync(t, &s, context.Background(), vn(20))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cancellable := waitAsync(t, &s, ctx, vn(20))
			calls := 0
			callAt(&s, vn(20), func(error) { calls++ })
			s.Lock()
			due := tc.release(&s)
			s.Unlock()
			expectBlocked(t, plain, cancellable)
			if calls != 0 {
				t.Fatal("a callback ran before the Due")
			}
			due.Run()
			if calls != 1 {
				t.Fatalf("the callback ran %d times, want once", calls)
			}
			for i, ch := range []<-chan error{plain, cancellable} {
				if err := expectResult(t, ch); !errors.Is(err, tc.want) {
					t.Fatalf("wait %d returned %v, want %v", i, err, tc.want)
				}
			}
			expectNoTargets(t, &s)
		})
	}
}

// Held below the position, then opened there (the old Suspend, Reset
// below, Resume): what is above stays unreached.
func TestHeldBelowThenOpenKeepsHigherTargetsWaiting(t *testing.T) {
	var s Set[ver]
	publish(&s, vn(10), true)
	publish(&s, vn(3), false)
	if reached(&s, vn(3)) {
		t.Fatal("3 reached while held")
	}
	publish(&s, vn(3), true)
	if !reached(&s, vn(3)) || reached(&s, vn(10)) || s.ReachedFast(vn(10)) {
		t.Fatalf("open at 3: 3 reached %v, 10 reached %v; want true, false", reached(&s, vn(3)), reached(&s, vn(10)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	expectCause(t, s.Wait(ctx, vn(10), failWith), vn(10), vn(3), context.DeadlineExceeded)
	expectNoTargets(t, &s)
}

func TestHeldWaitEndsWithContextAndStop(t *testing.T) {
	var s Set[ver]
	publish(&s, vn(10), false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	expectCause(t, s.Wait(ctx, vn(5), failWith), vn(5), vn(10), context.Canceled)
	ch := waitAsync(t, &s, context.Background(), vn(5))
	stopSet(&s, errStopped)
	expectCause(t, expectResult(t, ch), vn(5), vn(10), errStopped)
	expectNoTargets(t, &s)
}

// FailLocked then PublishLocked is the old SetIncomparable then Reset.
func TestFailReleasesAndRefusesUntilPublished(t *testing.T) {
	var s Set[ver]
	publish(&s, vn(10), true)
	ch := waitAsync(t, &s, context.Background(), vn(20))
	var got []error
	callAt(&s, vn(15), func(err error) { got = append(got, err) })

	s.Lock()
	due := s.FailLocked(errFailed)
	s.Unlock()
	expectBlocked(t, ch)
	if len(got) != 0 {
		t.Fatalf("FailLocked ran %d callbacks before its Due", len(got))
	}
	due.Run()
	if len(got) != 1 || !errors.Is(got[0], errFailed) {
		t.Fatalf("pending callback got %v, want the failure", got)
	}
	expectCause(t, expectResult(t, ch), vn(20), vn(10), errFailed)

	// Even a target below the position fails: nothing counts as reached.
	expectCause(t, waitNow(&s, vn(5)), vn(5), vn(10), errFailed)
	if reached(&s, vn(5)) || s.ReachedFast(vn(5)) {
		t.Fatal("5 reached while failed")
	}
	if pos, open := position(&s); pos != "10" || open {
		t.Fatalf("failed position %q, open %v; want 10, false", pos, open)
	}
	callAt(&s, vn(5), func(err error) { got = append(got, err) }) // at once
	if len(got) != 2 || !errors.Is(got[1], errFailed) {
		t.Fatalf("callback while failed got %v, want the failure at once", got)
	}
	if pending(&s) != 0 {
		t.Fatalf("pending %d after the failure", pending(&s))
	}
	expectNoTargets(t, &s)

	publish(&s, vn(30), true)
	if err := waitNow(&s, vn(30)); err != nil {
		t.Fatalf("Wait(30) after publishing 30: %v", err)
	}
	if !s.ReachedFast(vn(5)) {
		t.Fatal("the fast path missed after the publish that ended the failure")
	}
}

// Publishing a lower position (the old Reset) moves back: what is above it
// waits again, and a target between the two is not reached.
func TestPublishLowerKeepsHigherWaiters(t *testing.T) {
	var s Set[ver]
	publish(&s, vn(100), true)
	ch := waitAsync(t, &s, context.Background(), vn(150))
	publish(&s, vn(50), true)
	if pos, open := position(&s); pos != "50" || !open {
		t.Fatalf("position %q, open %v after publishing 50; want 50, true", pos, open)
	}
	if reached(&s, vn(100)) || s.ReachedFast(vn(60)) {
		t.Fatal("a target above the lower position counts as reached")
	}
	ch2 := waitAsync(t, &s, context.Background(), vn(60))
	expectBlocked(t, ch, ch2)
	publish(&s, vn(60), true)
	if err := expectResult(t, ch2); err != nil {
		t.Fatal(err)
	}
	expectBlocked(t, ch)
	publish(&s, vn(150), true)
	if err := expectResult(t, ch); err != nil {
		t.Fatal(err)
	}
	expectNoTargets(t, &s)
}

func TestStopIsTerminal(t *testing.T) {
	var s Set[ver]
	publish(&s, vn(10), true)
	ch := waitAsync(t, &s, context.Background(), vn(20))
	var got []error
	callAt(&s, vn(30), func(err error) { got = append(got, err) })
	stopSet(&s, errStopped)
	expectCause(t, expectResult(t, ch), vn(20), vn(10), errStopped)
	if len(got) != 1 || !errors.Is(got[0], errStopped) {
		t.Fatalf("pending callback got %v, want the stop's error", got)
	}

	s.Lock()
	dues := []Due{
		s.PublishLocked(vn(100), true),
		s.FailLocked(errFailed),
		s.PublishLocked(vn(5), false),
		s.StopLocked(errors.New("second stop")),
	}
	s.Unlock()
	for i, d := range dues {
		if d != nil {
			t.Errorf("call %d after the stop returned callbacks", i)
		}
	}
	if pos, _ := position(&s); pos != "10" {
		t.Fatalf("position %q after publishes that followed the stop; want 10", pos)
	}
	if reached(&s, vn(11)) || reached(&s, vn(100)) || s.ReachedFast(vn(11)) {
		t.Fatal("a publish after the stop reached targets")
	}
	expectCause(t, waitNow(&s, vn(200)), vn(200), vn(10), errStopped)
	callAt(&s, vn(11), func(err error) { got = append(got, err) }) // at once
	if len(got) != 2 || !errors.Is(got[1], errStopped) {
		t.Fatalf("callback after the stop got %v, want the first stop's error at once", got)
	}

	// What was reached when it stopped open stays reached: neither the
	// failure nor the held publish that followed the stop took it away.
	if !s.ReachedFast(vn(10)) || !reached(&s, vn(5)) {
		t.Fatal("10 not reached after a stop at 10")
	}
	if err := waitNow(&s, vn(10)); err != nil {
		t.Fatalf("Wait(10) after a stop at 10 = %v, want nil", err)
	}
	callAt(&s, vn(10), func(err error) { got = append(got, err) }) // at once
	if len(got) != 3 || got[2] != nil {
		t.Fatalf("callback at a reached target after the stop got %v, want nil at once", got)
	}
	expectNoTargets(t, &s)
}

// A stop while held or failed reaches nothing, for good.
func TestStopWhileHeldOrFailedReachesNothing(t *testing.T) {
	for name, before := range map[string]func(*Set[ver]){
		"held":   func(s *Set[ver]) { publish(s, vn(10), false) },
		"failed": func(s *Set[ver]) { failSet(s, errFailed) },
	} {
		t.Run(name, func(t *testing.T) {
			var s Set[ver]
			publish(&s, vn(10), true)
			before(&s)
			stopSet(&s, errStopped)
			publish(&s, vn(10), true)
			if s.ReachedFast(vn(5)) || reached(&s, vn(5)) {
				t.Fatal("5 reached after a stop while " + name)
			}
			expectCause(t, waitNow(&s, vn(5)), vn(5), vn(10), errStopped)
			var got error
			callAt(&s, vn(5), func(err error) { got = err }) // at once
			if !errors.Is(got, errStopped) {
				t.Fatalf("callback after the stop got %v, want the stop's error", got)
			}
			expectNoTargets(t, &s)
		})
	}
}

// tooLarge is what FailAboveLocked's errOf builds in these tests.
type tooLarge struct{ target ver }

func (e *tooLarge) Error() string { return "too large: " + string(e.target) }

func TestFailAboveFailsOnlyTargetsAboveJoinedBySeq(t *testing.T) {
	var s Set[ver]
	publish(&s, vn(10), true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	below := waitAsync(t, &s, ctx, vn(12))   // below the limit
	atLimit := waitAsync(t, &s, ctx, vn(15)) // at it: not above
	above := waitAsync(t, &s, ctx, vn(20))
	early30 := waitAsync(t, &s, ctx, vn(30)) // joined again later: survives
	var got []error
	callAt(&s, vn(40), func(err error) { got = append(got, err) }) // the last join by seq
	s.Lock()
	seq := s.SeqLocked()
	s.Unlock()
	late30 := waitAsync(t, &s, ctx, vn(30))
	s.Lock()
	if s.SeqLocked() != seq+1 {
		t.Errorf("a wait moved SeqLocked from %d to %d, want one join", seq, s.SeqLocked())
	}
	var failedAt []ver
	due := s.FailAboveLocked(vn(15), seq, func(v ver) error {
		failedAt = append(failedAt, v)
		return &tooLarge{v}
	})
	s.Unlock()
	slices.SortFunc(failedAt, ver.Compare)
	if !slices.Equal(failedAt, []ver{vn(20), vn(40)}) {
		t.Fatalf("errOf called for %v, want [20 40]", failedAt)
	}
	expectBlocked(t, above)
	if len(got) != 0 {
		t.Fatalf("FailAboveLocked ran %d callbacks before its Due", len(got))
	}
	due.Run()
	var tl *tooLarge
	if len(got) != 1 || !errors.As(got[0], &tl) || tl.target != vn(40) {
		t.Fatalf("callback at 40 got %v, want errOf(40)", got)
	}
	err := expectResult(t, above)
	var we *waitError
	if !errors.As(err, &tl) || tl.target != vn(20) || !errors.As(err, &we) || we.target != vn(20) || we.pos != vn(10) {
		t.Fatalf("wait for 20 = %v, want errOf(20) through fail, at 10", err)
	}
	expectBlocked(t, below, atLimit, early30, late30)
	if h, m := s.sizes(t); h != 3 || m != 3 || pending(&s) != 4 {
		t.Fatalf("after FailAboveLocked: heap %d, map %d, pending %d; want targets 12, 15, 30 and 4 waiters", h, m, pending(&s))
	}
	if pos, open := position(&s); pos != "10" || !open {
		t.Fatalf("FailAboveLocked changed the position: %q, open %v", pos, open)
	}
	// A later wait for a failed target waits as usual.
	again := waitAsync(t, &s, ctx, vn(20))
	publish(&s, vn(30), true)
	for _, ch := range []<-chan error{below, atLimit, early30, late30, again} {
		if err := expectResult(t, ch); err != nil {
			t.Fatal(err)
		}
	}
	expectNoTargets(t, &s)
}

func TestAfterFuncRunsOnceReached(t *testing.T) {
	var s Set[ver]
	publish(&s, vn(5), true)
	var got []error
	stop := callAt(&s, vn(7), func(err error) { got = append(got, err) })
	publish(&s, vn(6), true)
	if len(got) != 0 {
		t.Fatalf("ran before the target: %v", got)
	}
	publish(&s, vn(7), true)
	if len(got) != 1 || got[0] != nil {
		t.Fatalf("got %v, want one nil", got)
	}
	if stop() {
		t.Error("stop after the callback ran reported that it stopped it")
	}
	expectNoTargets(t, &s)
}

func TestAfterFuncAlreadyReachedIsDue(t *testing.T) {
	var s Set[ver]
	publish(&s, vn(9), true)
	var got []error
	s.Lock()
	stop, due := s.AfterFuncLocked(vn(9), func(err error) { got = append(got, err) })
	s.Unlock()
	if len(due) != 1 || len(got) != 0 {
		t.Fatalf("AfterFuncLocked at a reached target returned %d callbacks and ran %d; want 1 returned, none run", len(due), len(got))
	}
	due.Run()
	if len(got) != 1 || got[0] != nil || stop() {
		t.Fatalf("got %v, stop true; want one nil, stop false", got)
	}
	expectNoTargets(t, &s)
}

func TestAfterFuncStopLeavesNothing(t *testing.T) {
	var s Set[ver]
	ran := false
	stop := callAt(&s, vn(10), func(error) { ran = true })
	if h, m := s.sizes(t); h != 1 || m != 1 {
		t.Fatalf("heap %d, map %d; want 1 target", h, m)
	}
	if !stop() {
		t.Fatal("stop of a pending callback reported false")
	}
	if stop() {
		t.Error("second stop reported true")
	}
	expectNoTargets(t, &s)
	publish(&s, vn(10), true)
	stopSet(&s, errStopped)
	if ran {
		t.Error("a stopped callback ran")
	}
}

func TestAfterFuncStopKeepsOthersOfTheTarget(t *testing.T) {
	var s Set[ver]
	var a, b atomic.Int32
	stopA := callAt(&s, vn(3), func(error) { a.Add(1) })
	callAt(&s, vn(3), func(error) { b.Add(1) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := waitAsync(t, &s, ctx, vn(3))
	if !stopA() {
		t.Fatal("stop reported false")
	}
	if h, m := s.sizes(t); h != 1 || m != 1 {
		t.Fatalf("the target shared with another callback and a waiter was removed (heap %d, map %d)", h, m)
	}
	publish(&s, vn(3), true)
	if err := expectResult(t, ch); err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if a.Load() != 0 || b.Load() != 1 {
		t.Errorf("stopped ran %d times, kept ran %d times; want 0 and 1", a.Load(), b.Load())
	}
	expectNoTargets(t, &s)
}

func TestAfterFuncStopAfterFailOrFailAbove(t *testing.T) {
	var s Set[ver]
	var got []error
	stop := callAt(&s, vn(4), func(err error) { got = append(got, err) })
	failSet(&s, errFailed)
	if stop() {
		t.Error("stop after the failure released the callback reported true")
	}
	publish(&s, vn(1), true)
	stop = callAt(&s, vn(4), func(err error) { got = append(got, err) })
	s.Lock()
	due := s.FailAboveLocked(vn(1), s.SeqLocked(), func(v ver) error { return &tooLarge{v} })
	s.Unlock()
	due.Run()
	if stop() {
		t.Error("stop after FailAboveLocked released the callback reported true")
	}
	var tl *tooLarge
	if len(got) != 2 || !errors.Is(got[0], errFailed) || !errors.As(got[1], &tl) {
		t.Fatalf("got %v; want the failure, then errOf(4)", got)
	}
	expectNoTargets(t, &s)
}

func TestAfterFuncStopFromCallback(t *testing.T) {
	var s Set[ver]
	var stop func() bool
	done := make(chan bool, 1)
	stop = callAt(&s, vn(2), func(error) { done <- stop() })
	publish(&s, vn(2), true)
	if <-done {
		t.Error("stop from inside the released callback reported true")
	}
}

// TestAfterFuncStopRace runs each callback exactly once or never, with
// stop's answer saying which, while another goroutine publishes.
func TestAfterFuncStopRace(t *testing.T) {
	var s Set[ver]
	const n = 2000
	var ran [n]atomic.Int32
	var stopped [n]bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range uint64(n) {
			publish(&s, vn(i+1), true)
		}
	})
	for i := range n {
		stop := callAt(&s, vn(uint64(i%50+n/2)), func(error) { ran[i].Add(1) })
		if i%2 == 0 {
			stopped[i] = stop()
		}
	}
	wg.Wait()
	stopSet(&s, errStopped)
	some := [2]int{}
	for i := range n {
		want := int32(1)
		if stopped[i] {
			want = 0
		}
		if got := ran[i].Load(); got != want {
			t.Fatalf("callback %d ran %d times, stop said stopped=%v", i, got, stopped[i])
		}
		if i%2 == 0 {
			some[want]++
		}
	}
	t.Logf("of the %d stopped, %d before their target and %d after", n/2, some[0], some[1])
	expectNoTargets(t, &s)
}

// recordPanics makes utilruntime's panic handlers record what they are
// handed (not log it) until the test ends.
func recordPanics(t *testing.T) *[]any {
	t.Helper()
	old := utilruntime.PanicHandlers
	var got []any
	utilruntime.PanicHandlers = []func(context.Context, any){func(_ context.Context, r any) { got = append(got, r) }}
	t.Cleanup(func() { utilruntime.PanicHandlers = old })
	return &got
}

func setReallyCrash(t *testing.T, v bool) {
	t.Helper()
	old := utilruntime.ReallyCrash
	utilruntime.ReallyCrash = v
	t.Cleanup(func() { utilruntime.ReallyCrash = old })
}

// threePanicking registers three callbacks at 4 on s, the first of which
// panics, and returns the order they ran in.
func threePanicking(s *Set[ver]) *[]int {
	var ran []int
	for i := range 3 {
		callAt(s, vn(4), func(error) {
			ran = append(ran, i)
			if i == 0 {
				panic("callback 0")
			}
		})
	}
	return &ran
}

func TestDueRunReportsAPanicAndRunsTheOthers(t *testing.T) {
	reported := recordPanics(t)
	setReallyCrash(t, false)
	var s Set[ver]
	ran := threePanicking(&s)
	s.Lock()
	due := s.PublishLocked(vn(4), true)
	s.Unlock()
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Due.Run panicked with ReallyCrash off: %v", r)
			}
		}()
		due.Run()
	}()
	if !slices.Equal(*ran, []int{0, 1, 2}) {
		t.Fatalf("ran %v, want all three callbacks", *ran)
	}
	if !slices.Equal(*reported, []any{"callback 0"}) {
		t.Fatalf("reported %v, want the callback's panic once", *reported)
	}
	if err := waitNow(&s, vn(4)); err != nil {
		t.Fatalf("Set unusable after a callback panicked: %v", err)
	}
	expectNoTargets(t, &s)
}

func TestDueRunRepanicsWithReallyCrash(t *testing.T) {
	reported := recordPanics(t)
	setReallyCrash(t, true)
	var s Set[ver]
	ran := threePanicking(&s)
	s.Lock()
	due := s.PublishLocked(vn(4), true)
	s.Unlock()
	func() {
		defer func() {
			if r := recover(); r != "callback 0" {
				t.Errorf("recovered %v, want the callback's panic", r)
			}
		}()
		due.Run()
	}()
	if !slices.Equal(*reported, []any{"callback 0"}) {
		t.Fatalf("reported %v, want the panic reported before it propagated", *reported)
	}
	// The process is meant to crash: the callbacks after the panicking
	// one do not run.
	if !slices.Equal(*ran, []int{0}) {
		t.Fatalf("ran %v, want only the panicking callback", *ran)
	}
	if err := waitNow(&s, vn(4)); err != nil {
		t.Fatalf("Set unusable after a callback panicked: %v", err)
	}
	expectNoTargets(t, &s)
}

// A callback run by Due.Run may call back into the Set.
func TestDueCallbackMayReenterTheSet(t *testing.T) {
	var s Set[ver]
	var inner atomic.Bool
	callAt(&s, vn(5), func(error) {
		publish(&s, vn(6), true)
		callAt(&s, vn(6), func(error) { inner.Store(true) })
	})
	publish(&s, vn(5), true)
	if pos, _ := position(&s); !inner.Load() || pos != "6" {
		t.Fatalf("inner callback ran = %v, position %q; want true, 6", inner.Load(), pos)
	}
}

func TestLowestIsTheLowestPendingTarget(t *testing.T) {
	var s Set[ver]
	lowest := func() (ver, bool) {
		s.Lock()
		defer s.Unlock()
		return s.LowestLocked()
	}
	if _, ok := lowest(); ok {
		t.Fatal("LowestLocked with no target")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nine := waitAsync(t, &s, ctx, vn(9))
	five := waitAsync(t, &s, ctx, vn(5))
	stop := callAt(&s, vn(7), func(error) {})
	if low, ok := lowest(); !ok || low != "5" {
		t.Fatalf("LowestLocked = %q, %v; want 5", low, ok)
	}
	publish(&s, vn(6), true)
	if err := expectResult(t, five); err != nil {
		t.Fatal(err)
	}
	if low, ok := lowest(); !ok || low != "7" {
		t.Fatalf("LowestLocked after 6 = %q, %v; want the callback's 7", low, ok)
	}
	stop()
	if low, ok := lowest(); !ok || low != "9" {
		t.Fatalf("LowestLocked after the callback stopped = %q, %v; want 9", low, ok)
	}
	cancel()
	expectResult(t, nine)
	if low, ok := lowest(); ok {
		t.Fatalf("LowestLocked = %q after the last waiter left", low)
	}
}

func TestFastPath(t *testing.T) {
	var s Set[ver]
	check := func(when string, want map[ver]bool) {
		t.Helper()
		for v, w := range want {
			if got := s.ReachedFast(v); got != w {
				t.Errorf("%s: ReachedFast(%q) = %v, want %v", when, v, got, w)
			}
		}
	}
	check("zero Set", map[ver]bool{"": true, vn(1): false})
	publish(&s, vn(10), true)
	check("open at 10", map[ver]bool{"": true, vn(9): true, vn(10): true, vn(11): false, big: false})
	publish(&s, vn(10), false)
	check("held at 10", map[ver]bool{"": true, vn(1): false, vn(10): false})
	publish(&s, vn(10), true)
	check("open again", map[ver]bool{vn(10): true})
	failSet(&s, errFailed)
	check("failed", map[ver]bool{"": true, vn(1): false})
	publish(&s, big, true)
	// Beyond 64 bits, every 64-bit target is reached at once; a target
	// beyond them asks ReachedLocked.
	check("open beyond 64 bits", map[ver]bool{vn(1): true, vn(18446744073709551615): true, big: false})
	if !reached(&s, big) || reached(&s, big+"0") {
		t.Error("ReachedLocked beyond 64 bits")
	}
	publish(&s, "", true)
	check("open at zero", map[ver]bool{"": true, vn(1): false})
	publish(&s, vn(10), true)
	stopSet(&s, errStopped)
	check("stopped open at 10", map[ver]bool{"": true, vn(10): true, vn(11): false})
	var held Set[ver]
	publish(&held, vn(10), false)
	stopSet(&held, errStopped)
	if held.ReachedFast(vn(1)) {
		t.Error("stopped while held: ReachedFast(1) = true, want false")
	}

	var fresh Set[ver]
	publish(&fresh, vn(123456789012), true)
	ctx := context.Background()
	if allocs := testing.AllocsPerRun(100, func() { _ = fresh.Wait(ctx, "123456789000", failWith) }); allocs != 0 {
		t.Errorf("Wait for a reached target allocates %v times", allocs)
	}
}

func TestStopReleasesTenThousandWaiters(t *testing.T) {
	var s Set[ver]
	publish(&s, vn(1), true)
	const n = 10_000
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- s.Wait(context.Background(), vn(uint64(2+i%1000)), failWith) }()
	}
	deadline := time.Now().Add(10 * time.Second)
	for pending(&s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d waiters blocked", pending(&s), n)
		}
		time.Sleep(time.Millisecond)
	}
	if h, m := s.sizes(t); h != 1000 || m != 1000 {
		t.Fatalf("heap %d, map %d; want 1000 targets", h, m)
	}
	stopSet(&s, errStopped)
	for range n {
		select {
		case err := <-errs:
			var we *waitError
			if !errors.Is(err, errStopped) || !errors.As(err, &we) || we.pos != "1" {
				t.Fatalf("Wait after stop = %v, want the stop's error at 1", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("StopLocked did not release every waiter")
		}
	}
	if p := pending(&s); p != 0 {
		t.Fatalf("pending %d after the stop", p)
	}
	expectNoTargets(t, &s)
}

// state is one published state of TestRandomInterleavings' Set.
type state struct {
	pos    uint64
	open   bool
	failed bool
}

// history is every state a Set was put in, in order; a driver appends one
// before making it so.
type history struct {
	mu     sync.Mutex
	states []state
}

func (h *history) add(s state) {
	h.mu.Lock()
	h.states = append(h.states, s)
	h.mu.Unlock()
}

func (h *history) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.states)
}

// during returns the states the Set may have been in between two calls
// of len that returned from and to: the state appended before from may
// not have been made so yet.
func (h *history) during(from, to int) []state {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.states[max(0, from-2):to])
}

// TestRandomInterleavings is the property test: over random schedules of
// open and held publishes (up and down), failures and cancellations,
// waiters with random targets return nil only if the Set was open at or
// past their target at some moment of their wait, fail only if it failed
// then or their context ended; after a final open publish, every waiter it
// reaches is released promptly; and nothing is left behind.
func TestRandomInterleavings(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for round := range 50 {
		rng := rand.New(rand.NewPCG(seed, uint64(round)))
		var s Set[ver]
		hist := &history{states: []state{{open: true}}} // the zero Set
		type result struct {
			i        int
			canceled bool
			err      error
			states   []state
		}
		const n = 40
		results := make(chan result, n)
		cancels := make([]context.CancelFunc, n)
		targets := make([]uint64, n)
		for i := range n {
			targets[i] = 1 + rng.Uint64N(60)
			ctx, cancel := context.WithCancel(context.Background())
			cancels[i] = cancel
			go func() {
				from := hist.len()
				err := s.Wait(ctx, vn(targets[i]), failWith)
				results <- result{i, ctx.Err() != nil, err, hist.during(from, hist.len())}
			}()
		}
		steps := 30 + rng.IntN(30)
		for range steps {
			if rng.IntN(3) == 0 {
				time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
			}
			switch op := rng.IntN(10); {
			case op == 0:
				cancels[rng.IntN(n)]()
			case op == 1:
				hist.add(state{pos: hist.states[len(hist.states)-1].pos, failed: true}) // only this goroutine writes states
				failSet(&s, errFailed)
			default:
				st := state{pos: 1 + rng.Uint64N(50), open: op > 3}
				hist.add(st)
				publish(&s, vn(st.pos), st.open)
			}
		}
		final := 1 + rng.Uint64N(60)
		hist.add(state{pos: final, open: true})
		publish(&s, vn(final), true)
		for i, target := range targets {
			if target > final {
				cancels[i]()
			}
		}
		deadline := time.After(5 * time.Second)
		for range n {
			select {
			case r := <-results:
				target := targets[r.i]
				var was func(state) bool
				switch {
				case r.err == nil:
					was = func(s state) bool { return s.open && !s.failed && s.pos >= target }
				case errors.Is(r.err, errFailed):
					was = func(s state) bool { return s.failed }
				case errors.Is(r.err, context.Canceled):
					was = func(state) bool { return r.canceled }
				default:
					t.Fatalf("round %d: waiter for %d: %v", round, target, r.err)
				}
				if !slices.ContainsFunc(r.states, was) {
					t.Fatalf("round %d: waiter for %d returned %v, the Set being in %+v while it waited", round, target, r.err, r.states)
				}
			case <-deadline:
				t.Fatalf("round %d: a waiter stayed blocked (final %d)", round, final)
			}
		}
		for _, c := range cancels {
			c()
		}
		if p := pending(&s); p != 0 {
			t.Fatalf("round %d: pending %d at the end", round, p)
		}
		expectNoTargets(t, &s)
	}
}
