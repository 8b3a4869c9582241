package trust

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"testing"

	"github.com/freshinformer/freshinformer/freshness"
)

// submit submits e and runs what it released; it returns taken.
func submit(tr *Trust, e Evidence) bool {
	due, taken := tr.Submit(e)
	due.Run()
	return taken
}

// The evidence is a closed set of at most eight kinds: every type with an
// apply method is one, and they are all in evidence.go.
func TestAtMostEightKindsOfEvidence(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, f := range pkgs["trust"].Files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Name.Name != "apply" {
				continue
			}
			recv := fn.Recv.List[0].Type
			if star, ok := recv.(*ast.StarExpr); ok {
				recv = star.X
			}
			kinds = append(kinds, recv.(*ast.Ident).Name)
		}
	}
	slices.Sort(kinds)
	documented := []string{"Check", "Failure", "List", "Proof", "Read", "Regression", "Run", "Stream"}
	if len(kinds) > 8 || !slices.Equal(kinds, documented) {
		t.Fatalf("kinds of evidence %v, want the eight documented: %v", kinds, documented)
	}
}

// While a declared restore waits for its relist, events and lists
// requested before it are dropped, and the relist is told apart; once it
// is applied, everything is applied again.
func TestTakenDropsWhatARestoreLost(t *testing.T) {
	tr := listedAt(t, "100")
	if got := tr.Taken(false, Stamp{}); got != Apply {
		t.Fatalf("an event while trusted: %v", got)
	}
	before := tr.Stamp()
	if !submit(tr, Read{Shows: ReadRestored, Stamp: before}) {
		t.Fatal("the restore was not begun")
	}
	relist := tr.Stamp()
	for name, tc := range map[string]struct {
		list bool
		st   Stamp
		want Take
	}{
		"an event":                          {false, relist, Drop},
		"a list requested before":           {true, before, Drop},
		"the relist":                        {true, relist, Relist},
		"a list requested after the relist": {true, Stamp{Epoch: relist.Epoch + 1}, Relist},
	} {
		if got := tr.Taken(tc.list, tc.st); got != tc.want {
			t.Errorf("%s while restoring: %v, want %v", name, got, tc.want)
		}
	}
	submit(tr, List{RV: rv(t, "70"), Stamp: relist})
	if got := tr.Taken(false, Stamp{}); got != Apply {
		t.Fatalf("an event after the relist: %v", got)
	}
}

// An event is placed against the applied position, or against the
// stream's own behind a snapshot; nothing is placed while not trusted or
// for a malformed resource version.
func TestPlacedOrdersAgainstTheStream(t *testing.T) {
	tr := listedAt(t, "100")
	malformed := errors.New("malformed")
	for _, tc := range []struct {
		rv, stream string
		err        error
		want       Place
		against    string
	}{
		{"90", "", nil, Behind, "100"},
		{"100", "", nil, At, "100"},
		{"110", "", nil, Ahead, "100"},
		{"90", "80", nil, Ahead, "80"},
		{"80", "80", nil, At, "80"},
		{"90", "", malformed, Unplaced, "100"},
	} {
		var stream freshness.RV
		if tc.stream != "" {
			stream = rv(t, tc.stream)
		}
		got, against := tr.Placed(rv(t, tc.rv), tc.err, stream)
		if got != tc.want || against.String() != tc.against {
			t.Errorf("Placed(%s, stream %q, %v) = %v against %s, want %v against %s", tc.rv, tc.stream, tc.err, got, against, tc.want, tc.against)
		}
	}
	submit(tr, List{AtZero: true, Stamp: tr.Stamp()})
	if got, _ := tr.Placed(rv(t, "1"), nil, freshness.RV{}); got != Unplaced {
		t.Fatalf("placed while syncing: %v", got)
	}
	if !tr.Over().IsZero() {
		t.Fatalf("a list is compared with %s while syncing", tr.Over())
	}
}

// A list is taken (it rewrote the cache's history) when it ends a restore
// or moves the cache back, not when it moves it up.
func TestListTakenWhenItRewritesHistory(t *testing.T) {
	tr := listedAt(t, "100")
	if submit(tr, List{RV: rv(t, "120"), Stamp: tr.Stamp()}) {
		t.Fatal("a list moving the cache up rewrote its history")
	}
	if tr.Over() != rv(t, "120") {
		t.Fatalf("Over = %s", tr.Over())
	}
	if !submit(tr, List{RV: rv(t, "90"), Stamp: tr.Stamp()}) {
		t.Fatal("a list moving the cache back did not rewrite its history")
	}
	submit(tr, Read{Shows: ReadRestored, Stamp: tr.Stamp()})
	if !submit(tr, List{RV: rv(t, "95"), Stamp: tr.Stamp()}) {
		t.Fatal("the relist that ends a restore did not rewrite the history")
	}
}

// Resource versions that cannot be ordered make the informer plain once,
// keeping the first cause, from an event or a list alike; a comparable
// list ends it.
func TestUnorderedIsPlainOnce(t *testing.T) {
	tr := listedAt(t, "100")
	first, second := errors.New("first"), errors.New("second")
	if !submit(tr, Stream{Unordered: first}) {
		t.Fatal("an unstamped event did not make the informer plain")
	}
	if submit(tr, List{Unordered: second}) {
		t.Fatal("plain twice")
	}
	if err := tr.Check(rv(t, "50")); !errors.Is(err, first) {
		t.Fatalf("Check while plain = %v, want the first cause", err)
	}
	if submit(tr, Stream{RV: rv(t, "120")}) || tr.Reached(rv(t, "50")) {
		t.Fatal("an event ended plain mode")
	}
	submit(tr, List{RV: rv(t, "130"), Stamp: tr.Stamp()})
	if !tr.Reached(rv(t, "130")) {
		t.Fatal("a comparable list did not end plain mode")
	}
}

// A snapshot proof (From zero) moves applied at once; a bookmark proof
// once applied reaches its start; both are void when sent before a
// failure.
func TestProofKinds(t *testing.T) {
	tr := listedAt(t, "100")
	st := tr.Stamp()
	if !submit(tr, Proof{To: rv(t, "110"), Stamp: st}) || !tr.Reached(rv(t, "110")) {
		t.Fatal("a snapshot proof did not move applied")
	}
	if !submit(tr, Proof{From: rv(t, "115"), To: rv(t, "130"), Stamp: st}) || tr.Reached(rv(t, "111")) {
		t.Fatal("a bookmark proof moved applied before applied reached its start")
	}
	submit(tr, Stream{RV: rv(t, "115")})
	if !tr.Reached(rv(t, "130")) {
		t.Fatal("the bookmark proof did not close")
	}
	submit(tr, Failure{})
	if submit(tr, Proof{To: rv(t, "140"), Stamp: st}) {
		t.Fatal("a proof sent before a failure counted")
	}
}

// Nothing counts once stopped.
func TestNothingCountsOnceStopped(t *testing.T) {
	tr := listedAt(t, "100")
	if !submit(tr, Run{Stopped: true}) {
		t.Fatal("the stop did not count")
	}
	if submit(tr, Stream{RV: rv(t, "120")}) || tr.Reached(rv(t, "120")) {
		t.Fatal("an event counted after the stop")
	}
}

// An outage begun by streams that only ended early ends when the resumed
// stream applies past the floor they left, as a read sent once the
// resumed watch was taken would show; not at the floor, and not once a
// request failed (the server was down: only a list or a read ends it).
func TestEndedStreamOutageEndsPastItsFloor(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures []Failure
		applied  string // what the resumed stream applies
		ends     bool
	}{
		{"at the floor", []Failure{{Delivered: rv(t, "110")}}, "110", false},
		{"past the floor", []Failure{{Delivered: rv(t, "110")}}, "111", true},
		{"past the applied floor", []Failure{{Delivered: rv(t, "90")}}, "101", true},
		{"a request failed after", []Failure{{Delivered: rv(t, "110")}, {}}, "150", false},
		{"a request failed before", []Failure{{}, {Delivered: rv(t, "110")}}, "150", false},
		{"two ended streams", []Failure{{Delivered: rv(t, "110")}, {Delivered: rv(t, "120")}}, "115", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := listedAt(t, "100")
			for _, f := range tc.failures {
				submit(tr, f)
			}
			if !tr.View().Outage {
				t.Fatal("no outage")
			}
			submit(tr, Stream{RV: rv(t, tc.applied)})
			if ended := !tr.View().Outage; ended != tc.ends {
				t.Fatalf("outage ended %v once the stream applied %s, want %v", ended, tc.applied, tc.ends)
			}
			if tc.ends {
				return
			}
			submit(tr, Read{Shows: ReadAnswered, Stamp: tr.Stamp()})
			if tr.View().Outage {
				t.Fatal("a read sent after the failures answered, and the outage goes on")
			}
		})
	}
}
