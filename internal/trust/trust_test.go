package trust

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"go.uber.org/goleak"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/informertest"
)

var rv = informertest.RV // informertest's

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// listedAt returns a Trust trusted at s.
func listedAt(t *testing.T, s string) *Trust {
	t.Helper()
	tr := new(Trust)
	submit(tr, Run{})
	submit(tr, List{RV: rv(t, s), Stamp: tr.Stamp()})
	return tr
}

// What waits see, in each state and doubt (the package doc's table).
func TestWhatWaitsSee(t *testing.T) {
	for _, tc := range []struct {
		name    string
		set     func(t *testing.T, tr *Trust)
		reached bool
		check   error // Check(50)'s cause when not reached
	}{
		{"trusted", func(*testing.T, *Trust) {}, true, nil},
		{"syncing", func(t *testing.T, tr *Trust) { submit(tr, List{AtZero: true, Stamp: tr.Stamp()}) }, false, freshness.ErrNotFresh},
		{"outage", func(_ *testing.T, tr *Trust) { submit(tr, Failure{}) }, false, freshness.ErrNotFresh},
		{"restore check", func(_ *testing.T, tr *Trust) { submit(tr, Check{}) }, false, freshness.ErrNotFresh},
		{"regression found", func(_ *testing.T, tr *Trust) { submit(tr, Regression{Step: Found, Rewritten: false}) }, false, freshness.ErrNotFresh},
		{"restoring", func(t *testing.T, tr *Trust) { submit(tr, Read{Shows: ReadRestored, Stamp: tr.Stamp()}) }, false, freshness.ErrNotFresh},
		{"plain", func(_ *testing.T, tr *Trust) { submit(tr, List{Unordered: freshness.ErrIncomparable}) }, false, freshness.ErrIncomparable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := listedAt(t, "100")
			tc.set(t, tr)
			if got := tr.Reached(rv(t, "50")); got != tc.reached {
				t.Fatalf("Reached(50) = %v, want %v", got, tc.reached)
			}
			if err := tr.Check(rv(t, "50")); (err == nil) != tc.reached || (err != nil && !errors.Is(err, tc.check)) {
				t.Fatalf("Check(50) = %v, want cause %v", err, tc.check)
			}
			if v := tr.View(); v.Held == tc.reached {
				t.Fatalf("View().Held = %v with Reached %v", v.Held, tc.reached)
			}
		})
	}
}

// An outage ends at a list requested, or a check answered, after the
// last failure; not at one requested before it.
func TestOutageEndsAtEvidenceSentAfterIt(t *testing.T) {
	tr := listedAt(t, "100")
	before := tr.Stamp()
	submit(tr, Failure{})
	submit(tr, List{RV: rv(t, "110"), Stamp: before})
	submit(tr, Read{Shows: ReadAnswered, Stamp: before})
	if tr.Reached(rv(t, "50")) {
		t.Fatal("evidence requested before the failure ended the outage")
	}
	submit(tr, Read{Shows: ReadAnswered, Stamp: tr.Stamp()})
	if !tr.Reached(rv(t, "110")) {
		t.Fatal("a check answered after the failure did not end the outage")
	}
	submit(tr, Failure{})
	submit(tr, List{RV: rv(t, "120"), Stamp: tr.Stamp()})
	if !tr.Reached(rv(t, "120")) {
		t.Fatal("a list requested after the failure did not end the outage")
	}
}

// A proof is void once a regression was found or a request failed since
// its request was sent.
func TestStaleProofsAreVoid(t *testing.T) {
	for name, since := range map[string]func(*Trust){
		"regression": func(tr *Trust) { submit(tr, Regression{Step: Admitted}) },
		"failure":    func(tr *Trust) { submit(tr, Failure{}); submit(tr, Read{Shows: ReadAnswered, Stamp: tr.Stamp()}) },
	} {
		t.Run(name, func(t *testing.T) {
			tr := listedAt(t, "100")
			st := tr.Stamp()
			since(tr)
			submit(tr, Proof{From: rv(t, "100"), To: rv(t, "150"), Stamp: st})
			if submit(tr, Proof{To: rv(t, "150"), Stamp: st}) || tr.Reached(rv(t, "101")) {
				t.Fatalf("a proof sent before the %s moved the position to %s", name, tr.View().Applied)
			}
			now := tr.Stamp()
			submit(tr, Proof{From: rv(t, "100"), To: rv(t, "150"), Stamp: now})
			if !tr.Reached(rv(t, "150")) || tr.View().Proven != rv(t, "150") {
				t.Fatalf("a proof sent now did not count: %+v", tr.View())
			}
		})
	}
}

// A bookmark proof waits for applied to reach its start.
func TestGapClosesWhenAppliedReachesItsStart(t *testing.T) {
	tr := listedAt(t, "100")
	submit(tr, Proof{From: rv(t, "120"), To: rv(t, "150"), Stamp: tr.Stamp()})
	if tr.Reached(rv(t, "121")) {
		t.Fatal("the gap closed before applied reached its start")
	}
	submit(tr, Stream{RV: rv(t, "120")})
	if !tr.Reached(rv(t, "150")) || tr.View().Advances != 1 {
		t.Fatalf("the gap did not close at its start: %+v", tr.View())
	}
}

// The position shown does not go back before the regression that moves
// it back is declared; a restore forgets it until its relist.
func TestShownGoesBackOnlyOnceDeclared(t *testing.T) {
	tr := listedAt(t, "100")
	submit(tr, Regression{Step: Found, Rewritten: true})
	submit(tr, List{RV: rv(t, "60"), Stamp: tr.Stamp()})
	if v := tr.View(); v.Shown != rv(t, "100") || v.Applied != rv(t, "60") || tr.Reached(rv(t, "60")) {
		t.Fatalf("before the declaration: %+v", v)
	}
	submit(tr, Regression{Step: Declared, N: 1})
	if v := tr.View(); v.Shown != rv(t, "60") || !tr.Reached(rv(t, "60")) {
		t.Fatalf("after the declaration: %+v", v)
	}
	st := tr.Stamp()
	if !submit(tr, Read{Shows: ReadRestored, Stamp: st}) {
		t.Fatal("the restore was not begun")
	}
	if submit(tr, Read{Shows: ReadRestored, Stamp: st}) {
		t.Fatal("one restore, found by two reads, was begun twice")
	}
	if tr.Taken(true, tr.Stamp()) != Relist || tr.Taken(true, st) != Drop {
		t.Fatal("Taken does not tell the relist from a list requested before the restore")
	}
	submit(tr, Regression{Step: Declared, N: 1})
	if v := tr.View(); v.State != Restoring || !v.Shown.IsZero() || tr.Reached(rv(t, "1")) {
		t.Fatalf("restoring: %+v", v)
	}
	submit(tr, List{RV: rv(t, "70"), Stamp: tr.Stamp()})
	if !tr.Reached(rv(t, "70")) {
		t.Fatal("the relist did not end the restore")
	}
}

// TooLarge fails waits that joined by the read for targets above it, and
// Stop fails the rest, keeping what was reached.
func TestTooLargeAndStop(t *testing.T) {
	tr := listedAt(t, "100")
	ctx := context.Background()
	far := make(chan error, 1)
	go func() { far <- tr.Wait(ctx, rv(t, "500")) }()
	for tr.View().Pending != 1 {
		runtime.Gosched()
	}
	submit(tr, Read{Shows: ReadBehindWaits, Server: rv(t, "200"), Seq: tr.View().Seq})
	if err := <-far; !errors.Is(err, freshness.ErrTooLargeResourceVersion) {
		t.Fatalf("Wait(500) with the server at 200 = %v", err)
	}
	submit(tr, Run{Stopped: true})
	if err := tr.Wait(ctx, rv(t, "101")); !errors.Is(err, freshness.ErrStopped) {
		t.Fatalf("Wait after Stop = %v", err)
	}
	if err := tr.Wait(ctx, rv(t, "100")); err != nil {
		t.Fatalf("Wait for what was reached, after Stop = %v", err)
	}
	if err := tr.Check(rv(t, "101")); !errors.Is(err, freshness.ErrStopped) {
		t.Fatalf("Check after Stop = %v", err)
	}
	if err := tr.Check(rv(t, "100")); err != nil {
		t.Fatalf("Check for what was reached, after Stop = %v", err)
	}
}
