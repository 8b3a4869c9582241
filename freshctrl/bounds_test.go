package freshctrl

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fcache "github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/readyourwrites"
)

// newBoundedClient is newTestClient with readyourwrites' bounds (the
// defaults are 10 000 records and a minute).
func newBoundedClient(t *testing.T, infs []*testInformer, bounds readyourwrites.Options) *freshClient {
	t.Helper()
	reg := &registry{timeout: time.Hour, ctx: context.Background()} // as if started
	for _, i := range infs {
		reg.informers = append(reg.informers, &informerEntry{ScopedInformer: *i.si, name: i.si.Informer.Name()})
	}
	c, err := newFreshClientWithBounds(fake.NewClientBuilder().Build(), &Cache{reg: reg, failOnMissing: true}, client.CacheOptions{}, 0, bounds)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// written records a write of a/name at rv through c, as Update would.
func written(c *freshClient, name, rv string) {
	c.record(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name, ResourceVersion: rv}})
}

// TestWritesBoundedWhileInformerStuck: writes to many distinct keys while
// the informer never catches up keep records for a bounded number of keys
// (readyourwrites' MaxOwners; the heap stays flat), and no read is let
// through early: an evicted write is still waited for.
func TestWritesBoundedWhileInformerStuck(t *testing.T) {
	inf := startInformer(t, Scope{Namespace: "a"}, "900")
	const maxOwners = 64
	c := newBoundedClient(t, []*testInformer{inf}, readyourwrites.Options{MaxOwners: maxOwners})
	const n = 3000
	for i := range 2 * maxOwners { // reach the steady state
		written(c, fmt.Sprint("warm-", i), fmt.Sprint(1000+i))
	}
	before := heapInUse()
	for i := range n {
		written(c, fmt.Sprint("k-", i), fmt.Sprint(2000+i))
	}
	if after := heapInUse(); after > before && after-before > 1<<20 {
		t.Fatalf("%d writes to distinct keys hold %d KiB", n, (after-before)>>10)
	}
	// The first write was evicted long ago: a read of it still waits.
	err := c.Get(context.Background(), types.NamespacedName{Namespace: "a", Name: "k-0"}, &corev1.ConfigMap{}, FailIfNotFresh)
	var nf *readyourwrites.NotFreshError
	if !errors.As(err, &nf) {
		t.Fatalf("Get of an evicted write: got %v, want a NotFreshError", err)
	}
	if cmp, _ := freshness.Compare(nf.Written, "2000"); cmp < 0 {
		t.Fatalf("Get of an evicted write waits for %s, below the write's 2000", nf.Written)
	}
	// Once the informer is past every write, reads return at once.
	bm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: fmt.Sprint(2000 + n)}}
	inf.lw.w.Action(watch.Bookmark, bm)
	if err := c.List(waitCtx(t), &corev1.ConfigMapList{}, client.InNamespace("a")); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "a", Name: "k-0"}, &corev1.ConfigMap{}, FailIfNotFresh); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of k-0 after the informer caught up: %v, want the read's NotFound", err)
	}
}

// TestWritesEvictedWhenIdle: a write the informer has not reached after
// OwnerIdleTimeout leaves its key's record (folded, per kind, into what
// every read of the kind waits for), and reads of it keep waiting until
// the informer reaches it.
func TestWritesEvictedWhenIdle(t *testing.T) {
	inf := startInformer(t, Scope{Namespace: "a"}, "900")
	clk := clocktesting.NewFakePassiveClock(time.Now())
	c := newBoundedClient(t, []*testInformer{inf}, readyourwrites.Options{OwnerIdleTimeout: time.Minute, Clock: clk})
	for i := range 10 {
		written(c, fmt.Sprint("old-", i), fmt.Sprint(1000+i))
	}
	clk.SetTime(clk.Now().Add(time.Minute + time.Second))
	written(c, "new", "2000")
	var nf *readyourwrites.NotFreshError
	err := c.Get(context.Background(), types.NamespacedName{Namespace: "a", Name: "old-3"}, &corev1.ConfigMap{}, FailIfNotFresh)
	if !errors.As(err, &nf) {
		t.Fatalf("Get of an evicted write: got %v, want a NotFreshError", err)
	}
	if cmp, _ := freshness.Compare(nf.Written, "1003"); cmp < 0 {
		t.Fatalf("Get of an evicted write waits for %s, below the write's 1003", nf.Written)
	}
	bm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "2000"}}
	inf.lw.w.Action(watch.Bookmark, bm)
	eventually(t, "the bookmark", func() bool { return inf.si.Informer.LastObservedResourceVersion() == "2000" })
	for _, name := range []string{"old-3", "new", "never-written"} {
		err := c.Get(context.Background(), types.NamespacedName{Namespace: "a", Name: name}, &corev1.ConfigMap{}, FailIfNotFresh)
		if errors.Is(err, freshness.ErrNotFresh) {
			t.Fatalf("Get of %s once the informer is past every write: %v", name, err)
		}
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func newRunningRequeuer(t *testing.T, r *Requeuer) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	t.Helper()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.Start(ctx, queue); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); r.wg.Wait(); queue.ShutDown() })
	return queue
}

func parentReq(i int) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "a", Name: fmt.Sprint("parent-", i)}}
}

// TestRequeuerOnePendingPerRequest: a request reconciled again and again
// while the cache is behind holds one pending entry, for the highest
// target, and is queued once.
func TestRequeuerOnePendingPerRequest(t *testing.T) {
	inf := startInformer(t, Scope{Namespace: "a"}, "900")
	r := NewRequeuer()
	queue := newRunningRequeuer(t, r)
	req := parentReq(0)
	for i := range 100 {
		target := fmt.Sprint(1000 + 10*(i%50)) // up to 1490, twice over
		if _, ok := r.WhenFresh(req, &readyourwrites.NotFreshError{Informer: inf.si.Informer, Written: target}); !ok {
			t.Fatal("WhenFresh refused")
		}
		if n := r.Pending(); n != 1 {
			t.Fatalf("after %d calls for one request, %d pending", i+1, n)
		}
	}
	bm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1480"}}
	inf.lw.w.Action(watch.Bookmark, bm)
	eventually(t, "the bookmark", func() bool { return inf.si.Informer.LastObservedResourceVersion() == "1480" })
	if queue.Len() != 0 || r.Pending() != 1 {
		t.Fatalf("queued %d, pending %d below the highest target", queue.Len(), r.Pending())
	}
	bm.ResourceVersion = "1490"
	inf.lw.w.Action(watch.Bookmark, bm)
	if got, _ := queue.Get(); got != req {
		t.Fatalf("queued %v", got)
	}
	queue.Done(req)
	// Pending counts the request until its queue Add has returned.
	eventually(t, "nothing pending after the target", func() bool { return r.Pending() == 0 })
	if queue.Len() != 0 {
		t.Fatalf("after the target: queued %d more", queue.Len())
	}
}

// TestRequeuerProbeIsBounded: WhenFresh for a delete asks the server for
// its resource version on the reconcile goroutine; a server that does not
// answer holds it for ProbeTimeout at most, then the request is re-queued
// through the rate limiter.
func TestRequeuerProbeIsBounded(t *testing.T) {
	inf := startInformer(t, Scope{Namespace: "a"}, "900")
	inf.lw.blockLists()
	r := NewRequeuerWithOptions(RequeuerOptions{ProbeTimeout: 100 * time.Millisecond})
	queue := newRunningRequeuer(t, r)
	req := parentReq(0)
	done := make(chan bool, 1)
	go func() {
		_, ok := r.WhenFresh(req, &readyourwrites.NotFreshError{Informer: inf.si.Informer, Deleted: true, Key: types.NamespacedName{Namespace: "a", Name: "x"}})
		done <- ok
	}()
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("WhenFresh refused")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("WhenFresh still probing an unresponsive server")
	}
	if got, _ := queue.Get(); got != req {
		t.Fatalf("queued %v", got)
	}
	queue.Done(req)
}

// TestRequeuerParksForMaxParkAtMost: requests whose target never comes
// are re-queued once MaxPark has passed and leave nothing behind: rounds
// of many distinct requests keep the pending count at one round's.
func TestRequeuerParksForMaxParkAtMost(t *testing.T) {
	// The scripted server stays at 900, so a freshness probe would rightly
	// fail the parked waits for 5000 as too large (queueing them before
	// MaxPark) whenever a round takes longer than the probe delay, as on a
	// loaded machine: this test is about MaxPark alone, so nothing probes.
	inf := startInformerWith(t, Scope{Namespace: "a"}, "900", []fcache.Option{fcache.WithQuietProbeDelay(-1)})
	clk := newManualClock()
	r := NewRequeuerWithOptions(RequeuerOptions{MaxPark: time.Minute, Clock: clk})
	queue := newRunningRequeuer(t, r)
	const perRound = 200
	for round := range 5 {
		for i := range perRound {
			req := parentReq(round*perRound + i)
			for range 2 { // reconciled twice: still one entry
				if _, ok := r.WhenFresh(req, &readyourwrites.NotFreshError{Informer: inf.si.Informer, Written: "5000"}); !ok {
					t.Fatal("WhenFresh refused")
				}
			}
		}
		if n := r.Pending(); n != perRound {
			t.Fatalf("round %d: %d pending, want %d", round, n, perRound)
		}
		clk.Step(30 * time.Second)
		if queue.Len() != 0 {
			t.Fatalf("round %d: %d queued before MaxPark", round, queue.Len())
		}
		clk.Step(31 * time.Second)
		eventually(t, "every request queued after MaxPark", func() bool { return r.Pending() == 0 && queue.Len() == perRound })
		for range perRound {
			req, _ := queue.Get()
			queue.Done(req)
		}
		if n := clk.live(); n != 0 {
			t.Fatalf("round %d: %d timers live with nothing pending", round, n)
		}
	}
	// The expired requests' callbacks were called off: the cache reaching
	// the target queues nothing.
	bm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "5000"}}
	inf.lw.w.Action(watch.Bookmark, bm)
	eventually(t, "the bookmark", func() bool { return inf.si.Informer.LastObservedResourceVersion() == "5000" })
	if n := queue.Len(); n != 0 {
		t.Fatalf("%d requests queued again after their MaxPark", n)
	}
}

// manualClock is a fake clock whose AfterFunc callbacks run on Step,
// outside its lock (clocktesting.FakeClock runs them under it, and a
// callback that reads the clock would deadlock). The Requeuer uses Now,
// Since and AfterFunc only; the embedded FakeClock fills in the rest.
type manualClock struct {
	*clocktesting.FakeClock
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
}

type manualTimer struct {
	c      *manualClock
	at     time.Time
	f      func()
	active bool
}

func newManualClock() *manualClock {
	start := time.Unix(1_700_000_000, 0)
	return &manualClock{FakeClock: clocktesting.NewFakeClock(start), now: start}
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
	tm := &manualTimer{c: c, at: c.now.Add(d), f: f, active: true}
	c.timers = append(c.timers, tm)
	return tm
}

// live counts timers neither fired nor stopped.
func (c *manualClock) live() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, tm := range c.timers {
		if tm.active {
			n++
		}
	}
	return n
}

// Step moves the clock and runs the callbacks that became due, in order.
func (c *manualClock) Step(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	kept := c.timers[:0]
	for _, tm := range c.timers {
		switch {
		case tm.active && !tm.at.After(c.now):
			tm.active = false
			due = append(due, tm.f)
		case tm.active:
			kept = append(kept, tm)
		}
	}
	c.timers = kept
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

func (t *manualTimer) C() <-chan time.Time { return nil }

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.active = false
	return was
}

func (t *manualTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.at, t.active = t.c.now.Add(d), true
	if !was {
		t.c.timers = append(t.c.timers, t)
	}
	return was
}
