package freshctrl

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/freshinformer/freshinformer/freshness"
)

var configMapGK = corev1.SchemeGroupVersion.WithKind("ConfigMap").GroupKind()

func mustRV(t *testing.T, s string) freshness.RV {
	t.Helper()
	rv, err := freshness.ParseRV(s)
	if err != nil {
		t.Fatal(err)
	}
	return rv
}

// countSettled counts the write log's checks of an entry from now on.
func countSettled(c *freshClient) *int {
	n := new(int)
	inner := c.log.settled
	c.log.settled = func(gk schema.GroupKind, e entry) bool {
		*n++
		return inner(gk, e)
	}
	return n
}

func logSize(c *freshClient, gk schema.GroupKind) int { return c.log.size(gk) }

func fakeLogClock(c *freshClient) *clocktesting.FakeClock {
	clk := clocktesting.NewFakeClock(time.Now())
	c.log.clock = clk
	return clk
}

// TestWriteLogBoundedWhileInformerStuck: writes to many distinct keys
// while the informer never catches up leave at most maxLoggedWrites
// entries (plus one floor), each write does a bounded amount of work, and
// no read is let through early: an evicted write is still waited for.
func TestWriteLogBoundedWhileInformerStuck(t *testing.T) {
	inf := startInformer(t, Scope{Namespace: "a"}, "900")
	c := newTestClient(t, time.Hour, []*testInformer{inf})
	checks := countSettled(c)
	const n = 3 * maxLoggedWrites
	for i := range n {
		before := *checks
		c.recordEntry(configMapGK, entry{key: types.NamespacedName{Namespace: "a", Name: fmt.Sprint("k-", i)}, rv: mustRV(t, fmt.Sprint(1000+i))})
		if i > maxLoggedWrites && *checks-before > 3 {
			t.Fatalf("write %d checked %d entries: inserts must not scan the log", i, *checks-before)
		}
		if size := logSize(c, configMapGK); size > maxLoggedWrites+1 {
			t.Fatalf("after %d writes the log holds %d entries, bound %d", i+1, size, maxLoggedWrites+1)
		}
	}
	// The first write was evicted long ago: a read of it still waits.
	err := c.Get(context.Background(), types.NamespacedName{Namespace: "a", Name: "k-0"}, &corev1.ConfigMap{}, FailIfNotFresh)
	var nf *NotFreshError
	if !errors.As(err, &nf) {
		t.Fatalf("Get of an evicted write: got %v, want a NotFreshError", err)
	}
	if cmp, _ := freshness.Compare(nf.Target, "1000"); cmp < 0 {
		t.Fatalf("Get of an evicted write waits for %s, below the write's 1000", nf.Target)
	}
	// Once the informer is past every write, a read empties the log.
	bm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: fmt.Sprint(1000 + n)}}
	inf.lw.w.Action(watch.Bookmark, bm)
	if err := c.List(waitCtx(t), &corev1.ConfigMapList{}, client.InNamespace("a")); err != nil {
		t.Fatal(err)
	}
	if size := logSize(c, configMapGK); size != 0 {
		t.Errorf("log holds %d entries after the informer caught up", size)
	}
}

// TestWriteLogPrunesByAge: a write the informer has not reached after
// maxWriteAge leaves the keyed log (folded into the floor, which keeps
// reads of it waiting), and reached ones go as new writes come.
func TestWriteLogPrunesByAge(t *testing.T) {
	inf := startInformer(t, Scope{Namespace: "a"}, "900")
	c := newTestClient(t, time.Hour, []*testInformer{inf})
	clk := fakeLogClock(c)
	for i := range 10 {
		c.recordEntry(configMapGK, entry{key: types.NamespacedName{Namespace: "a", Name: fmt.Sprint("old-", i)}, rv: mustRV(t, fmt.Sprint(1000+i))})
	}
	if size := logSize(c, configMapGK); size != 10 {
		t.Fatalf("log holds %d entries, want 10", size)
	}
	clk.Step(maxWriteAge + time.Second)
	c.recordEntry(configMapGK, entry{key: types.NamespacedName{Namespace: "a", Name: "new"}, rv: mustRV(t, "2000")})
	if size := logSize(c, configMapGK); size != 2 { // "new" and the floor
		t.Fatalf("log holds %d entries after the old ones aged out, want 2", size)
	}
	err := c.Get(context.Background(), types.NamespacedName{Namespace: "a", Name: "old-3"}, &corev1.ConfigMap{}, FailIfNotFresh)
	if !errors.Is(err, ErrNotFresh) {
		t.Fatalf("Get of an aged-out write: got %v, want ErrNotFresh", err)
	}
	// Reached entries go as later writes come, without waiting for age.
	bm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "2000"}}
	inf.lw.w.Action(watch.Bookmark, bm)
	eventually(t, "the bookmark", func() bool { return inf.si.Informer.LastObservedResourceVersion() == "2000" })
	for i := range 3 {
		c.recordEntry(configMapGK, entry{key: types.NamespacedName{Namespace: "a", Name: fmt.Sprint("next-", i)}, rv: mustRV(t, fmt.Sprint(3000+i))})
	}
	if size := logSize(c, configMapGK); size > 3 {
		t.Errorf("log holds %d entries: reached ones were not dropped", size)
	}
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
		if _, ok := r.WhenFresh(req, &NotFreshError{informer: inf.si.Informer, Target: target}); !ok {
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
	if queue.Len() != 0 || r.Pending() != 0 {
		t.Fatalf("after the target: queued %d more, pending %d", queue.Len(), r.Pending())
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
		_, ok := r.WhenFresh(req, &NotFreshError{informer: inf.si.Informer, Deleted: true, Key: types.NamespacedName{Namespace: "a", Name: "x"}})
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
	inf := startInformer(t, Scope{Namespace: "a"}, "900")
	clk := newManualClock()
	r := NewRequeuerWithOptions(RequeuerOptions{MaxPark: time.Minute, Clock: clk})
	queue := newRunningRequeuer(t, r)
	const perRound = 200
	for round := range 5 {
		for i := range perRound {
			req := parentReq(round*perRound + i)
			for range 2 { // reconciled twice: still one entry
				if _, ok := r.WhenFresh(req, &NotFreshError{informer: inf.si.Informer, Target: "5000"}); !ok {
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
		if n, q := r.Pending(), queue.Len(); n != 0 || q != perRound {
			t.Fatalf("round %d after MaxPark: %d pending, %d queued; want 0, %d", round, n, q, perRound)
		}
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
