package cache

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/reflector"
)

func connectionRefused() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

// failWatches makes the next watch requests fail with errs.
func (lw *scriptedLW) failWatches(errs ...error) {
	lw.mu.Lock()
	lw.watchErrs = errs
	lw.mu.Unlock()
}

// watchesFailed reports whether every failure failWatches set was met.
func (lw *scriptedLW) watchesFailed() bool {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return len(lw.watchErrs) == 0
}

// lastWatchOptions returns the options of the last watch request.
func (lw *scriptedLW) lastWatchOptions() metav1.ListOptions {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.watchOpts[len(lw.watchOpts)-1]
}

// startFresh starts an informer fresh at 100 (a@100) whose server, asked
// again, answers at 120 with a@100.
func startFresh(t *testing.T, opts ...Option) (*FreshInformer, *scriptedLW, *watch.RaceFreeFakeWatcher) {
	t.Helper()
	inf, lw, w := startScripted(t, listThenWatch, listResponse{rv: "10"}, opts...)
	w.Add(cm("a", "100"))
	waitFresh(t, inf, "100")
	lw.queueLists(listResponse{rv: "120", objects: []*corev1.ConfigMap{cm("a", "100")}})
	return inf, lw, w
}

// startOutage starts an informer fresh at 100 whose server then goes
// away: its watch ends and the next watch request is refused.
func startOutage(t *testing.T, opts ...Option) (*FreshInformer, *scriptedLW) {
	t.Helper()
	inf, lw, w := startFresh(t, opts...)
	lw.failWatches(connectionRefused())
	w.Stop()
	eventually(t, "the outage to hold waits", func() bool { return !inf.trust.Reached(mustRV(t, "50")) })
	return inf, lw
}

// assertHeld fails unless WaitForFreshness(rv) is still blocked after
// 300 ms.
func assertHeld(t *testing.T, inf *FreshInformer, rv, when string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := inf.WaitForFreshness(ctx, rv); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForFreshness(%s) %s = %v, want it held", rv, when, err)
	}
}

// Once a watch request has failed, the server the informer reaches next
// may come from an etcd restored without a bumped revision, which hands
// out again resource versions the cache applied. A bare WaitForFreshness
// for such an RV (nothing recorded) must not return nil on the strength of
// the old history: it is held until the stream resumes, which relists
// first, with a consistent read, and returns once that list is applied.
func TestWaitDuringOutageWaitsForTheRelist(t *testing.T) {
	inf, lw := startOutage(t)
	assertHeld(t, inf, "50", "during the outage")
	waitFresh(t, inf, "50")
	if got := inf.LastObservedResourceVersion(); got != "120" {
		t.Fatalf("the wait returned at %s, before the relist at 120", got)
	}
	if o := lw.lastListOptions(); o.ResourceVersion != "" {
		t.Fatalf("relist options %+v, want a consistent read", o)
	}
	if s := inf.Stats(); s.Regressions != 0 {
		t.Fatalf("a plain outage declared %d regressions", s.Regressions)
	}
	if !inf.trust.Reached(mustRV(t, "120")) {
		t.Fatal("the fast path does not work again after the outage")
	}
}

// Bytes after a restart: an apiserver just back from an outage
// answers slowly, and its stream delivers late; a probe then mostly asks
// what the stream is about to tell, and on the snapshot route lists as much
// as the relist did. After a relist that followed a failure and took 600
// ms, a wait that the stream does not meet sends no probe for 600 ms; once
// that has passed, probes are back to their own delay.
func TestProbesWaitAsLongAsTheRelistAfterAnOutageTook(t *testing.T) {
	const took = 600 * time.Millisecond
	inf, lw := startOutage(t, WithQuietProbeDelay(20*time.Millisecond))
	lw.queueLists(listResponse{rv: "120", objects: []*corev1.ConfigMap{cm("a", "100")}, delay: took},
		listResponse{rv: "120", objects: []*corev1.ConfigMap{cm("a", "100")}})
	waitFresh(t, inf, "120")
	lists := lw.listCount()
	ctx, cancel := context.WithTimeout(context.Background(), took/2)
	defer cancel()
	if err := inf.WaitForFreshness(ctx, "130"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForFreshness(130) right after the slow relist = %v, want it held until its deadline", err)
	}
	if n := lw.listCount() - lists; n != 0 {
		t.Fatalf("%d probes sent within %v of a relist that took %v", n, took/2, took)
	}
	time.Sleep(took)
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := inf.WaitForFreshness(ctx, "130"); !errors.Is(err, freshness.ErrTooLargeResourceVersion) {
		t.Fatalf("WaitForFreshness(130) later = %v, want a probe to find the server at 120", err)
	}
}

// answeredWatchLists counts the watch-lists the scripted server answered.
func (lw *scriptedLW) answeredWatchLists() int {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.watchLists
}

// Waits after a restart: right after an outage the apiserver
// streams a watch-list's initial events at its busiest, flushing each
// event on its own, and a write made meanwhile reaches the informer only
// after them (measured: 3.7 s for 500 Services, whose watches the
// apiserver serves through one more hand-off per event). An informer whose
// objects take listCompressedBytes or more (five objects' worth here)
// relists after a failed request with one consistent list, which the
// apiserver answers at once, compressed; a smaller one keeps the
// watch-list, whose stream the apiserver compresses whatever its size.
func TestLargeInformerListsAfterAFailure(t *testing.T) {
	for _, tc := range []struct {
		objects   int
		watchList bool
	}{{5, false}, {4, true}} {
		t.Run(fmt.Sprint(tc.objects), func(t *testing.T) {
			objs := make([]*corev1.ConfigMap, tc.objects)
			for i := range objs {
				objs[i] = cm(fmt.Sprintf("o%04d", i), "50")
			}
			inf, lw, w := startScripted(t, watchList, listResponse{rv: "100", objects: objs},
				func(o *Options) { o.internal.listCompressedBytes = 5 * objs[0].Size() })
			lw.queueLists(listResponse{rv: "200", objects: objs})
			before := lw.answeredWatchLists()
			lw.failWatches(connectionRefused()) // the apiserver is down
			w.Stop()
			waitFresh(t, inf, "200")
			if got := lw.answeredWatchLists() > before; got != tc.watchList {
				t.Fatalf("%d objects: relisted with a watch-list %v, want %v (lists %d)", tc.objects, got, tc.watchList, lw.listCount())
			}
			if o := lw.lastListOptions(); !tc.watchList && o.ResourceVersion != "" {
				t.Fatalf("the list after the failure asked %+v, want a consistent read", o)
			}
		})
	}
}

// A stream the server ends (here with 410 Gone) leaves
// the informer without a stream while client-go's Reflector backs off
// (0.8 s or more) before it relists; an apiserver may go down and come
// back from a restored etcd entirely in between, and no request of the
// informer's fails. Waits are held from the stream's end until the relist
// is applied: a bare WaitForFreshness for a write of the restored server
// must not return nil meanwhile, on the lost history.
func TestWaitsAreHeldBetweenStreams(t *testing.T) {
	inf, _, w := startFresh(t)
	w.Error(goneError()) // minutes before its timeout
	eventually(t, "the stream's end to hold waits", func() bool { return !inf.trust.Reached(mustRV(t, "50")) })
	assertHeld(t, inf, "50", "while the Reflector backs off before its relist")
	waitFresh(t, inf, "50")
	if got := inf.LastObservedResourceVersion(); got != "120" {
		t.Fatalf("the wait returned at %s, before the relist at 120", got)
	}
}

// A watch the server ends at its timeout (the ordinary end; client-go's
// Reflector resumes it at once) holds nothing and costs no relist.
func TestStreamEndedAtItsTimeoutHoldsNothing(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now()) // times the stream against its timeout
	inf, lw, w := startFresh(t, func(o *Options) { o.internal.streamClock = clk })
	lists := lw.listCount()
	clk.Step(20 * time.Minute)
	w.Stop()
	w2 := lw.nextWatcher()
	if !inf.trust.Reached(mustRV(t, "100")) || lw.listCount() != lists {
		t.Fatalf("a watch ended at its timeout held waits (%v) or relisted (%d lists, had %d)",
			!inf.trust.Reached(mustRV(t, "100")), lw.listCount(), lists)
	}
	w2.Add(cm("a", "130"))
	waitFresh(t, inf, "130")
}

// A watch request that fails with 410 Gone (the resource version was
// compacted) holds waits too until client-go's Reflector has relisted: it
// is a live server's answer, so that relist is raised to the floor as
// usual, not a consistent read.
func TestWatchExpiryHoldsWaitsUntilItsRelist(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	inf, lw, w := startFresh(t, func(o *Options) { o.internal.streamClock = clk })
	lw.failWatches(apierrors.NewResourceExpired("too old resource version"))
	clk.Step(20 * time.Minute) // the watch ends at its timeout, not early
	w.Stop()
	eventually(t, "the watch to fail with 410", lw.watchesFailed)
	assertHeld(t, inf, "50", "before the relist")
	waitFresh(t, inf, "120")
	if o := lw.lastListOptions(); o.ResourceVersion != "100" || o.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan {
		t.Fatalf("relist options %+v, want NotOlderThan the floor 100", o)
	}
}

// A callback the end of an outage releases may call back into the
// informer (AfterFreshness's contract): it runs once the informer's locks
// are released. Here it reads Stats.
func TestCallbackReleasedAtTheOutageEndMayCallTheInformer(t *testing.T) {
	inf, _ := startOutage(t)
	done := make(chan Stats, 1)
	inf.AfterFreshness("50", func(err error) {
		if err != nil {
			t.Errorf("AfterFreshness(50): %v", err)
		}
		done <- inf.Stats()
	})
	select {
	case s := <-done:
		if s.Lists < 2 {
			t.Fatalf("Stats from the callback: %+v, want the relist counted", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the callback released at the outage's end did not return: it deadlocked calling Stats")
	}
}

// A list the Reflector requested before a request failed says nothing of
// the server after the failure: applied after it, it must not end the
// outage (the server the informer reaches next may have lost the history
// that list came from). Here the list waits for applyMu while the next
// watch request fails; released, it is applied, and waits stay held until
// the relist that follows.
func TestListQueuedBeforeTheFailureDoesNotEndTheOutage(t *testing.T) {
	inf, lw, w := startScripted(t, listThenWatch, listResponse{rv: "10"})
	w.Add(cm("a", "100"))
	waitFresh(t, inf, "100")
	lw.queueLists(listResponse{rv: "120", objects: []*corev1.ConfigMap{cm("a", "100")}},
		listResponse{rv: "130", objects: []*corev1.ConfigMap{cm("a", "100")}})
	lw.failWatches(connectionRefused())

	inf.applyMu.Lock() // the processing goroutine waits with the list
	w.Error(goneError())
	eventually(t, "the watch after the relist to fail", lw.watchesFailed)
	inf.applyMu.Unlock()
	eventually(t, "the list at 120", func() bool { return inf.LastObservedResourceVersion() == "120" })
	assertHeld(t, inf, "50", "after a list requested before the failure")
	waitFresh(t, inf, "130")
}

// An outage that ended begins again at the next failed request.
func TestOutageBeginsAgainAtTheNextFailure(t *testing.T) {
	inf, lw := startOutage(t)
	waitFresh(t, inf, "120")
	w := lw.nextWatcher()
	lw.queueLists(listResponse{rv: "130", objects: []*corev1.ConfigMap{cm("a", "100")}})
	lw.failWatches(connectionRefused())
	w.Stop()
	eventually(t, "the retried watch to fail", lw.watchesFailed)
	assertHeld(t, inf, "50", "after the second failure")
	waitFresh(t, inf, "130")
}

// A stream the server ended early resumes without a relist, whatever the
// informer's size: once the resumed watch is taken, one consistent read
// of the server's resource version (limit 1) checks that the server did
// not go back, and waits are released when it answers.
func TestStreamEndedEarlyResumesAfterTheCheck(t *testing.T) {
	lw := newStateLW(t, 10, cm("a", "5"), cm("b", "9"), cm("c", "10"))
	inf, w := startState(t, lw, WithSnapshotProbeLimit(1), WithQuietProbeDelay(-1))
	lists, _ := lw.counts()
	time.Sleep(1100 * time.Millisecond) // client-go's Reflector relists after a shorter silent watch
	w.Stop()                            // minutes before its timeout
	select {
	case <-lw.watchers:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not resume")
	}
	waitFresh(t, inf, "10")
	if s, n := inf.Stats(), 0; s.RestoreProbes != 1 || s.Regressions != 0 {
		t.Fatalf("%+v: want one restore check, nothing declared", s)
	} else if n, _ = lw.counts(); n != lists+1 || lw.lastList().Limit != 1 {
		t.Fatalf("%d lists after %d (the last %+v): want the check's read of limit 1, and no relist", n, lists, lw.lastList())
	}
}

// After a restore without a bumped revision, new writes can carry the
// server past the old floor before the informer reaches it again, so its
// resource version alone shows nothing. A key listed at a state the cache
// had passed, which the cache does not hold, shows the history went back:
// the relist that follows the outage declares it as KeysWentBack.
func TestRestoreOutrunByWritesIsDeclared(t *testing.T) {
	for _, tc := range []struct {
		serverAt string
		wentBack int // a; and c too where it got an RV the cache had passed
	}{{"130", 1}, {"100", 2}} {
		t.Run(fmt.Sprintf("server at %s", tc.serverAt), func(t *testing.T) {
			forEachMode(t, func(t *testing.T, mode streamMode) {
				regs := newRegressionLog()
				inf, lw, w := startScripted(t, mode, listResponse{rv: "10"}, WithRegressionHandler(regs.handle))
				w.Add(cm("a", "90"))
				w.Add(cm("b", "100"))
				waitFresh(t, inf, "100")
				// Restored at 60 (a@40, b gone), then writes up to the
				// server's: a rewritten at 95, which the old stream had passed.
				lw.queueLists(listResponse{rv: tc.serverAt, objects: []*corev1.ConfigMap{cm("a", "95"), cm("c", tc.serverAt)}})
				lw.failWatches(connectionRefused())
				w.Stop()
				r := regs.next(t)
				if r.Reason != reflector.RegressionKeysWentBack || r.Keys != tc.wentBack || r.SampleKeys[0] != "ns/a" || r.Floor != "100" {
					t.Fatalf("regression %+v, want KeysWentBack of %d keys (ns/a first) under floor 100", r, tc.wentBack)
				}
				waitFresh(t, inf, tc.serverAt)
				if cached(inf, "a") != "95" || cached(inf, "b") != "" || inf.Stats().Regressions != 1 {
					t.Fatalf("after the relist a=%q b=%q, %+v", cached(inf, "a"), cached(inf, "b"), inf.Stats())
				}
			})
		})
	}
}

// A server back from an etcd restored below the floor answers a list
// raised to the floor with "Too large resource version" (for as long as
// its new writes have not reached it): a failed request, after which the
// informer lists with a consistent read, which shows the restore at once.
func TestRestoreBehindTheFloorIsDeclaredByTheConsistentRelist(t *testing.T) {
	regs := newRegressionLog()
	inf, lw, w := startScripted(t, listThenWatch, listResponse{rv: "10"}, WithRegressionHandler(regs.handle))
	w.Add(cm("a", "100"))
	waitFresh(t, inf, "100")
	lw.queueLists(listResponse{err: apierrors.NewTimeoutError("Too large resource version", 1)},
		listResponse{rv: "60", objects: []*corev1.ConfigMap{cm("a", "40")}})
	w.Error(goneError())
	r := regs.next(t)
	if r.Reason != reflector.RegressionConsistentList || r.ListResourceVersion != "60" || r.Floor != "100" {
		t.Fatalf("regression %+v", r)
	}
	waitFresh(t, inf, "60")
	if got := cached(inf, "a"); got != "40" {
		t.Fatalf("a=%q after the restore, want 40", got)
	}
}

// The relist that follows an outage runs on the watch path, so client-go's
// Reflector never learns its resource version: until the new watch
// delivers something, the Reflector would resume from the old history's
// (here 100, past everything the restored server had at 60) and miss the
// restored server's new writes up to there. A watch that ends before
// delivering anything resumes from the relist's resource version.
func TestWatchAfterRelistOnTheWatchPathResumesFromTheRelist(t *testing.T) {
	regs := newRegressionLog()
	inf, lw, w, watchErrors := startRecordingWatchErrors(t, WithRegressionHandler(regs.handle))
	w.Add(cm("a", "100"))
	waitFresh(t, inf, "100")
	lw.queueLists(listResponse{rv: "60", objects: []*corev1.ConfigMap{cm("a", "40")}}) // restored
	lw.failWatches(connectionRefused())                                                // down meanwhile: the next watch relists first, on the watch path
	time.Sleep(1100 * time.Millisecond)                                                // client-go's Reflector relists itself after a shorter silent watch
	w.Stop()
	if r := regs.next(t); r.Reason != reflector.RegressionConsistentList {
		t.Fatalf("regression %+v", r)
	}
	w2 := lw.nextWatcher()
	waitFresh(t, inf, "60")
	if cached(inf, "a") != "40" {
		t.Fatalf("a=%q after the relist", cached(inf, "a"))
	}
	// It ends before delivering anything, after a second: client-go's
	// Reflector takes a shorter silent watch for a failure and relists,
	// and resumes after a longer one.
	time.Sleep(1100 * time.Millisecond)
	w2.Stop()
	w3 := lw.nextWatcher()
	if got := lw.lastWatchOptions().ResourceVersion; got != "60" {
		t.Fatalf("the watch after the relist's watch resumed from %q, want the relist's 60", got)
	}
	// Once the watch delivers, the Reflector's own resource version is
	// current again: the next watch resumes from there.
	lw.queueLists(listResponse{rv: "70", objects: []*corev1.ConfigMap{cm("a", "40"), cm("b", "70")}}) // the server's state now
	w3.Add(cm("b", "70"))
	waitFresh(t, inf, "70")
	w3.Stop()
	lw.nextWatcher()
	if got := lw.lastWatchOptions().ResourceVersion; got != "70" {
		t.Fatalf("the next watch resumed from %q, want 70", got)
	}
	for _, err := range watchErrors() {
		if apierrors.IsResourceExpired(err) {
			t.Fatalf("the Reflector's ListAndWatch returned with %v: the relist was not on the watch path", err)
		}
	}
}

// A restore check started by a suspicious recorded write holds waits
// while it runs, and one a regression voids asks again rather than
// releasing them.
func TestRestoreCheckVoidedByARegressionAsksAgain(t *testing.T) {
	regs := newRegressionLog()
	inf, lw, w := startScripted(t, listThenWatch, listResponse{rv: "10"}, WithRegressionHandler(regs.handle))
	w.Add(cm("a", "100"))
	waitFresh(t, inf, "100")
	lw.queueLists(listResponse{rv: "60", objects: []*corev1.ConfigMap{cm("a", "40")}}) // restored
	release := lw.holdProbes()
	defer release()
	if err := inf.RecordWrite("55"); err != nil { // never delivered: suspicious
		t.Fatal(err)
	}
	eventually(t, "the check's read", func() bool { return lw.heldProbes() > 0 })
	inf.applyMu.Lock() // a regression found meanwhile
	inf.found(reflector.Regression{Reason: reflector.RegressionStaleList, ListResourceVersion: "90", Floor: "100"}, true)
	inf.unlockApply()
	regs.next(t)
	release()
	waitFresh(t, inf, "50")
	if got := cached(inf, "a"); got != "40" {
		t.Fatalf("WaitForFreshness(50) returned with a cached at %q, the lost history's", got)
	}
}

// A watch the server ended early costs no relist: the stream resumes from
// where it ended, and one read of limit 1 checks the server meanwhile.
func TestWatchEndedEarlyResumesWithoutARelist(t *testing.T) {
	inf, lw, w := startFresh(t)
	lists := lw.listCount()
	w.Stop() // minutes before its timeout
	w2 := lw.nextWatcher()
	if got := lw.lastWatchOptions().ResourceVersion; got != "100" {
		t.Fatalf("the watch resumed from %q, want 100", got)
	}
	w2.Add(cm("b", "120"))
	waitFresh(t, inf, "120")
	time.Sleep(100 * time.Millisecond)
	lw.mu.Lock()
	calls := slices.Clone(lw.listCalls[lists:])
	lw.mu.Unlock()
	if len(calls) != 1 || calls[0].Limit != 1 {
		t.Fatalf("lists %+v for one early-ended watch, want one read of limit 1", calls)
	}
}

// Behind a load balancer, a restore's downtime may never fail a request:
// HAProxy holds the informer's resumed watch while every apiserver is down
// and hands it to one restarted on the restored etcd, which takes it
// (kube-apiserver starts a plain watch above its revision and keeps it
// silent until new writes pass it). A wait for a write the restored
// server made below the old floor must not return nil on the old
// history: resuming the stream without a relist did (110 early waits in
// TestHA/EtcdRestore/NoBump on the real HA plane), so an early-ended
// stream relists first.
func TestRestoreBehindALoadBalancerIsNotResumedBlindly(t *testing.T) {
	inf, lw, w := startScripted(t, listThenWatch, listResponse{rv: "10"}, WithQuietProbeDelay(-1))
	w.Add(cm("a", "100"))
	waitFresh(t, inf, "100")
	lw.queueLists(listResponse{rv: "60", objects: []*corev1.ConfigMap{cm("a", "40"), cm("b", "60")}}) // restored, b written since
	w.Stop()
	// The restore takes seconds: its writes come well after the stream's
	// end, when the informer has long resumed or relisted.
	time.Sleep(200 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := inf.WaitForFreshness(ctx, "60"); err == nil && cached(inf, "b") != "60" {
		t.Fatalf("WaitForFreshness(60) returned nil without the restored server's write of b (cache: a@%s, b@%q)", cached(inf, "a"), cached(inf, "b"))
	}
}

// The size that decides between a list and a watch-list after a failure
// is the objects' protobuf size; objects without one (unstructured, custom
// types) keep the watch-list.
func TestListIsCompressedCountsProtobufSizes(t *testing.T) {
	typed := NewSharedIndexInformer(newScriptedLW(t, listThenWatch, listResponse{rv: "1"}), &corev1.ConfigMap{}, 0, nil)
	a, b := cm("a", "1"), cm("b", "2")
	for _, o := range []*corev1.ConfigMap{a, b} {
		if err := typed.indexer.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	if size := a.Size() + b.Size(); !typed.listIsCompressed(size) || typed.listIsCompressed(size+1) {
		t.Fatalf("listIsCompressed is not the objects' protobuf size, %d bytes", size)
	}
	generic := NewSharedIndexInformer(newScriptedLW(t, listThenWatch, listResponse{rv: "1"}), &unstructured.Unstructured{}, 0, nil)
	u := &unstructured.Unstructured{}
	u.SetNamespace("ns")
	u.SetName("a")
	if err := generic.indexer.Add(u); err != nil {
		t.Fatal(err)
	}
	if generic.listIsCompressed(1) {
		t.Fatal("an object without a protobuf size counted")
	}
}

// In a rollout every watch an apiserver served ends at once. Informers
// that share a ServerReads (a factory's, or one given to several) check
// the server with one read for all of them: a read sent after each one's
// watch was taken. Nobody relists.
func TestRolloutChecksTheServerOncePerResource(t *testing.T) {
	const informers = 8
	shared := new(ServerReads)
	type side struct {
		inf *FreshInformer
		lw  *scriptedLW
		w   *watch.RaceFreeFakeWatcher
	}
	sides := make([]side, informers)
	for i := range sides {
		inf, lw, w := startFresh(t, WithServerReads(shared))
		sides[i] = side{inf, lw, w}
	}
	reads := func() (n int) {
		for _, s := range sides {
			s.lw.mu.Lock()
			for _, o := range s.lw.listCalls {
				if o.Limit == 1 {
					n++
				}
			}
			s.lw.mu.Unlock()
		}
		return n
	}
	lists := func() (n int) {
		for _, s := range sides {
			n += s.lw.listCount()
		}
		return n - reads()
	}
	before := lists()
	var releases []func()
	for _, s := range sides {
		release := s.lw.holdProbes()
		defer release()
		releases = append(releases, release)
	}
	held := func() (n int) {
		for _, s := range sides {
			n += s.lw.heldProbes()
		}
		return n
	}
	for _, s := range sides {
		s.w.Stop() // the apiserver shuts down
	}
	for i, s := range sides {
		sides[i].w = s.lw.nextWatcher()
	}
	group := shared.reads.For(schema.GroupResource{Resource: "configmaps"})
	eventually(t, "one read in flight, the other informers waiting for it", func() bool {
		return held() == 1 && group.Waiting() == informers-1
	})
	for _, release := range releases {
		release()
	}
	// One read was in flight when the others asked; the next answers them
	// all.
	eventually(t, "the second read", func() bool { return reads() == 2 })
	for _, s := range sides {
		s.w.Add(cm("b", "120"))
		waitFresh(t, s.inf, "120")
	}
	time.Sleep(100 * time.Millisecond)
	if n := reads(); n != 2 {
		t.Fatalf("%d reads for %d informers of one resource, want 2", n, informers)
	}
	if n := lists() - before; n != 0 {
		t.Fatalf("%d relists after the rollout, want none", n)
	}
}

// While the check of a resumed stream is in flight, a write the resumed
// stream delivers past where the old one ended is released at once: no
// server restored below that floor delivers it. A wait at or below the
// floor waits for the check.
func TestResumedStreamReleasesWritesPastItsFloor(t *testing.T) {
	inf, lw, w := startFresh(t)
	release := lw.holdProbes()
	defer release()
	w.Stop() // the apiserver shuts down; another takes the resumed watch
	w2 := lw.nextWatcher()
	eventually(t, "the check's read", func() bool { return lw.heldProbes() > 0 })
	assertHeld(t, inf, "100", "while the check is in flight")
	w2.Add(cm("b", "130"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := inf.WaitForFreshness(ctx, "130"); err != nil {
		t.Fatalf("WaitForFreshness(130), delivered by the resumed stream: %v", err)
	}
}
