package freshness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func mustRV(t testing.TB, s string) RV {
	t.Helper()
	rv, err := ParseRV(s)
	if err != nil {
		t.Fatal(err)
	}
	return rv
}

func rvOf(n uint64) RV { return RV{s: strconv.FormatUint(n, 10), n: n} }

// waitAsync starts Wait in a goroutine and returns the channel its result
// arrives on, after the waiter is registered (so tests do not race the
// registration).
func waitAsync(t *testing.T, tr *Tracker, ctx context.Context, rv string) <-chan error {
	t.Helper()
	before := tr.Pending()
	ch := make(chan error, 1)
	go func() { ch <- tr.Wait(ctx, rv) }()
	deadline := time.Now().Add(5 * time.Second)
	for tr.Pending() == before {
		if time.Now().After(deadline) {
			t.Fatalf("waiter for %s never registered", rv)
		}
		time.Sleep(time.Millisecond)
	}
	return ch
}

func expectBlocked(t *testing.T, ch <-chan error) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("Wait returned %v before its target was reached", err)
	case <-time.After(20 * time.Millisecond):
	}
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

func TestAdvanceIsMonotonic(t *testing.T) {
	var tr Tracker
	if got := tr.Advance(mustRV(t, "10")); got != 1 {
		t.Fatalf("Advance(10) from none = %d, want 1", got)
	}
	if got := tr.Advance(mustRV(t, "9")); got != -1 {
		t.Fatalf("Advance(9) after 10 = %d, want -1", got)
	}
	if got := tr.Advance(mustRV(t, "10")); got != 0 {
		t.Fatalf("Advance(10) after 10 = %d, want 0", got)
	}
	if cur := tr.Current().String(); cur != "10" {
		t.Fatalf("Current = %s after an older Advance, want 10", cur)
	}
	big := strings.Repeat("9", 25)
	tr.Advance(mustRV(t, big))
	tr.Advance(mustRV(t, "18446744073709551615"))
	if cur := tr.Current().String(); cur != big {
		t.Fatalf("Current = %s, want %s", cur, big)
	}
}

func TestWaitAlreadyFresh(t *testing.T) {
	var tr Tracker
	tr.Advance(mustRV(t, "100"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a fresh cache answers even for an ended context
	for _, rv := range []string{"1", "99", "100"} {
		if err := tr.Wait(ctx, rv); err != nil {
			t.Errorf("Wait(%s) at 100 = %v", rv, err)
		}
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = tr.Wait(ctx, "100") }); allocs != 0 {
		t.Errorf("already-fresh Wait allocates %v times", allocs)
	}
}

func TestWaitBlocksUntilReached(t *testing.T) {
	var tr Tracker
	tr.Advance(mustRV(t, "5"))
	ch := waitAsync(t, &tr, context.Background(), "10")
	tr.Advance(mustRV(t, "9"))
	expectBlocked(t, ch)
	tr.Advance(mustRV(t, "3")) // older: no effect
	expectBlocked(t, ch)
	tr.Advance(mustRV(t, "11"))
	if err := expectResult(t, ch); err != nil {
		t.Fatalf("Wait(10) after Advance(11) = %v", err)
	}
	if p := tr.Pending(); p != 0 {
		t.Fatalf("Pending = %d after release", p)
	}
}

func TestWaitBeyond64Bits(t *testing.T) {
	var tr Tracker
	tr.Advance(mustRV(t, "18446744073709551615"))
	target := "18446744073709551616"
	ch := waitAsync(t, &tr, context.Background(), target)
	expectBlocked(t, ch)
	tr.Advance(mustRV(t, target))
	if err := expectResult(t, ch); err != nil {
		t.Fatal(err)
	}
	// Beyond 64 bits the fast path still answers 64-bit targets.
	if err := tr.Wait(context.Background(), "12345"); err != nil {
		t.Fatal(err)
	}
}

func TestWaitersOfOneRVShareATarget(t *testing.T) {
	var tr Tracker
	var chans []<-chan error
	for range 5 {
		chans = append(chans, waitAsync(t, &tr, context.Background(), "7"))
	}
	chans = append(chans, waitAsync(t, &tr, context.Background(), "8"))
	// How many targets they make is internal/rvwait's test
	// (TestWaitersOfOneTargetShareIt); here, that one step releases the
	// five and keeps the sixth.
	tr.Advance(mustRV(t, "7"))
	for _, ch := range chans[:5] {
		if err := expectResult(t, ch); err != nil {
			t.Fatal(err)
		}
	}
	expectBlocked(t, chans[5])
	if p := tr.Pending(); p != 1 {
		t.Fatalf("Pending = %d after 7, want 1 (the waiter for 8)", p)
	}
	tr.Advance(mustRV(t, "8"))
	if err := expectResult(t, chans[5]); err != nil {
		t.Fatal(err)
	}
	if n := leftTargets(&tr); n != 0 {
		t.Fatalf("%d targets left", n)
	}
}

func TestWaitContextErrors(t *testing.T) {
	var tr Tracker
	tr.Advance(mustRV(t, "41"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	err := tr.Wait(ctx, "42")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait past deadline = %v, want DeadlineExceeded", err)
	}
	var we *WaitError
	if !errors.As(err, &we) || we.Target != "42" || we.Current != "41" || we.Waited < 25*time.Millisecond {
		t.Fatalf("WaitError = %+v, want target 42, current 41, waited >= 25ms", we)
	}
	for _, want := range []string{"42", "41", "deadline exceeded"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}

	cctx, ccancel := context.WithCancel(context.Background())
	ch := waitAsync(t, &tr, cctx, "50")
	ccancel()
	if err := expectResult(t, ch); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after cancel = %v, want Canceled", err)
	}
	// The abandoned target is gone: no pile-up of targets nobody waits for.
	if n, p := leftTargets(&tr), tr.Pending(); n != 0 || p != 0 {
		t.Fatalf("after cancel: %d targets, %d pending; want none", n, p)
	}
}

func TestWaitMalformedTargetFailsAtOnce(t *testing.T) {
	var tr Tracker
	for _, rv := range []string{"", "0", "01", "abc", "1\x00"} {
		if err := tr.Wait(context.Background(), rv); !errors.Is(err, ErrIncomparable) {
			t.Errorf("Wait(%q) = %v, want ErrIncomparable", rv, err)
		}
	}
}

func TestStopReleasesTenThousandWaiters(t *testing.T) {
	var tr Tracker
	tr.Advance(mustRV(t, "1"))
	const n = 10_000
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- tr.Wait(context.Background(), strconv.Itoa(2+i%1000)) }()
	}
	deadline := time.Now().Add(10 * time.Second)
	for tr.Pending() < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d waiters registered", tr.Pending(), n)
		}
		time.Sleep(time.Millisecond)
	}
	tr.Stop()
	for range n {
		select {
		case err := <-errs:
			var we *WaitError
			if !errors.Is(err, ErrStopped) || !errors.As(err, &we) || we.Current != "1" {
				t.Fatalf("Wait after Stop = %v, want ErrStopped at current 1", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Stop did not release every waiter")
		}
	}
	if p := tr.Pending(); p != 0 {
		t.Fatalf("Pending = %d after Stop", p)
	}
	if n := leftTargets(&tr); n != 0 {
		t.Fatalf("%d targets left after Stop", n)
	}
}

// TestStopKeepsWhatWasReached: after Stop, the RV reached stays readable
// and reached (Stop's doc: later waits "for a target not yet reached" fail;
// Wait's: nil "once the tracker is at rv or newer"); nothing else waits,
// and nothing moves it.
func TestStopKeepsWhatWasReached(t *testing.T) {
	var tr Tracker
	tr.Advance(mustRV(t, "10"))
	tr.Stop()
	if cur := tr.Current().String(); cur != "10" {
		t.Errorf("Current after Stop = %q, want 10", cur)
	}
	if err := tr.Wait(context.Background(), "11"); !errors.Is(err, ErrStopped) {
		t.Errorf("Wait(11) after Stop = %v, want ErrStopped", err)
	}
	tr.Advance(mustRV(t, "20"))
	if cur := tr.Current().String(); cur != "10" {
		t.Errorf("Current = %q after an Advance that followed Stop, want 10", cur)
	}
	if err := tr.Wait(context.Background(), "20"); !errors.Is(err, ErrStopped) {
		t.Errorf("Wait(20) after Stop and Advance(20) = %v, want ErrStopped", err)
	}
	tr.Stop() // idempotent
	if err := tr.Wait(context.Background(), "10"); err != nil {
		t.Errorf("Wait(10) after Stop at 10 = %v, want nil (the cache is that fresh)", err)
	}
	if !tr.Reached(mustRV(t, "5")) {
		t.Error("Reached(5) after Stop at 10 = false, want true")
	}

	// Beyond 64 bits, where the fast path does not answer.
	var wide Tracker
	big := "1" + strings.Repeat("0", 20)
	wide.Advance(mustRV(t, big))
	wide.Stop()
	if err := wide.Wait(context.Background(), big); err != nil {
		t.Errorf("Wait(%s) after Stop there = %v, want nil", big, err)
	}
	if !wide.Reached(mustRV(t, big)) {
		t.Errorf("Reached(%s) after Stop there = false, want true", big)
	}
	if err := wide.Wait(context.Background(), big+"0"); !errors.Is(err, ErrStopped) {
		t.Errorf("Wait beyond it after Stop = %v, want ErrStopped", err)
	}
}

// TestConcurrentAdvanceAndWait runs writers and waiters together under the
// race detector: every waiter returns, and none returns nil before some
// writer started applying an RV at least as new as its target.
func TestConcurrentAdvanceAndWait(t *testing.T) {
	var tr Tracker
	var applied atomic.Uint64 // highest RV handed to Advance, set just before it
	const writers, waiters, top = 4, 64, 2000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for n := uint64(w + 1); n <= top; n += writers {
				for {
					old := applied.Load()
					if n <= old || applied.CompareAndSwap(old, n) {
						break
					}
				}
				tr.Advance(rvOf(n))
			}
		})
	}
	for i := range waiters {
		wg.Go(func() {
			for target := uint64(i%7 + 1); target <= top; target += uint64(i%13 + 1) {
				if err := tr.Wait(context.Background(), rvOf(target).String()); err != nil {
					t.Errorf("Wait(%d) = %v", target, err)
					return
				}
				if got := applied.Load(); got < target {
					t.Errorf("Wait(%d) returned while the highest applied RV was %d", target, got)
					return
				}
			}
		})
	}
	wg.Wait()
	if p := tr.Pending(); p != 0 {
		t.Fatalf("Pending = %d at the end", p)
	}
}

// TestRandomInterleavings is the property test: over random schedules of
// advances (some older, some repeated) and waiters with random targets and
// random cancellations, no waiter returns nil before the tracker reached
// its target, and after the final advance no waiter whose target was
// reached is still blocked, and no target is left. (internal/rvwait's test
// of the same name adds held publishes, moves back and failures.)
func TestRandomInterleavings(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for round := range 50 {
		rng := rand.New(rand.NewPCG(seed, uint64(round)))
		var tr Tracker
		var reached atomic.Uint64 // max RV passed to Advance, published before it
		type result struct {
			target   uint64
			canceled bool
			err      error
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
				err := tr.Wait(ctx, rvOf(targets[i]).String())
				if err == nil && reached.Load() < targets[i] {
					err = errors.New("returned nil before the target was reached")
				}
				results <- result{targets[i], ctx.Err() != nil, err}
			}()
		}
		steps := 30 + rng.IntN(30)
		var top uint64
		for range steps {
			runtimeYield(rng)
			switch rng.IntN(4) {
			case 0: // cancel someone
				cancels[rng.IntN(n)]()
			default:
				v := 1 + rng.Uint64N(50)
				if v > top {
					top = v
					reached.Store(v)
				}
				tr.Advance(rvOf(v))
			}
		}
		// Everyone whose target is reached must be released promptly;
		// the rest are cancelled and must report it.
		deadline := time.After(5 * time.Second)
		for range n {
			select {
			case r := <-results:
				switch {
				case r.err == nil && r.target > top:
					t.Fatalf("round %d: waiter for %d returned nil at %d", round, r.target, top)
				case r.err != nil && !errors.Is(r.err, context.Canceled):
					t.Fatalf("round %d: waiter for %d: %v", round, r.target, r.err)
				case r.err != nil && !r.canceled:
					t.Fatalf("round %d: waiter for %d failed without cancellation: %v", round, r.target, r.err)
				}
			case <-deadline:
				t.Fatalf("round %d: a waiter stayed blocked (top %d)", round, top)
			}
			// Release the not-reached ones once the reached ones are in.
			for i := range cancels {
				if targets[i] > top {
					cancels[i]()
				}
			}
		}
		for _, c := range cancels {
			c()
		}
		if p := tr.Pending(); p != 0 {
			t.Fatalf("round %d: Pending = %d at the end", round, p)
		}
		if n := leftTargets(&tr); n != 0 {
			t.Fatalf("round %d: %d targets left at the end", round, n)
		}
	}
}

func runtimeYield(rng *rand.Rand) {
	if rng.IntN(3) == 0 {
		time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
	}
}

func TestAfterFunc(t *testing.T) {
	var tr Tracker
	tr.Advance(mustRV(t, "10"))
	got := make(chan string, 8)
	record := func(name string) func(error) {
		return func(err error) { got <- fmt.Sprint(name, " ", err) }
	}
	// Callbacks run before the call that released them returns.
	next := func() string {
		t.Helper()
		select {
		case s := <-got:
			return s
		default:
			t.Fatal("no callback ran")
			return ""
		}
	}
	tr.AfterFunc(mustRV(t, "10"), record("now")) // already reached: at once
	if s := next(); s != "now <nil>" {
		t.Fatalf("got %q", s)
	}
	tr.AfterFunc(mustRV(t, "12"), record("twelve"))
	tr.AfterFunc(mustRV(t, "12"), record("twelve-again"))
	tr.AfterFunc(mustRV(t, "20"), record("twenty"))

	// A waiter on the same target leaving does not drop the callbacks.
	ctx, cancel := context.WithCancel(context.Background())
	ch := waitAsync(t, &tr, ctx, "12")
	cancel()
	<-ch

	tr.Advance(mustRV(t, "11"))
	select {
	case s := <-got:
		t.Fatalf("callback %q ran before its target", s)
	default:
	}
	tr.Advance(mustRV(t, "15"))
	for _, want := range []string{"twelve <nil>", "twelve-again <nil>"} {
		if s := next(); s != want {
			t.Fatalf("got %q, want %q", s, want)
		}
	}
	tr.Stop()
	if s := next(); !strings.HasPrefix(s, "twenty ") || !strings.Contains(s, "stopped") {
		t.Fatalf("pending callback at stop got %q", s)
	}
	tr.AfterFunc(mustRV(t, "30"), record("late"))
	if s := next(); !strings.Contains(s, "stopped") {
		t.Fatalf("callback after stop got %q", s)
	}
	if n := leftTargets(&tr); n != 0 {
		t.Fatalf("%d targets left", n)
	}
}
