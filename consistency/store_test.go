package consistency_test

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
	"k8s.io/client-go/kubernetes/fake"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/consistency"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/freshtest"
)

var (
	podsGR = schema.GroupResource{Resource: "pods"}
	owner  = types.NamespacedName{Namespace: "ns", Name: "rs"}
)

// env is a fake clientset that stamps resource versions, a Lag in front
// of its watches, and our factory's pod informer, started and synced.
type env struct {
	client *fake.Clientset
	lag    *freshtest.Lag
	pods   *cache.FreshInformer
	f      *cache.SharedInformerFactory
}

func newEnv(t *testing.T) *env {
	t.Helper()
	client := freshtest.NewClientset()
	lag := freshtest.NewLag()
	lag.Fake(&client.Fake)
	f := cache.NewSharedInformerFactory(client, 0)
	f.Core().V1().Pods().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	t.Cleanup(func() { lag.Release(); cancel(); f.Shutdown() })
	f.WaitForCacheSync(ctx.Done())
	return &env{client: client, lag: lag, pods: f.FreshInformersForResource(podsGR)[0], f: f}
}

// createPod creates a pod and returns its resource version.
func (e *env) createPod(t *testing.T, name string) string {
	t.Helper()
	p, err := e.client.CoreV1().Pods("ns").Create(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.ResourceVersion
}

// recorder is a consistency.Metrics that counts.
type recorder struct {
	mu       sync.Mutex
	outcomes map[consistency.Outcome]int
	skips    map[schema.GroupResource]int
	fresh    []time.Duration
}

func newRecorder() *recorder {
	return &recorder{outcomes: map[consistency.Outcome]int{}, skips: map[schema.GroupResource]int{}}
}

func (r *recorder) ObserveEnsureReady(o consistency.Outcome, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes[o]++
}

func (r *recorder) ObserveSkip(gr schema.GroupResource) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.skips[gr]++
}

func (r *recorder) ObserveFreshAfterSkip(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fresh = append(r.fresh, d)
}

func (r *recorder) count(o consistency.Outcome) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.outcomes[o]
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestOwnerWithNothingRecordedIsReady(t *testing.T) {
	e := newEnv(t)
	m := newRecorder()
	s := consistency.NewStore(e.f, consistency.WithMetrics(m))
	if err := s.EnsureReady(owner); err != nil {
		t.Fatal(err)
	}
	if m.count(consistency.OutcomeReady) != 1 {
		t.Errorf("outcomes %v, want one ready", m.outcomes)
	}
}

// The usual case: the cache a few milliseconds behind a write. EnsureReady
// holds the sync until the informer applies the write, and proceeds then:
// no skipped sync, no requeue.
func TestEnsureReadyWaitsForACacheShortlyBehind(t *testing.T) {
	e := newEnv(t)
	m := newRecorder()
	s := consistency.NewStore(e.f, consistency.WithMetrics(m), consistency.WithMaxWait(5*time.Second))
	e.lag.Hold()
	rv := e.createPod(t, "p1")
	s.WroteAt(owner, "uid1", podsGR, rv)
	go func() { // release the event once EnsureReady waits for it
		for i := 0; e.pods.Stats().PendingWaiters == 0 && i < 10000; i++ {
			time.Sleep(time.Millisecond)
		}
		e.lag.Release()
	}()
	start := time.Now()
	if err := s.EnsureReady(owner); err != nil {
		t.Fatalf("EnsureReady = %v, want nil once the cache holds the write", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("EnsureReady took %v for a cache released as soon as it waited", d)
	}
	if _, ok, _ := e.pods.GetIndexer().GetByKey("ns/p1"); !ok {
		t.Error("EnsureReady returned nil before the cache held the written pod")
	}
	if m.count(consistency.OutcomeWaited) != 1 || m.count(consistency.OutcomeSkipped) != 0 {
		t.Errorf("outcomes %v, want one waited", m.outcomes)
	}
}

// A cache still behind after the wait: EnsureReady skips with an error
// that carries upstream's fields and names the informer; it matches
// freshness.ErrNotFresh and fills in a struct shaped as upstream's
// ConsistencyError (kube-controller-manager's skip metric counts it).
func TestSkipErrorCarriesUpstreamFieldsAndTheInformer(t *testing.T) {
	e := newEnv(t)
	m := newRecorder()
	s := consistency.NewStore(e.f, consistency.WithMetrics(m), consistency.WithMaxWait(20*time.Millisecond))
	e.lag.Hold()
	rv := e.createPod(t, "p1")
	s.WroteAt(owner, "uid1", podsGR, rv)
	err := s.EnsureReady(owner)
	var ce *consistency.ConsistencyError
	if !errors.As(err, &ce) {
		t.Fatalf("EnsureReady = %v, want a *ConsistencyError", err)
	}
	if ce.WroteRV != rv || ce.ReadRV == "" || ce.ReadRV == rv || ce.GroupResource != podsGR || ce.Owner != owner || ce.Waited < 20*time.Millisecond {
		t.Errorf("error %+v: want wrote %s, read below it, pods, owner %s, waited 20ms", ce, rv, owner)
	}
	if !errors.Is(err, freshness.ErrNotFresh) {
		t.Errorf("%v does not match freshness.ErrNotFresh", err)
	}
	var up *ConsistencyError // upstream's shape, another package's type
	if !errors.As(err, &up) || up.WroteRV != rv || up.ReadRV != ce.ReadRV || up.GroupResource != podsGR {
		t.Errorf("errors.As into upstream's shape: %+v", up)
	}
	var other *otherError
	if errors.As(err, &other) {
		t.Error("errors.As filled in a type that is not upstream's ConsistencyError")
	}
	wrapped := fmt.Errorf("sync: %w", err)
	if !errors.As(wrapped, &up) {
		t.Error("errors.As through a wrap")
	}
	if m.count(consistency.OutcomeSkipped) != 1 || m.skips[podsGR] != 1 {
		t.Errorf("outcomes %v skips %v, want one skip of pods", m.outcomes, m.skips)
	}
	e.lag.Release()
}

// Without WithMaxWait, EnsureReady waits DefaultMaxWait for a cache behind,
// and no longer: then it skips, so that a lagging informer holds none of
// the controller's workers for long.
func TestEnsureReadyWaitsDefaultMaxWaitThenSkips(t *testing.T) {
	e := newEnv(t)
	s := consistency.NewStore(e.f)
	e.lag.Hold()
	s.WroteAt(owner, "uid1", podsGR, e.createPod(t, "p1"))
	start := time.Now()
	err := s.EnsureReady(owner)
	took := time.Since(start)
	var ce *consistency.ConsistencyError
	if !errors.As(err, &ce) {
		t.Fatalf("EnsureReady = %v, want a *ConsistencyError", err)
	}
	if ce.Waited < consistency.DefaultMaxWait || took > consistency.DefaultMaxWait+time.Second {
		t.Errorf("waited %v (returned after %v), want DefaultMaxWait (%v)", ce.Waited, took, consistency.DefaultMaxWait)
	}
	e.lag.Release()
}

// ConsistencyError has upstream's shape, as k8s.io/kubernetes declares it.
type ConsistencyError struct {
	ReadRV        string
	WroteRV       string
	GroupResource schema.GroupResource
}

func (c *ConsistencyError) Error() string { return "upstream" }

// otherError has the fields but another name.
type otherError struct {
	ReadRV        string
	WroteRV       string
	GroupResource schema.GroupResource
}

func (c *otherError) Error() string { return "other" }

// A skipped owner is handed to WithOnFresh the moment its cache holds the
// write, not after a backoff, and its next EnsureReady proceeds at once.
func TestSkippedOwnerIsHandedBackWhenTheCacheCatchesUp(t *testing.T) {
	e := newEnv(t)
	m := newRecorder()
	woke := make(chan types.NamespacedName, 4)
	s := consistency.NewStore(e.f, consistency.WithMetrics(m), consistency.WithMaxWait(time.Millisecond),
		consistency.WithOnFresh(func(o types.NamespacedName) { woke <- o }))
	e.lag.Hold()
	rv := e.createPod(t, "p1")
	s.WroteAt(owner, "uid1", podsGR, rv)
	if err := s.EnsureReady(owner); err == nil {
		t.Fatal("EnsureReady = nil with the write held back")
	}
	if err := s.EnsureReady(owner); err == nil { // a second skip keeps one callback
		t.Fatal("EnsureReady = nil with the write held back")
	}
	select {
	case o := <-woke:
		t.Fatalf("woke %v before the cache caught up", o)
	case <-time.After(50 * time.Millisecond):
	}
	released := time.Now()
	e.lag.Release()
	select {
	case o := <-woke:
		if o != owner {
			t.Fatalf("woke %v, want %v", o, owner)
		}
		if d := time.Since(released); d > time.Second {
			t.Errorf("woken %v after the release", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not woken after the cache caught up")
	}
	if err := s.EnsureReady(owner); err != nil {
		t.Fatalf("EnsureReady after the wake-up = %v", err)
	}
	select {
	case o := <-woke:
		t.Fatalf("woken twice: %v", o)
	case <-time.After(20 * time.Millisecond):
	}
	if m.count(consistency.OutcomeSkipped) != 2 || len(m.fresh) != 1 {
		t.Errorf("outcomes %v, fresh after skip %v", m.outcomes, m.fresh)
	}
}

// Clear follows upstream: a matching UID or an empty one wipes the
// owner's records; another UID does not. A write for a recreated owner
// (new UID) does not wait for its predecessor's.
func TestClearAndRecreatedOwnersFollowUpstream(t *testing.T) {
	e := newEnv(t)
	s := consistency.NewStore(e.f, consistency.WithMaxWait(0))
	e.lag.Hold()
	rv := e.createPod(t, "p1")
	s.WroteAt(owner, "uid1", podsGR, rv)
	s.Clear(owner, "uid2")
	if err := s.EnsureReady(owner); err == nil {
		t.Fatal("Clear with another UID wiped the owner's records")
	}
	s.Clear(owner, "uid1")
	if err := s.EnsureReady(owner); err != nil {
		t.Fatalf("after Clear with its UID: %v", err)
	}
	s.WroteAt(owner, "uid1", podsGR, rv)
	s.Clear(owner, "")
	if err := s.EnsureReady(owner); err != nil {
		t.Fatalf("after Clear with no UID: %v", err)
	}
	s.WroteAt(owner, "uid1", podsGR, rv)
	s.WroteAt(owner, "uid2", podsGR, e.pods.LastObservedResourceVersion()) // recreated: its own write is in the cache
	if err := s.EnsureReady(owner); err != nil {
		t.Fatalf("a recreated owner waits for its predecessor's write: %v", err)
	}
}

// Like upstream's store, a write no informer caches, or with a malformed
// resource version, does not block the owner.
func TestUnknownResourceAndMalformedVersionFailOpen(t *testing.T) {
	e := newEnv(t)
	s := consistency.NewStore(e.f, consistency.WithMaxWait(0))
	s.WroteAt(owner, "uid1", schema.GroupResource{Group: "apps", Resource: "replicasets"}, "999999")
	s.WroteAt(owner, "uid1", podsGR, "not-a-version")
	if err := s.EnsureReady(owner); err != nil {
		t.Fatal(err)
	}
}

// After an etcd restore, a write the restore lost is beyond the server for
// good (until new writes happen to pass it). Upstream's store skips the
// owner until then, retry after retry; ours, once the owner has been
// skipped for the lost-write check's delay, asks the server, sees the
// write beyond it, and drops the owner's records: logged, counted as lost,
// and the owner's next sync proceeds.
func TestWriteLostByARestoreDoesNotBlockTheOwner(t *testing.T) {
	e := newEnv(t)
	m := newRecorder()
	s := consistency.NewStore(e.f, consistency.WithMetrics(m), consistency.WithMaxWait(time.Millisecond),
		consistency.WithLostWriteCheck(100*time.Millisecond))
	e.createPod(t, "p1")
	eventually(t, "the pod in the cache", func() bool { _, ok, _ := e.pods.GetIndexer().GetByKey("ns/p1"); return ok })
	s.WroteAt(owner, "uid1", podsGR, "987654321") // what the server answered before it was restored
	start := time.Now()
	retries := 0
	for backoff := 5 * time.Millisecond; s.EnsureReady(owner) != nil; backoff *= 2 { // a rate-limited queue's retries
		retries++
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the owner is still skipped after %v (%d retries)", time.Since(start), retries)
		}
		time.Sleep(backoff)
	}
	if retries == 0 {
		t.Error("EnsureReady = nil at once for a write the cache does not hold")
	}
	if m.count(consistency.OutcomeLost) != 1 {
		t.Errorf("outcomes %v, want one lost", m.outcomes)
	}
	if err := s.EnsureReady(owner); err != nil {
		t.Fatalf("EnsureReady again = %v", err)
	}
}

// The lost-write check never drops a write the server has: a cache held
// behind for longer than the check's delay stays skipped until it catches
// up.
func TestLostWriteCheckKeepsWritesTheServerHas(t *testing.T) {
	e := newEnv(t)
	m := newRecorder()
	s := consistency.NewStore(e.f, consistency.WithMetrics(m), consistency.WithMaxWait(time.Millisecond),
		consistency.WithLostWriteCheck(time.Millisecond))
	e.lag.Hold()
	rv := e.createPod(t, "p1")
	s.WroteAt(owner, "uid1", podsGR, rv)
	for range 5 {
		if err := s.EnsureReady(owner); err == nil {
			t.Fatal("EnsureReady = nil with the write held back")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if m.count(consistency.OutcomeLost) != 0 {
		t.Fatalf("outcomes %v: a write the server has was dropped", m.outcomes)
	}
	e.lag.Release()
	eventually(t, "the owner ready", func() bool { return s.EnsureReady(owner) == nil })
}

// Many owners written and checked at once, the cache lagging: every check
// ends ready or skipped, under the race detector.
func TestConcurrentOwners(t *testing.T) {
	e := newEnv(t)
	s := consistency.NewStore(e.f, consistency.WithMaxWait(5*time.Millisecond))
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			o := types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("rs%d", i)}
			for j := range 5 {
				e.lag.HoldFor(3 * time.Millisecond)
				rv := e.createPod(t, fmt.Sprintf("p%d-%d", i, j))
				s.WroteAt(o, types.UID(o.Name), podsGR, rv)
				for s.EnsureReady(o) != nil {
				}
			}
			s.Clear(o, "")
		})
	}
	wg.Wait()
}
