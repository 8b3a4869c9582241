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
	tr.mu.Lock()
	targets, waiters := len(tr.targets), tr.byRV["7"].waiters
	tr.mu.Unlock()
	if targets != 2 || waiters != 5 {
		t.Fatalf("6 waiters on RVs 7,7,7,7,7,8 make %d targets, %d waiters on 7; want 2 and 5", targets, waiters)
	}
	tr.Advance(mustRV(t, "7"))
	for _, ch := range chans[:5] {
		if err := expectResult(t, ch); err != nil {
			t.Fatal(err)
		}
	}
	expectBlocked(t, chans[5])
	tr.Advance(mustRV(t, "8"))
	if err := expectResult(t, chans[5]); err != nil {
		t.Fatal(err)
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
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.targets) != 0 || len(tr.byRV) != 0 || tr.pending != 0 {
		t.Fatalf("after cancel: %d targets, %d by RV, %d pending; want none", len(tr.targets), len(tr.byRV), tr.pending)
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

func TestSetIncomparableReleasesAndRefuses(t *testing.T) {
	var tr Tracker
	tr.Advance(mustRV(t, "10"))
	ch := waitAsync(t, &tr, context.Background(), "20")
	cause := &IncomparableError{ResourceVersion: "abc"}
	tr.SetIncomparable(cause)
	err := expectResult(t, ch)
	var ie *IncomparableError
	if !errors.Is(err, ErrIncomparable) || !errors.As(err, &ie) || ie.ResourceVersion != "abc" {
		t.Fatalf("pending Wait after SetIncomparable = %v", err)
	}
	// Even a target below the old value fails: nothing is claimed fresh.
	if err := tr.Wait(context.Background(), "5"); !errors.Is(err, ErrIncomparable) {
		t.Fatalf("Wait(5) while incomparable = %v", err)
	}
	tr.Advance(mustRV(t, "30"))
	if err := tr.Wait(context.Background(), "5"); !errors.Is(err, ErrIncomparable) {
		t.Fatalf("Advance left incomparable mode: Wait(5) = %v", err)
	}
	tr.Reset(mustRV(t, "30"))
	if err := tr.Wait(context.Background(), "30"); err != nil {
		t.Fatalf("Wait(30) after Reset(30) = %v", err)
	}
}

func TestResetMovesBackAndKeepsHigherWaiters(t *testing.T) {
	var tr Tracker
	tr.Advance(mustRV(t, "100"))
	ch := waitAsync(t, &tr, context.Background(), "150")
	tr.Reset(mustRV(t, "50"))
	if cur := tr.Current().String(); cur != "50" {
		t.Fatalf("Current after Reset(50) = %s", cur)
	}
	// A new write after the regression gets a lower RV: it must not be fresh yet.
	ch2 := waitAsync(t, &tr, context.Background(), "60")
	expectBlocked(t, ch)
	expectBlocked(t, ch2)
	tr.Advance(mustRV(t, "60"))
	if err := expectResult(t, ch2); err != nil {
		t.Fatal(err)
	}
	expectBlocked(t, ch)
	tr.Advance(mustRV(t, "150"))
	if err := expectResult(t, ch); err != nil {
		t.Fatal(err)
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
	// After Stop: what was reached stays reached; nothing else waits.
	if err := tr.Wait(context.Background(), "1"); err != nil {
		t.Errorf("Wait(1) after Stop = %v, want nil (the cache is that fresh)", err)
	}
	if err := tr.Wait(context.Background(), "2"); !errors.Is(err, ErrStopped) {
		t.Errorf("Wait(2) after Stop = %v, want ErrStopped", err)
	}
	tr.Stop() // idempotent
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
				if err := tr.WaitRV(context.Background(), rvOf(target)); err != nil {
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
// advances (some older, some repeated), resets are absent, and waiters with
// random targets and random cancellations, no waiter returns nil before the
// tracker reached its target, and after the final advance no waiter whose
// target was reached is still blocked.
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
				err := tr.WaitRV(ctx, rvOf(targets[i]))
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
	tr.AfterFunc(mustRV(t, "10"), record("now")) // already reached: at once
	if s := <-got; s != "now <nil>" {
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
		if s := <-got; s != want {
			t.Fatalf("got %q, want %q", s, want)
		}
	}
	tr.Stop()
	if s := <-got; !strings.HasPrefix(s, "twenty ") || !strings.Contains(s, "stopped") {
		t.Fatalf("pending callback at stop got %q", s)
	}
	tr.AfterFunc(mustRV(t, "30"), record("late"))
	if s := <-got; !strings.Contains(s, "stopped") {
		t.Fatalf("callback after stop got %q", s)
	}

	var inc Tracker
	inc.AfterFunc(mustRV(t, "5"), record("inc"))
	inc.SetIncomparable(&IncomparableError{ResourceVersion: "x"})
	if s := <-got; !strings.Contains(s, "not a comparable") {
		t.Fatalf("callback at SetIncomparable got %q", s)
	}
}
