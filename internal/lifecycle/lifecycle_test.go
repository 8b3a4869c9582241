package lifecycle

import (
	"sync"
	"testing"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/freshinformer/freshinformer/internal/handlers"
)

// lockCounter is an apply lock that counts its holds.
type lockCounter struct {
	sync.Mutex
	holds int
}

func (l *lockCounter) Lock() { l.Mutex.Lock(); l.holds++ }

// Settings are taken before Run only, Run begins once, a stopped informer
// adds no handler, and synced is told once the initial list is applied.
func TestRunState(t *testing.T) {
	s := New(0)
	if err := s.SetTransform(func(o any) (any, error) { return o, nil }); err != nil {
		t.Fatal(err)
	}
	var gotTransform toolscache.TransformFunc
	built := s.Begin(func(tf toolscache.TransformFunc, _ toolscache.WatchErrorHandlerWithContext) toolscache.Controller {
		gotTransform = tf
		return nil
	})
	if built != nil || gotTransform == nil {
		t.Fatalf("Begin built %v with transform %v", built, gotTransform)
	}
	if s.Begin(func(toolscache.TransformFunc, toolscache.WatchErrorHandlerWithContext) toolscache.Controller {
		t.Fatal("built twice")
		return nil
	}) != nil {
		t.Fatal("a second Begin returned a controller")
	}
	if err := s.SetTransform(nil); err == nil {
		t.Fatal("a transform set after Run began")
	}
	if s.HasSynced() || s.LastSyncResourceVersion() != "" {
		t.Fatal("synced, or a resource version, before any list")
	}
	s.MarkSynced()
	select {
	case <-s.SyncedChecker("x").Done():
	default:
		t.Fatal("the checker is not done once synced")
	}
	s.Stop()
	p := &handlers.Processor{Clock: testingclock.NewFakeClock(time.Now())}
	if _, err := s.AddHandler(p, toolscache.ResourceEventHandlerFuncs{}, toolscache.HandlerOptions{}, &lockCounter{}, nil); err == nil || !s.Stopped() {
		t.Fatal("a handler added to a stopped informer")
	}
}

// A handler added before Run lowers the resync check period to its own and
// joins without the apply lock; one added while the informer runs joins
// under it, with the cached objects as its initial list.
func TestAddHandler(t *testing.T) {
	s := New(time.Hour)
	p := &handlers.Processor{Clock: testingclock.NewFakeClock(time.Now())}
	applyMu := &lockCounter{}
	cached := func() []any { return []any{"a", "b"} }
	resync := time.Minute
	if _, err := s.AddHandler(p, toolscache.ResourceEventHandlerFuncs{}, toolscache.HandlerOptions{ResyncPeriod: &resync}, applyMu, cached); err != nil {
		t.Fatal(err)
	}
	if s.ResyncCheckPeriod() != time.Minute || s.DefaultResync() != time.Hour || applyMu.holds != 0 {
		t.Fatalf("before Run: check period %v, default %v, apply lock held %d times", s.ResyncCheckPeriod(), s.DefaultResync(), applyMu.holds)
	}
	s.Begin(func(toolscache.TransformFunc, toolscache.WatchErrorHandlerWithContext) toolscache.Controller {
		return nil
	})
	l, err := s.AddHandler(p, toolscache.ResourceEventHandlerFuncs{}, toolscache.HandlerOptions{}, applyMu, cached)
	if err != nil {
		t.Fatal(err)
	}
	if applyMu.holds != 1 || l.Pending() != 2 || len(p.Listeners()) != 2 {
		t.Fatalf("while running: apply lock held %d times, %d initial notifications, %d listeners", applyMu.holds, l.Pending(), len(p.Listeners()))
	}
}
