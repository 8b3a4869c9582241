package guard

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"testing"
	"time"

	"github.com/freshinformer/freshinformer/reflector"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/trust"
)

func TestMain(m *testing.M) {
	// The informer logs refused lists and regressions at error level; the
	// tests provoke them on purpose.
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m)
}

// fakeOwner is an Owner the test sets and reads, with the trust state the
// Guard submits to (options).
type fakeOwner struct {
	trust   trust.Trust
	mu      sync.Mutex
	resumed int  // Resuming calls
	relist  bool // Resuming's answer
	checked int  // Resumed calls
}

// options returns opts with the owner and its trust state.
func (o *fakeOwner) options(opts Options) Options {
	opts.Owner, opts.Trust = o, &o.trust
	return opts
}

func (o *fakeOwner) Resuming(context.Context) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.resumed++
	return o.relist
}

func (o *fakeOwner) Resumed() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.checked++
}

// counts returns the failures submitted (broken), the Resuming calls, and
// the epochs begun: each list admitted below the floor begins one
// (regressions), as does a restore the test submits.
func (o *fakeOwner) counts() (broken, resumed, regressions int) {
	st := o.trust.Stamp()
	o.mu.Lock()
	defer o.mu.Unlock()
	return int(st.Failures), o.resumed, int(st.Epoch)
}

func floorAt(s string) freshness.RV {
	rv, _ := freshness.ParseRV(s)
	return rv
}

// recordingLW records the options of every request.
type recordingLW struct {
	lists, watches []metav1.ListOptions
}

func (r *recordingLW) List(o metav1.ListOptions) (runtime.Object, error) {
	r.lists = append(r.lists, o)
	return &corev1.ConfigMapList{}, nil
}

func (r *recordingLW) Watch(o metav1.ListOptions) (watch.Interface, error) {
	r.watches = append(r.watches, o)
	return watch.NewEmptyWatch(), nil
}

func TestListerWatcherRaisesToFloor(t *testing.T) {
	inner := &recordingLW{}
	g := New(Options{InitialFloor: floorAt("100")})
	lw := g.ListerWatcher(inner).(toolscache.ListerWatcherWithContext)
	ctx := context.Background()
	for _, o := range []metav1.ListOptions{
		{ResourceVersion: "50"},                                // raised, NotOlderThan
		{ResourceVersion: "150", Limit: 500},                   // kept, NotOlderThan
		{ResourceVersion: ""},                                  // consistent read: kept
		{ResourceVersion: "0"},                                 // any state: raised (there is a floor)
		{ResourceVersion: "50", Continue: "token"},             // a later page: kept
		{ResourceVersion: "50", ResourceVersionMatch: "Exact"}, // raised, match kept
	} {
		if _, err := lw.ListWithContext(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	want := []struct{ rv, match string }{
		{"100", "NotOlderThan"}, {"150", "NotOlderThan"}, {"", ""}, {"100", "NotOlderThan"}, {"50", ""}, {"100", "Exact"},
	}
	for i, w := range want {
		if got := inner.lists[i]; got.ResourceVersion != w.rv || string(got.ResourceVersionMatch) != w.match {
			t.Errorf("list %d sent RV %q match %q, want %q %q", i, got.ResourceVersion, got.ResourceVersionMatch, w.rv, w.match)
		}
	}
	for _, rv := range []string{"50", "120", ""} {
		w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: rv})
		if err != nil {
			t.Fatal(err)
		}
		w.Stop()
	}
	for i, want := range []string{"100", "120", ""} {
		if got := inner.watches[i].ResourceVersion; got != want {
			t.Errorf("watch %d started at %q, want %q", i, got, want)
		}
	}
	if s := g.Stats(); s.FloorRaised != 4 || s.Watches != 3 {
		t.Errorf("stats %+v, want 4 raised, 3 watches", s)
	}
}

type watchListUnsupported struct{ recordingLW }

func (watchListUnsupported) IsWatchListSemanticsUnSupported() bool { return true }

func TestListerWatcherForwardsWatchListSupport(t *testing.T) {
	g := New(Options{InitialFloor: floorAt("1")})
	type unsupported interface{ IsWatchListSemanticsUnSupported() bool }
	if g.ListerWatcher(&watchListUnsupported{}).(unsupported).IsWatchListSemanticsUnSupported() != true {
		t.Error("did not forward an inner 'unsupported'")
	}
	if g.ListerWatcher(&recordingLW{}).(unsupported).IsWatchListSemanticsUnSupported() != false {
		t.Error("claimed 'unsupported' for a ListerWatcher that says nothing")
	}
}

func TestQueueRefusesStaleListsThenDeclaresRegression(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Now())
	owner := &fakeOwner{}
	g := New(owner.options(Options{
		InitialFloor:          floorAt("100"),
		AcceptRegressionAfter: time.Minute,
		Clock:                 clock,
	}))
	q := g.NewQueue(toolscache.RealFIFOOptions{KeyFunction: toolscache.MetaNamespaceKeyFunc})

	if err := q.Replace(nil, "100"); err != nil {
		t.Fatalf("list at the floor refused: %v", err)
	}
	err := q.Replace(nil, "90")
	var se *reflector.StaleListError
	if !errors.Is(err, reflector.ErrStaleList) || !errors.As(err, &se) || se.ListResourceVersion != "90" || se.Floor != "100" || se.Refused != 1 {
		t.Fatalf("stale list: %v", err)
	}
	clock.Step(30 * time.Second)
	if err := q.Replace(nil, "90"); !errors.Is(err, reflector.ErrStaleList) {
		t.Fatalf("stale list within the bound accepted: %v", err)
	}
	clock.Step(31 * time.Second)
	if err := q.Replace(nil, "90"); err != nil {
		t.Fatalf("stale list past the bound refused: %v", err)
	}
	if _, _, n := owner.counts(); n != 1 {
		t.Fatalf("the Owner was told of %d regressing lists, want 1", n)
	}
	// Until the cache takes the declared list, its applied floor is the
	// history the server went back from: the watch after the list starts
	// from the list.
	if f := g.Floor().String(); f != "90" {
		t.Fatalf("Floor() = %s while the declared list waits in the queue, want 90", f)
	}
	// As FreshInformer does when it applies the two lists:
	a, b := g.TakeList(), g.TakeList()
	if r := b.Regression; a != (ListAdmission{}) || r == nil || r.Reason != reflector.RegressionStaleList || r.Refused != 2 || r.Since != 61*time.Second || r.ListResourceVersion != "90" || r.Floor != "100" {
		t.Fatalf("TakeList: %+v then %+v, want the list at 90 carrying its regression (refused twice over 61s)", a, b)
	}
	// The streak starts over: the next stale list (below the accepted 90)
	// is refused again.
	if err := q.Replace(nil, "80"); !errors.Is(err, reflector.ErrStaleList) {
		t.Fatalf("first stale list of a new streak: %v", err)
	}
	if s := g.Stats(); s.StaleListsRefused != 3 || s.Lists != 2 {
		t.Fatalf("stats %+v", s)
	}
	// A fresh list ends the streak; incomparable lists pass (plain informer).
	if err := q.Replace(nil, "101"); err != nil {
		t.Fatal(err)
	}
	if err := q.Replace(nil, "abc"); err != nil {
		t.Fatalf("incomparable list refused: %v", err)
	}
	q.Close()
}

func TestQueueAcceptsAnythingWithoutFloor(t *testing.T) {
	g := New(Options{})
	q := g.NewQueue(toolscache.RealFIFOOptions{KeyFunction: toolscache.MetaNamespaceKeyFunc})
	defer q.Close()
	if err := q.Replace(nil, "1"); err != nil {
		t.Fatal(err)
	}
}

// pendingWatchLW opens watches only once the test releases them.
type pendingWatchLW struct {
	recordingLW
	started chan struct{}
	release chan struct{}
	w       *watch.FakeWatcher
}

func (p *pendingWatchLW) Watch(o metav1.ListOptions) (watch.Interface, error) {
	close(p.started)
	<-p.release
	return p.w, nil
}

// A relist requested while a watch request is on its way (a slow connect,
// a proxy holding it) must not be lost: the watch that then opens would
// resume the old history, and the Reflector would never relist. It is
// stopped, and (with no queue to relist into here) the Reflector told 410
// Gone; the relist stays pending until the Reflector's list is queued.
func TestRelistRequestedWhileWatchPending(t *testing.T) {
	inner := &pendingWatchLW{started: make(chan struct{}), release: make(chan struct{}), w: watch.NewFake()}
	g := New(Options{InitialFloor: floorAt("100")})
	lw := g.ListerWatcher(inner).(toolscache.ListerWatcherWithContext)
	type result struct {
		w   watch.Interface
		err error
	}
	done := make(chan result, 1)
	go func() {
		w, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "100"})
		done <- result{w, err}
	}()
	<-inner.started
	g.RequestRelist()
	close(inner.release)
	r := <-done
	if r.err == nil || !apierrors.IsResourceExpired(r.err) {
		t.Fatalf("watch opened after a relist request: %v, %v; want 410 Gone", r.w, r.err)
	}
	if !inner.w.IsStopped() {
		t.Fatal("the watch opened meanwhile was not stopped")
	}
	if !g.RelistPending() {
		t.Fatal("relist no longer pending before its list is queued")
	}
}

// A requested relist stays pending until its list is queued, not only
// until its request starts: a probe that asked for it must not ask again
// while a large list is on its way.
func TestRelistPendingUntilListQueued(t *testing.T) {
	g := New(Options{InitialFloor: floorAt("100")})
	lw := g.ListerWatcher(&recordingLW{}).(toolscache.ListerWatcherWithContext)
	q := g.NewQueue(toolscache.RealFIFOOptions{KeyFunction: toolscache.MetaNamespaceKeyFunc})
	defer q.Close()
	g.RequestRelist()
	if !g.RelistPending() {
		t.Fatal("not pending once requested")
	}
	if _, err := lw.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "100"}); err != nil {
		t.Fatal(err)
	}
	if !g.RelistPending() {
		t.Fatal("not pending while its list is on its way")
	}
	if err := q.Replace(nil, "120"); err != nil {
		t.Fatal(err)
	}
	if g.RelistPending() {
		t.Fatal("still pending once the list is queued")
	}
}

// The Reflector's own relist by watch-list (after a 410, say) is a relist
// on its way too, until its initial events are queued: a quiet probe then
// has nothing to prove that the relist will not.
func TestRelistPendingWhileAWatchListStreams(t *testing.T) {
	g := New(Options{InitialFloor: floorAt("100")})
	lw := g.ListerWatcher(&recordingLW{}).(toolscache.ListerWatcherWithContext)
	q := g.NewQueue(toolscache.RealFIFOOptions{KeyFunction: toolscache.MetaNamespaceKeyFunc})
	defer q.Close()
	yes := true
	w, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "100", SendInitialEvents: &yes})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if !g.RelistPending() {
		t.Fatal("not pending while a watch-list streams its initial events")
	}
	if err := q.Replace(nil, "120"); err != nil {
		t.Fatal(err)
	}
	if g.RelistPending() {
		t.Fatal("still pending once the watch-list's initial events are queued")
	}
}

// gatedListLW holds each list until the test releases it; watches open at
// once.
type gatedListLW struct {
	started chan string // a list's resource version, as it starts
	release chan struct{}
	watches chan metav1.ListOptions
}

func (l *gatedListLW) List(o metav1.ListOptions) (runtime.Object, error) {
	l.started <- o.ResourceVersion
	<-l.release
	return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "120"}}, nil
}

func (l *gatedListLW) Watch(o metav1.ListOptions) (watch.Interface, error) {
	l.watches <- o
	return watch.NewFake(), nil
}

// A relist on the watch path is pending until its list is queued, as the
// Reflector's own is (a probe must not ask again meanwhile), and a relist
// asked for while one runs follows it before the watch is handed to the
// Reflector, however many times that happens: none is left pending behind
// an open watch, which would hold it for the watch's whole life.
func TestRelistOnTheWatchPathStaysPendingAndNoneIsLost(t *testing.T) {
	inner := &gatedListLW{started: make(chan string), release: make(chan struct{}), watches: make(chan metav1.ListOptions, 8)}
	g := New(Options{InitialFloor: floorAt("100")})
	lw := g.ListerWatcher(inner).(toolscache.ListerWatcherWithContext)
	q := g.NewQueue(toolscache.RealFIFOOptions{KeyFunction: toolscache.MetaNamespaceKeyFunc})
	defer q.Close()
	g.RequestRelist()
	done := make(chan error, 1)
	go func() {
		_, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "100"})
		done <- err
	}()
	for i := range 3 {
		<-inner.started
		if !g.RelistPending() {
			t.Fatalf("relist %d: not pending while its list is on its way", i+1)
		}
		if i < 2 {
			g.RequestRelist() // asked again meanwhile
		}
		inner.release <- struct{}{}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if g.RelistPending() {
		t.Fatal("a relist is still pending behind the watch handed to the Reflector")
	}
	if n := g.Stats().Lists; n != 3 {
		t.Fatalf("%d lists queued, want 3", n)
	}
}

// A stream the server ends well before its timeout (an apiserver shutting
// down ends its streams) begins an outage, as a failed request does; one
// that ends at its timeout, that the Guard stops for a relist, or whose
// informer stops, does not. The Reflector's next plain watch resumes the
// stream without a relist (behind a load balancer, another apiserver
// takes it), and once the watch is taken the Owner is told to check the
// server (Resumed); the outage lasts until it answers.
func TestStreamEndedEarlyIsBroken(t *testing.T) {
	for _, tc := range []struct {
		name   string
		after  time.Duration // from the stream's start to its end
		stop   func(w watch.Interface, g *Guard, cancel func())
		broken bool
	}{
		{"ended early", 10 * time.Second, func(w watch.Interface, _ *Guard, _ func()) { w.Stop() }, true},
		{"ended at its timeout", 299 * time.Second, func(w watch.Interface, _ *Guard, _ func()) { w.Stop() }, false},
		{"stopped for a relist", 10 * time.Second, func(w watch.Interface, g *Guard, _ func()) { g.RequestRelist(); w.Stop() }, false},
		{"the informer stops", 10 * time.Second, func(w watch.Interface, _ *Guard, cancel func()) { cancel(); w.Stop() }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(time.Now())
			owner := &fakeOwner{}
			g := New(owner.options(Options{InitialFloor: floorAt("100"), StreamClock: clk}))
			lw := g.ListerWatcher(&recordingLW{}).(toolscache.ListerWatcherWithContext)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			timeout := int64(300)
			w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "100", TimeoutSeconds: &timeout})
			if err != nil {
				t.Fatal(err)
			}
			clk.Step(tc.after)
			tc.stop(w, g, cancel)
			if broken, _, _ := owner.counts(); (broken == 1) != tc.broken {
				t.Fatalf("a Failure submitted %d times, want broken %v", broken, tc.broken)
			}
			if tc.name == "stopped for a relist" {
				return // the next watch relists: TestResumingAfterAFailedRequest
			}
			if _, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "100", TimeoutSeconds: &timeout}); err != nil {
				t.Fatal(err)
			}
			owner.mu.Lock()
			resumed, checked := owner.resumed, owner.checked
			owner.mu.Unlock()
			if resumed != 0 || (checked == 1) != tc.broken {
				t.Fatalf("Resuming called %d times, Resumed %d times: want the stream resumed without asking, and the server checked only after a break", resumed, checked)
			}
			if got := owner.trust.View().Outage; got != tc.broken {
				t.Fatalf("outage %v once the watch resumed, want it to last until the check answers (%v)", got, tc.broken)
			}
		})
	}
}

// After a failed request (the server may be down, and come back from a
// restored etcd), the Owner decides how the stream resumes: relisting
// first (a consistent read: the server reached now may be one restored
// behind the floor), or resuming the watch.
func TestResumingAfterAFailedRequest(t *testing.T) {
	for _, relist := range []bool{true, false} {
		t.Run(fmt.Sprintf("relist=%v", relist), func(t *testing.T) {
			owner := &fakeOwner{relist: relist}
			g := New(owner.options(Options{}))
			inner := &scriptWL{listRV: "120", failNext: apierrors.NewServiceUnavailable("shutting down")}
			lw := g.ListerWatcher(inner).(toolscache.ListerWatcherWithContext)
			q := g.NewQueue(toolscache.RealFIFOOptions{KeyFunction: toolscache.MetaNamespaceKeyFunc})
			defer q.Close()
			if err := q.Replace(nil, "100"); err != nil {
				t.Fatal(err)
			}
			if _, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "100"}); err == nil {
				t.Fatal("the watch request did not fail")
			}
			if _, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "100"}); err != nil {
				t.Fatal(err)
			}
			if _, resumed, _ := owner.counts(); resumed != 1 {
				t.Fatalf("Resuming called %d times after a failed request, want 1", resumed)
			}
			lists := len(inner.lists)
			if !relist {
				if lists != 0 || inner.watches[len(inner.watches)-1].ResourceVersion != "100" {
					t.Fatalf("%d lists, watch from %q: want the stream resumed at 100", lists, inner.watches[len(inner.watches)-1].ResourceVersion)
				}
				return
			}
			if lists != 1 || inner.lists[0].ResourceVersion != "" || inner.watches[len(inner.watches)-1].ResourceVersion != "120" {
				t.Fatalf("lists %+v, watch from %q: want one consistent list, the watch from its 120", inner.lists, inner.watches[len(inner.watches)-1].ResourceVersion)
			}
		})
	}
}

// After a failed request, an informer whose Reflector lists by watch-list
// relists the way client-go does after a 410: the resuming watch fails
// with one, unsent, and the Reflector's watch-list is a consistent read.
// One request once the server is back, where a relist on the watch path
// is a list and a watch.
func TestRelistAfterAFailedRequestIsTheReflectorsWatchList(t *testing.T) {
	owner := &fakeOwner{relist: true}
	g := New(owner.options(Options{InitialFloor: floorAt("100")}))
	inner := &scriptWL{listRV: "120"}
	lw := g.ListerWatcher(inner).(toolscache.ListerWatcherWithContext)
	q := g.NewQueue(toolscache.RealFIFOOptions{KeyFunction: toolscache.MetaNamespaceKeyFunc})
	defer q.Close()
	yes := true
	w, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "0", SendInitialEvents: &yes})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Replace(nil, "100"); err != nil {
		t.Fatal(err)
	}
	w.Stop()
	inner.failNext = apierrors.NewServiceUnavailable("shutting down")
	if _, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "100"}); err == nil {
		t.Fatal("the watch request did not fail")
	}
	watches := len(inner.watches)
	_, err = lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "100"})
	if !apierrors.IsResourceExpired(err) || len(inner.watches) != watches || len(inner.lists) != 0 {
		t.Fatalf("the resuming watch: %v, %d requests sent, %d lists: want a 410 sent nowhere", err, len(inner.watches)-watches, len(inner.lists))
	}
	if _, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "100", SendInitialEvents: &yes}); err != nil {
		t.Fatal(err)
	}
	if got := inner.watches[len(inner.watches)-1].ResourceVersion; got != "" {
		t.Fatalf("the Reflector's watch-list from %q, want a consistent read", got)
	}
}

// A failed request (not 410 Gone) makes the next list a consistent read:
// a server back from an etcd restored below the floor would answer one
// raised to the floor "Too large" for as long as its writes have not
// reached it. A 410 is a live server's answer: the relist is raised to
// the floor as usual.
func TestListAfterAFailedRequestIsConsistent(t *testing.T) {
	for _, tc := range []struct {
		err        error
		consistent bool
	}{
		{apierrors.NewServiceUnavailable("shutting down"), true},
		{apierrors.NewResourceExpired("too old resource version"), false},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			owner := &fakeOwner{}
			g := New(owner.options(Options{InitialFloor: floorAt("100")}))
			inner := &failingWatchLW{err: tc.err}
			lw := g.ListerWatcher(inner).(toolscache.ListerWatcherWithContext)
			q := g.NewQueue(toolscache.RealFIFOOptions{KeyFunction: toolscache.MetaNamespaceKeyFunc})
			defer q.Close()
			if err := q.Replace(nil, "100"); err != nil {
				t.Fatal(err)
			}
			if _, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "100"}); err == nil {
				t.Fatal("the watch did not fail")
			}
			if broken, _, _ := owner.counts(); broken != 1 {
				t.Fatalf("Broken called %d times, want 1", broken)
			}
			if _, err := lw.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "100"}); err != nil {
				t.Fatal(err)
			}
			if got := inner.lists[0].ResourceVersion == ""; got != tc.consistent {
				t.Fatalf("the next list %+v, want consistent %v", inner.lists[0], tc.consistent)
			}
			// What the informer learns when it applies the list: it
			// followed a failure (probes wait for a server just back; a
			// 410 too may come from an apiserver just restarted, whose
			// watch cache starts past the stream).
			if _, err := g.admitList("120", tc.consistent, false); err != nil {
				t.Fatal(err)
			}
			g.TakeList() // the test's own first list
			if a := g.TakeList(); !a.AfterFailure || a.Sent.IsZero() {
				t.Fatalf("admission %+v, want AfterFailure and the time it was sent", a)
			}
		})
	}
}

// failingWatchLW fails every watch with err (none when nil).
type failingWatchLW struct {
	recordingLW
	err error
}

func (f *failingWatchLW) Watch(o metav1.ListOptions) (watch.Interface, error) {
	if f.err == nil {
		return f.recordingLW.Watch(o)
	}
	f.watches = append(f.watches, o)
	return nil, f.err
}

// After a failed request, a watch-list the owner wants as a list
// (Options.ListAfterFailure) fails at once, unsent and uncounted, so that
// client-go's Reflector lists instead; the list is a consistent read.
// Before any failure, and for an owner that does not want it, the
// watch-list goes out.
func TestWatchListAfterAFailureBecomesAList(t *testing.T) {
	for _, large := range []bool{true, false} {
		t.Run(fmt.Sprint("large=", large), func(t *testing.T) {
			g := New((&fakeOwner{}).options(Options{ListAfterFailure: func() bool { return large }}))
			inner := &failingWatchLW{err: apierrors.NewServiceUnavailable("the apiserver is down")}
			lw := g.ListerWatcher(inner).(toolscache.ListerWatcherWithContext)
			q := g.NewQueue(toolscache.RealFIFOOptions{KeyFunction: toolscache.MetaNamespaceKeyFunc})
			defer q.Close()
			ctx := context.Background()
			watchList := metav1.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true}
			if _, err := lw.WatchWithContext(ctx, watchList); errors.Is(err, errListInstead) {
				t.Fatal("a watch-list before any list became a list")
			}
			if err := q.Replace(nil, "100"); err != nil {
				t.Fatal(err)
			}
			inner.err = apierrors.NewServiceUnavailable("the apiserver is down")
			if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "100"}); err == nil {
				t.Fatal("the watch did not fail")
			}
			sent, counted := len(inner.watches), g.Stats().Watches
			_, err := lw.WatchWithContext(ctx, watchList)
			if got := errors.Is(err, errListInstead); got != large {
				t.Fatalf("watch-list after a failure = %v, want a list instead: %v", err, large)
			}
			if large && (len(inner.watches) != sent || g.Stats().Watches != counted) {
				t.Fatal("the watch-list replaced by a list was sent or counted")
			}
			if !large && len(inner.watches) != sent+1 {
				t.Fatal("the watch-list was not sent")
			}
			if large {
				if _, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "100"}); err != nil {
					t.Fatal(err)
				}
				if o := inner.lists[len(inner.lists)-1]; o.ResourceVersion != "" {
					t.Fatalf("the list instead asked %+v, want a consistent read", o)
				}
			}
		})
	}
}

func TestStaleListErrorsAreNotReportedAsFailures(t *testing.T) {
	var reported []error
	record := func(_ context.Context, _ *toolscache.Reflector, err error) { reported = append(reported, err) }
	// client-go's default handler dereferences the Reflector: with nil it
	// panics unless the stale list is skipped.
	g := New(Options{})
	g.WatchErrorHandler(nil)(context.Background(), nil, &reflector.StaleListError{ListResourceVersion: "1", Floor: "2"})
	g.WatchErrorHandler(record)(context.Background(), nil, errors.New("boom"))
	if len(reported) != 1 {
		t.Fatalf("a user's handler must get every error: %v", reported)
	}
}
