package snapshotzone

import (
	"errors"
	"testing"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/handlers"
	"github.com/freshinformer/freshinformer/internal/informertest"
	"github.com/freshinformer/freshinformer/internal/recorded"
)

// cm and rv are informertest's.
var (
	cm = informertest.ConfigMap
	rv = informertest.RV
)

// Events behind a snapshot of keys the cache does not hold reach handlers
// only, counted; an event of a cached key, or past the snapshot, is not
// the zone's; the stream passing the snapshot ends the zone, deleting a
// key whose deletion the stream skipped from handlers' view.
func TestZone(t *testing.T) {
	indexer := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	if err := indexer.Add(cm("cached", "5")); err != nil {
		t.Fatal(err)
	}
	p := &handlers.Processor{Clock: testingclock.NewFakeClock(time.Now())}
	l := handlers.NewListener(klog.Background(), toolscache.ResourceEventHandlerFuncs{}, 0, 0, time.Now())
	p.AddListener(l)
	var recent recorded.Recent
	var z Zone
	var unplaced, listed int
	z.Init(p, indexer, &recent, Hooks{Unplaced: func() { unplaced++ }, Listed: func() { listed++ }})
	z.StreamAt(rv(t, "10"))
	if z.Event(handlers.Update, cm("a", "11"), rv(t, "11"), nil) {
		t.Fatal("a zone event with no zone open")
	}
	z.Begin(rv(t, "20"))
	if got := z.Stream(); got != rv(t, "10") {
		t.Fatalf("Stream = %v with the zone open", got)
	}
	if !z.Event(handlers.Update, cm("a", "12"), rv(t, "12"), nil) || !z.Event(handlers.Update, cm("a", "13"), rv(t, "13"), nil) {
		t.Fatal("an uncached key's events behind the snapshot are not the zone's")
	}
	if z.Event(handlers.Update, cm("cached", "14"), rv(t, "14"), nil) || z.Event(handlers.Update, cm("b", "21"), rv(t, "21"), nil) {
		t.Fatal("a cached key's event, or one past the snapshot, taken by the zone")
	}
	if z.Behind() != 2 || !recent.Contains(rv(t, "13")) || l.Pending() != 2 {
		t.Fatalf("behind %d, handlers told %d times", z.Behind(), l.Pending())
	}
	// A malformed add of a key not cached cannot be placed: dropped, one
	// relist asked for however many follow, released by the next list.
	if !z.Event(handlers.Update, cm("c", "m15"), freshness.RV{}, errMalformed) || !z.Event(handlers.Update, cm("d", "m16"), freshness.RV{}, errMalformed) ||
		unplaced != 1 || l.Pending() != 2 {
		t.Fatalf("unplaced events: %d relists asked for, handlers told %d times", unplaced, l.Pending())
	}
	if z.Event(handlers.Delete, cm("c", "m17"), freshness.RV{}, errMalformed) {
		t.Fatal("a malformed deletion taken by the zone")
	}
	z.StreamAt(rv(t, "20")) // the stream reaches the snapshot: a's deletion was skipped
	if l.Pending() != 3 || !z.Stream().IsZero() {
		t.Fatalf("after the zone ended: handlers told %d times, stream %v", l.Pending(), z.Stream())
	}
	if z.Listed(rv(t, "30")); listed != 1 {
		t.Fatalf("the relist's list released %d holds, want 1", listed)
	}
	if z.Listed(rv(t, "31")); listed != 1 {
		t.Fatal("a second list released a hold again")
	}
}

var errMalformed = errors.New("malformed")
