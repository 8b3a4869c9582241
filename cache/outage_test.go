package cache

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	testingclock "k8s.io/utils/clock/testing"

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

// startOutage starts an informer fresh at 100 (a@100) whose server then
// goes away: its watch ends and the next watch request is refused. The
// restore check's reads are held until release; once released, the server
// answers at 120, holding a@100.
func startOutage(t *testing.T, opts ...Option) (inf *FreshInformer, lw *scriptedLW, release func()) {
	t.Helper()
	inf, lw, w := startFresh(t, opts...)
	release = lw.holdProbes()
	t.Cleanup(release)
	lw.failWatches(connectionRefused())
	w.Stop()
	eventually(t, "the outage to hold waits", func() bool { return !inf.tracker.Reached(mustRV(t, "50")) })
	return inf, lw, release
}

// assertHeld fails unless WaitForFreshness(rv) is still blocked after
// 300 ms.
func assertHeld(t *testing.T, inf *FreshInformer, rv, when string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := inf.WaitForFreshness(ctx, rv); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForFreshness(%s) %s = %v, want it held until the server answers", rv, when, err)
	}
}

// Issue 21 (the restore window): once a watch request has failed, the
// server the informer reaches next may come from an etcd restored without
// a bumped revision, which hands out again resource versions the cache
// applied. A bare WaitForFreshness for such an RV (nothing recorded) must
// not return nil on the strength of the old history until a consistent
// read has answered. Here the read is held: the wait blocks; released, it
// finds the server past the floor and the wait returns.
func TestWaitDuringOutageWaitsForTheServer(t *testing.T) {
	inf, _, release := startOutage(t)
	assertHeld(t, inf, "50", "during the outage")
	release()
	waitFresh(t, inf, "50")
	if s := inf.Stats(); s.Regressions != 0 {
		t.Fatalf("a plain outage declared %d regressions", s.Regressions)
	}
	// The outage is over: the fast path works again.
	if !inf.tracker.Reached(mustRV(t, "100")) {
		t.Fatal("the tracker is still suspended after the server answered")
	}
}

// The check is retried while the server does not answer: waits held by an
// outage are not left blocked by one lost read.
func TestOutageCheckRetriesUntilAnswered(t *testing.T) {
	inf, lw, w := startScripted(t, listThenWatch, listResponse{rv: "10"})
	w.Add(cm("a", "100"))
	waitFresh(t, inf, "100")
	lw.queueLists(listResponse{rv: "120", err: connectionRefused()})
	lw.failWatches(connectionRefused())
	w.Stop()
	eventually(t, "two failed checks", func() bool {
		lw.mu.Lock()
		defer lw.mu.Unlock()
		n := 0
		for _, o := range lw.listCalls {
			if o.Limit == 1 {
				n++
			}
		}
		return n >= 2
	})
	lw.queueLists(listResponse{rv: "120", objects: []*corev1.ConfigMap{cm("a", "100")}})
	waitFresh(t, inf, "100")
}

// Issue 21 (the restore gap): after a restore without a bumped revision,
// new writes can carry the server past the old floor before the check
// answers, so its resource version alone shows nothing. A key listed at a
// state the cache had passed, which the cache does not hold, shows the
// history went back: declared as KeysWentBack, and waits held until the
// relist.
func TestRestoreOutrunByWritesIsDeclared(t *testing.T) {
	// The check compares keys whether or not the quiet probes take the
	// snapshot route, and when the writes carried the server exactly to
	// the floor too.
	for _, tc := range []struct {
		limit    int
		serverAt string
		wentBack int // a; and c too where it got an RV the cache had passed
	}{{0, "130", 1}, {-1, "130", 1}, {0, "100", 2}} {
		limit := tc.limit
		t.Run(fmt.Sprintf("snapshot limit %d, server at %s", limit, tc.serverAt), func(t *testing.T) {
			regs := newRegressionLog()
			lw := newScriptedLW(t, listThenWatch, listResponse{rv: "10"})
			inf := NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, nil,
				WithSnapshotProbeLimit(limit), WithQuietProbeDelay(time.Hour), WithRegressionHandler(regs.handle))
			runInformer(t, inf)
			w := lw.nextWatcher()
			waitSynced(t, inf)
			w.Add(cm("a", "90"))
			w.Add(cm("b", "100"))
			waitFresh(t, inf, "100")
			// Restored at 60 (a@40, b gone), then writes up to 130: a
			// rewritten at 95, which the old stream had passed.
			lw.queueLists(listResponse{rv: tc.serverAt, objects: []*corev1.ConfigMap{cm("a", "95"), cm("c", tc.serverAt)}})
			lw.failWatches(connectionRefused())
			w.Stop()
			r := regs.next(t)
			if r.Reason != reflector.RegressionKeysWentBack || r.Keys != tc.wentBack || r.SampleKeys[0] != "ns/a" || r.Floor != "100" {
				t.Fatalf("regression %+v, want KeysWentBack of %d keys (ns/a first) under floor 100", r, tc.wentBack)
			}
			eventually(t, "the relist", func() bool { return inf.LastObservedResourceVersion() == tc.serverAt && cached(inf, "c") != "" })
			if cached(inf, "a") != "95" || cached(inf, "b") != "" || inf.Stats().Regressions != 1 {
				t.Fatalf("after the relist a=%q b=%q, %+v", cached(inf, "a"), cached(inf, "b"), inf.Stats())
			}
			if ps := inf.ProbeStats(); limit < 0 && ps.Snapshots != 0 {
				t.Fatalf("%+v: the restore check's list counted as a quiet probe's snapshot", ps)
			}
		})
	}
}

// Issue 21: after a declared restore the informer relists at once, on its
// watch path, instead of returning a 410 to client-go's Reflector and
// waiting out its relist backoff (0.8 s and more) while every wait blocks.
// The 410 would reach the watch error handler (ListAndWatch returned): no
// error reaches it here.
func TestRelistAfterDeclaredRestoreIsImmediate(t *testing.T) {
	regs := newRegressionLog()
	inf, lw, w, watchErrors := startRecordingWatchErrors(t, WithRegressionHandler(regs.handle))
	w.Add(cm("a", "100"))
	waitFresh(t, inf, "100")
	lw.queueLists(listResponse{rv: "60", objects: []*corev1.ConfigMap{cm("a", "40")}}) // restored
	lw.failWatches(connectionRefused())
	w.Stop()
	r := regs.next(t)
	declared := time.Now()
	if r.Reason != reflector.RegressionServerBehind {
		t.Fatalf("regression %+v", r)
	}
	waitFresh(t, inf, "60")
	t.Logf("relist applied %v after the declaration", time.Since(declared))
	if cached(inf, "a") != "40" {
		t.Fatalf("a=%q after the relist", cached(inf, "a"))
	}
	if errs := watchErrors(); len(errs) > 0 {
		t.Fatalf("the Reflector's ListAndWatch returned (and backed off) with %v", errs)
	}
	if o := lw.lastListOptions(); o.ResourceVersion != "" {
		t.Fatalf("relist options %+v, want a consistent read", o)
	}
}

// Ordinary watch expiries do not pay for the outage rule: a watch that
// starts with 410 Gone (compaction) relists, and waits for resource
// versions the cache reached return at once meanwhile.
func TestWatchExpiryDoesNotHoldWaits(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now()) // times the stream against its timeout
	inf, lw, w := startScripted(t, listThenWatch, listResponse{rv: "10"}, func(o *Options) { o.internal.streamClock = clk })
	w.Add(cm("a", "100"))
	waitFresh(t, inf, "100")
	lw.queueLists(listResponse{rv: "120", objects: []*corev1.ConfigMap{cm("a", "100")}})
	lw.failWatches(apierrors.NewResourceExpired("too old resource version"))
	clk.Step(20 * time.Minute) // the watch ends at its timeout, not early
	w.Stop()
	eventually(t, "the watch to fail with 410", lw.watchesFailed)
	if inf.guard.WatchFailing() || !inf.tracker.Reached(mustRV(t, "100")) {
		t.Fatal("a 410 Gone counted as an outage: waits are held")
	}
}

// A callback the end of an outage releases may call back into the
// informer (AfterFreshness's contract): the restore check's runner must
// not hold its lock while the tracker runs it. Here the callback reads
// Stats, which asks that runner for its count.
func TestCallbackReleasedByOutageCheckMayCallTheInformer(t *testing.T) {
	inf, _, release := startOutage(t)
	done := make(chan Stats, 1)
	inf.AfterFreshness("50", func(err error) {
		if err != nil {
			t.Errorf("AfterFreshness(50): %v", err)
		}
		done <- inf.Stats()
	})
	release()
	select {
	case s := <-done:
		if s.RestoreProbes == 0 {
			t.Fatalf("Stats from the callback: %+v, want the restore check counted", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the callback released by the outage check did not return: it deadlocked calling Stats")
	}
}

// A list the Reflector queued before a request failed says nothing of the
// server after the failure: applied after it, it must not end the outage
// (the server the informer reaches next may have lost the history that
// list came from). Here the list waits for applyMu while the next watch
// request fails; released, it is applied, and waits stay held until the
// check answers.
func TestListQueuedBeforeTheFailureDoesNotEndTheOutage(t *testing.T) {
	inf, lw, w := startScripted(t, listThenWatch, listResponse{rv: "10"})
	w.Add(cm("a", "100"))
	waitFresh(t, inf, "100")
	release := lw.holdProbes()
	defer release()
	lw.queueLists(listResponse{rv: "120", objects: []*corev1.ConfigMap{cm("a", "100")}})
	lw.failWatches(connectionRefused())

	inf.applyMu.Lock() // the processing goroutine waits with the list
	w.Error(goneError())
	eventually(t, "the watch after the relist to fail", lw.watchesFailed)
	eventually(t, "the outage to hold waits", func() bool { return !inf.tracker.Reached(mustRV(t, "50")) })
	inf.applyMu.Unlock()
	eventually(t, "the list", func() bool {
		inf.applyMu.Lock()
		defer inf.applyMu.Unlock()
		return inf.listsTaken == 2
	})
	assertHeld(t, inf, "50", "after a list queued before the failure")
	release()
	waitFresh(t, inf, "120")
}

// An outage the check ended begins again at the next failed request, even
// before a watch starts: a server that answers once and fails again (as
// one restarting during a restore may) holds waits again.
func TestOutageBeginsAgainAtTheNextFailure(t *testing.T) {
	inf, lw, release := startOutage(t)
	release()
	waitFresh(t, inf, "50") // the check answered: the outage is over

	// The Reflector retries its watch after its backoff (0.8 s and more):
	// that request fails too, and this time the server does not answer.
	lw.mu.Lock()
	lw.watchErrs = []error{connectionRefused()}
	lw.lists = []listResponse{{rv: "120", err: connectionRefused()}}
	lw.mu.Unlock()
	eventually(t, "the retried watch to fail", lw.watchesFailed)
	assertHeld(t, inf, "50", "after the second failure")
	lw.queueLists(listResponse{rv: "120", objects: []*corev1.ConfigMap{cm("a", "100")}})
	waitFresh(t, inf, "50")
}

// The relist that follows a declared restore runs on the watch path, so
// client-go's Reflector never learns its resource version: until the new
// watch delivers something, the Reflector would resume from the old
// history's (here 100, past everything the restored server had at 60) and
// miss the restored server's new writes up to there. A watch that ends
// before delivering anything resumes from the relist's resource version.
func TestWatchAfterRelistOnTheWatchPathResumesFromTheRelist(t *testing.T) {
	regs := newRegressionLog()
	inf, lw, w := startScripted(t, listThenWatch, listResponse{rv: "10"}, WithRegressionHandler(regs.handle))
	w.Add(cm("a", "100"))
	waitFresh(t, inf, "100")
	lw.queueLists(listResponse{rv: "60", objects: []*corev1.ConfigMap{cm("a", "40")}}) // restored
	lw.failWatches(connectionRefused())
	w.Stop()
	if r := regs.next(t); r.Reason != reflector.RegressionServerBehind {
		t.Fatalf("regression %+v", r)
	}
	w2 := lw.nextWatcher()
	waitFresh(t, inf, "60")
	// It ends before delivering anything, after a second: client-go's
	// Reflector takes a shorter silent watch for a failure and relists,
	// and resumes after a longer one.
	time.Sleep(1100 * time.Millisecond)
	w2.Stop()
	w3 := lw.nextWatcher()
	lw.mu.Lock()
	got := lw.watchOpts[len(lw.watchOpts)-1].ResourceVersion
	lw.mu.Unlock()
	if got != "60" {
		t.Fatalf("the watch after the relist's watch resumed from %q, want the relist's 60", got)
	}
	// Once the watch delivers, the Reflector's own resource version is
	// current again: the next watch resumes from there.
	w3.Add(cm("b", "70"))
	waitFresh(t, inf, "70")
	lw.queueLists(listResponse{rv: "70", objects: []*corev1.ConfigMap{cm("a", "40"), cm("b", "70")}}) // the server's state now
	w3.Stop()
	lw.nextWatcher()
	lw.mu.Lock()
	got = lw.watchOpts[len(lw.watchOpts)-1].ResourceVersion
	lw.mu.Unlock()
	if got != "70" {
		t.Fatalf("the next watch resumed from %q, want 70", got)
	}
}

// An apiserver that shuts down ends its watches cleanly, and may be back,
// from a restored etcd, before the Reflector asks again: then no request
// fails. A watch that ends well before its timeout is taken as such a
// restart: waits are held until a consistent read answers, as after a
// failed request.
func TestWatchEndedEarlyHoldsWaitsUntilTheServerAnswers(t *testing.T) {
	inf, lw, w := startFresh(t)
	release := lw.holdProbes()
	defer release()
	w.Stop() // minutes before its timeout; the Reflector's next watch succeeds
	eventually(t, "the outage to hold waits", func() bool { return !inf.tracker.Reached(mustRV(t, "50")) })
	assertHeld(t, inf, "50", "after a watch ended early")
	release()
	waitFresh(t, inf, "50")
	lw.nextWatcher()
	if s := inf.Stats(); s.Regressions != 0 || s.RestoreProbes == 0 {
		t.Fatalf("%+v: want the server checked, and nothing declared", s)
	}
}

// A regression declared while the outage check's read is on its way voids
// the read (it may not speak for the cache's history any more): the check
// asks again, and the outage holds waits meanwhile. Before, the voided
// read ended the outage, and waits returned on the history a restored
// server had lost.
func TestOutageCheckVoidedByARegressionAsksAgain(t *testing.T) {
	regs := newRegressionLog()
	inf, lw, release := startOutage(t, WithRegressionHandler(regs.handle))
	lw.queueLists(listResponse{rv: "60", objects: []*corev1.ConfigMap{cm("a", "40")}}) // restored
	eventually(t, "the check's read", func() bool { return lw.heldProbes() > 0 })
	inf.guard.DeclareRegression(reflector.Regression{Reason: reflector.RegressionStaleList, ListResourceVersion: "90", Floor: "100"})
	regs.next(t)
	release()
	waitFresh(t, inf, "50")
	if got := cached(inf, "a"); got != "40" {
		t.Fatalf("WaitForFreshness(50) returned with a cached at %q, the lost history's", got)
	}
	if r := regs.next(t); r.Reason != reflector.RegressionServerBehind {
		t.Fatalf("regression %+v, want ServerBehind from the check asked again", r)
	}
}

// The same without an outage: a restore check started by a suspicious
// recorded write holds waits while it runs, and one a regression voids
// asks again rather than releasing them.
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
	inf.guard.DeclareRegression(reflector.Regression{Reason: reflector.RegressionStaleList, ListResourceVersion: "90", Floor: "100"})
	regs.next(t)
	release()
	waitFresh(t, inf, "50")
	if got := cached(inf, "a"); got != "40" {
		t.Fatalf("WaitForFreshness(50) returned with a cached at %q, the lost history's", got)
	}
}

// A watch the server ended early is verified by one check: the outage its
// resumption begins starts one, and the resumed watch waits for that one
// instead of queueing a second (found in review: every watch the server
// ended early cost two snapshot lists).
func TestWatchEndedEarlyIsVerifiedOnce(t *testing.T) {
	inf, lw, w := startFresh(t)
	w.Stop() // minutes before its timeout
	lw.nextWatcher()
	eventually(t, "the resumed watch to be open", inf.guard.WatchOpen)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	inf.restoreChecks.WaitIdle(ctx)
	if n := inf.Stats().RestoreProbes; n != 1 {
		t.Fatalf("%d restore checks ran for one early-ended watch, want 1", n)
	}
}

// A watch resumed after its outage's check answered is checked again: the
// server may have gone down and come back restored while the Reflector
// backed off, and no request of the informer's saw it.
func TestWatchResumedAfterTheCheckAnsweredIsCheckedAgain(t *testing.T) {
	regs := newRegressionLog()
	inf, lw, release := startOutage(t, WithRegressionHandler(regs.handle))
	hold := lw.holdWatches()
	t.Cleanup(hold)
	release()
	waitFresh(t, inf, "50") // the check answered: the outage is over
	// Restored to 60 meanwhile, below the floor of 100.
	lw.queueLists(listResponse{rv: "60", objects: []*corev1.ConfigMap{cm("a", "40")}})
	eventually(t, "the Reflector's next watch", func() bool { return lw.heldWatches() > 0 })
	hold()
	if r := regs.next(t); r.Reason != reflector.RegressionServerBehind {
		t.Fatalf("declared %+v, want the server found behind", r)
	}
	waitFresh(t, inf, "60")
	if got := cached(inf, "a"); got != "40" {
		t.Fatalf("a=%q after the relist, want 40", got)
	}
}
