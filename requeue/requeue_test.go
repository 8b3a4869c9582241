package requeue

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/readyourwrites"
)

// fakeFreshness lets a test say when an owner's writes become visible.
type fakeFreshness struct {
	mu      sync.Mutex
	fresh   map[readyourwrites.Owner]error // owners whose state is known: nil fresh, else the error
	waiting map[readyourwrites.Owner][]*notice
}

type notice struct {
	f func(error)
}

func newFakeFreshness() *fakeFreshness {
	return &fakeFreshness{fresh: map[readyourwrites.Owner]error{}, waiting: map[readyourwrites.Owner][]*notice{}}
}

func (ff *fakeFreshness) WhenFresh(owner readyourwrites.Owner, f func(error)) func() bool {
	ff.mu.Lock()
	if err, ok := ff.fresh[owner]; ok {
		ff.mu.Unlock()
		f(err)
		return func() bool { return false }
	}
	n := &notice{f: f}
	ff.waiting[owner] = append(ff.waiting[owner], n)
	ff.mu.Unlock()
	return func() bool {
		ff.mu.Lock()
		defer ff.mu.Unlock()
		for i, m := range ff.waiting[owner] {
			if m == n {
				ff.waiting[owner] = append(ff.waiting[owner][:i], ff.waiting[owner][i+1:]...)
				return true
			}
		}
		return false
	}
}

// set makes owner's state known (nil: fresh) and releases its notices.
func (ff *fakeFreshness) set(owner readyourwrites.Owner, err error) {
	ff.mu.Lock()
	ff.fresh[owner] = err
	ns := ff.waiting[owner]
	delete(ff.waiting, owner)
	ff.mu.Unlock()
	for _, n := range ns {
		n.f(err)
	}
}

// unset makes owner not fresh again (a new write).
func (ff *fakeFreshness) unset(owner readyourwrites.Owner) {
	ff.mu.Lock()
	delete(ff.fresh, owner)
	ff.mu.Unlock()
}

func (ff *fakeFreshness) registered() int {
	ff.mu.Lock()
	defer ff.mu.Unlock()
	n := 0
	for _, ns := range ff.waiting {
		n += len(ns)
	}
	return n
}

// manualClock runs AfterFunc callbacks on Step, outside its lock.
type manualClock struct {
	*testingclock.FakeClock
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
}

type manualTimer struct {
	c       *manualClock
	due     time.Time
	f       func()
	stopped bool
}

func (t *manualTimer) C() <-chan time.Time { return nil }
func (t *manualTimer) Reset(time.Duration) bool {
	panic("not used")
}
func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

func newManualClock() *manualClock {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return &manualClock{FakeClock: testingclock.NewFakeClock(start), now: start}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}
func (c *manualClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c *manualClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{c: c, due: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

// live returns how many timers are armed.
func (c *manualClock) live() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.stopped {
			n++
		}
	}
	return n
}

func (c *manualClock) Step(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	var keep []*manualTimer
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.due.After(c.now):
			t.stopped = true
			due = append(due, t.f)
		default:
			keep = append(keep, t)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

// recordingMetrics is a Metrics for tests.
type recordingMetrics struct {
	mu       sync.Mutex
	parked   int
	outcomes map[Outcome][]time.Duration
}

func (m *recordingMetrics) SetParked(n int) { m.mu.Lock(); m.parked = n; m.mu.Unlock() }
func (m *recordingMetrics) ObserveRequeue(o Outcome, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.outcomes == nil {
		m.outcomes = map[Outcome][]time.Duration{}
	}
	m.outcomes[o] = append(m.outcomes[o], d)
}
func (m *recordingMetrics) snapshot() (int, map[Outcome]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	counts := map[Outcome]int{}
	for o, ds := range m.outcomes {
		counts[o] = len(ds)
	}
	return m.parked, counts
}

type key = types.NamespacedName

func newQueue(t *testing.T) workqueue.TypedRateLimitingInterface[key] {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[key](time.Millisecond, time.Millisecond))
	t.Cleanup(q.ShutDown)
	return q
}

// expectQueued waits until the queue holds want keys (a rate-limited add
// arrives after its delay).
func expectQueued(t *testing.T, q workqueue.TypedRateLimitingInterface[key], want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for q.Len() != want {
		if time.Now().After(deadline) {
			t.Fatalf("queue holds %d keys, want %d", q.Len(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func ownerN(i int) readyourwrites.Owner {
	return readyourwrites.Owner{NamespacedName: types.NamespacedName{Namespace: "ns", Name: fmt.Sprint("p", i)}, UID: "u"}
}

func TestParkUntilFreshFreshAtOnce(t *testing.T) {
	ff := newFakeFreshness()
	q := newQueue(t)
	rq := New(q, ff)
	o := ownerN(1)
	ff.set(o, nil)
	parked, err := rq.ParkUntilFresh(o.NamespacedName, o)
	if parked || err != nil {
		t.Fatalf("fresh owner: parked=%v err=%v", parked, err)
	}
	if rq.Parked() != 0 || q.Len() != 0 {
		t.Fatalf("parked %d, queued %d", rq.Parked(), q.Len())
	}
}

func TestParkUntilFreshAddsBackWhenFresh(t *testing.T) {
	ff := newFakeFreshness()
	q := newQueue(t)
	clk := newManualClock()
	m := &recordingMetrics{}
	rq := New(q, ff, WithClock(clk), WithMetrics(m), WithMaxPark(time.Minute))
	o := ownerN(1)
	parked, err := rq.ParkUntilFresh(o.NamespacedName, o)
	if !parked || err != nil {
		t.Fatalf("not fresh: parked=%v err=%v", parked, err)
	}
	if p, _ := m.snapshot(); p != 1 || !rq.IsParked(o.NamespacedName) || q.Len() != 0 {
		t.Fatalf("parked gauge %d, IsParked %v, queued %d", p, rq.IsParked(o.NamespacedName), q.Len())
	}
	if clk.live() != 1 {
		t.Fatalf("%d timers armed, want one", clk.live())
	}
	clk.Step(250 * time.Millisecond)
	ff.set(o, nil)
	expectQueued(t, q, 1)
	if got, _ := q.Get(); got != o.NamespacedName {
		t.Fatalf("queued %v", got)
	}
	p, counts := m.snapshot()
	if p != 0 || counts[OutcomeFresh] != 1 || rq.Parked() != 0 {
		t.Fatalf("after fresh: gauge %d, outcomes %v, parked %d", p, counts, rq.Parked())
	}
	if d := m.outcomes[OutcomeFresh][0]; d != 250*time.Millisecond {
		t.Errorf("requeue-when-fresh latency %v, want 250ms", d)
	}
	if clk.live() != 0 {
		t.Errorf("%d timers left armed with nothing parked", clk.live())
	}
}

func TestParkUntilFreshBound(t *testing.T) {
	ff := newFakeFreshness()
	q := newQueue(t)
	clk := newManualClock()
	m := &recordingMetrics{}
	rq := New(q, ff, WithClock(clk), WithMetrics(m), WithMaxPark(time.Second))
	for i := range 3 {
		o := ownerN(i)
		if parked, err := rq.ParkUntilFresh(o.NamespacedName, o); !parked || err != nil {
			t.Fatal(parked, err)
		}
		clk.Step(300 * time.Millisecond) // deadlines at 1s, 1.3s, 1.6s
	}
	if clk.live() != 1 {
		t.Fatalf("%d timers for 3 parked keys, want one", clk.live())
	}
	clk.Step(400 * time.Millisecond) // t=1.3s: the first two are due
	expectQueued(t, q, 2)
	if rq.Parked() != 1 || ff.registered() != 1 {
		t.Fatalf("parked %d, notices left %d; want 1 and 1", rq.Parked(), ff.registered())
	}
	_, counts := m.snapshot()
	if counts[OutcomeMaxPark] != 2 {
		t.Fatalf("outcomes %v, want 2 max_park", counts)
	}
	// The first key, re-parked by its next reconcile, keeps its deadline:
	// the caller's bound is on the whole wait.
	o0 := ownerN(0)
	if parked, _ := rq.ParkUntilFresh(o0.NamespacedName, o0); !parked {
		t.Fatal("not parked again")
	}
	ff.set(ownerN(2), nil)
	expectQueued(t, q, 3)
	if rq.Parked() != 1 || ff.registered() != 1 || clk.live() != 1 {
		t.Fatalf("parked %d, notices %d, timers %d", rq.Parked(), ff.registered(), clk.live())
	}
	rq.ShutDown()
	if rq.Parked() != 0 || ff.registered() != 0 || clk.live() != 0 {
		t.Fatalf("after ShutDown: parked %d, notices %d, timers %d", rq.Parked(), ff.registered(), clk.live())
	}
	if _, err := rq.ParkUntilFresh(o0.NamespacedName, o0); !errors.Is(err, ErrShutDown) {
		t.Fatalf("after ShutDown: %v", err)
	}
	_, counts = m.snapshot()
	if counts[OutcomeShutDown] != 1 {
		t.Fatalf("outcomes %v, want 1 shutdown", counts)
	}
}

func TestParkUntilFreshParkedAgainKeepsOneNotice(t *testing.T) {
	ff := newFakeFreshness()
	q := newQueue(t)
	rq := New(q, ff)
	o := ownerN(1)
	for range 3 { // informer events bring the key back while it is parked
		if parked, err := rq.ParkUntilFresh(o.NamespacedName, o); !parked || err != nil {
			t.Fatal(parked, err)
		}
	}
	if ff.registered() != 1 || rq.Parked() != 1 {
		t.Fatalf("notices %d, parked %d; want 1 and 1", ff.registered(), rq.Parked())
	}
	ff.set(o, nil)
	expectQueued(t, q, 1)
	rq.ShutDown()
}

// TestParkUntilFreshInformerStops: an informer stopping with keys parked
// adds them back rate limited, and their next reconcile gets the error.
func TestParkUntilFreshInformerStops(t *testing.T) {
	ff := newFakeFreshness()
	q := newQueue(t)
	m := &recordingMetrics{}
	rq := New(q, ff, WithMetrics(m))
	const n = 20
	for i := range n {
		o := ownerN(i)
		if parked, err := rq.ParkUntilFresh(o.NamespacedName, o); !parked || err != nil {
			t.Fatal(parked, err)
		}
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { ff.set(ownerN(i), freshness.ErrStopped) })
	}
	wg.Wait()
	expectQueued(t, q, n)
	if p, counts := m.snapshot(); p != 0 || counts[OutcomeFailed] != n {
		t.Fatalf("gauge %d, outcomes %v", p, counts)
	}
	o := ownerN(0)
	if parked, err := rq.ParkUntilFresh(o.NamespacedName, o); parked || !errors.Is(err, freshness.ErrStopped) {
		t.Fatalf("next reconcile: parked=%v err=%v, want the stop error", parked, err)
	}
	if rq.Parked() != 0 {
		t.Fatal("a key was parked on a stopped informer")
	}
}

// TestParkUntilFreshConcurrent races parking, fresh notices, the bound and
// new writes; every parked key comes back exactly once per parking.
func TestParkUntilFreshConcurrent(t *testing.T) {
	ff := newFakeFreshness()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[key](time.Millisecond, time.Millisecond))
	defer q.ShutDown()
	rq := New(q, ff, WithMaxPark(5*time.Millisecond))
	defer rq.ShutDown()
	const owners, rounds = 8, 200
	var wg sync.WaitGroup
	for i := range owners {
		o := ownerN(i)
		q.Add(o.NamespacedName)
		wg.Go(func() {
			for r := range rounds {
				if r%3 == 0 {
					ff.set(o, nil)
				} else {
					ff.unset(o)
				}
				time.Sleep(50 * time.Microsecond)
			}
			ff.set(o, nil)
		})
	}
	done := make(chan struct{})
	var reconciled sync.Map
	go func() {
		defer close(done)
		for {
			k, shutdown := q.Get()
			if shutdown {
				return
			}
			o := readyourwrites.Owner{NamespacedName: k, UID: "u"}
			if parked, err := rq.ParkUntilFresh(k, o); !parked && err == nil {
				reconciled.Store(k, true)
			}
			q.Done(k)
		}
	}()
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := 0
		reconciled.Range(func(any, any) bool { n++; return true })
		if n == owners {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d owners reconciled", n, owners)
		}
		time.Sleep(time.Millisecond)
	}
	q.ShutDown()
	<-done
}
