package e2e

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/integration/controlplane"
	"github.com/freshinformer/freshinformer/integration/testenv"
)

// lagPhase is one way of making the informers' replica lag.
type lagPhase struct {
	name          string
	pause, resume func(replica int) error
}

// lagResult is one phase's row of scenario 2.
type lagResult struct {
	phase        string
	replica      int           // the replica holding the informers' watches
	writes       int           // made while it lagged, through another replica
	plainStale   int           // client-go's lister right after the write
	early        int           // waits that returned nil before our lister held the write
	failed       []string      // waits for committed writes that returned an error
	beforeResume int           // waits that returned nil before the resume (only possible if another route proved it)
	catchUp      time.Duration // resume to the last wait's return
	unreachable  string        // outcome of a wait for an RV no server has reached
	regressions  uint64        // declared while lagging (none is expected: nothing went back)
	staleRefused uint64
	watches      uint64
	waits        latencies // write returned to wait returned nil
	plainShows   latencies // write returned to client-go's lister holding it
	writeErrs    []string  // writes that failed (tolerated: a lost etcd leader)
}

func (r lagResult) row() []string {
	return []string{r.phase, strconv.Itoa(r.replica), strconv.Itoa(r.writes), pctOf(r.plainStale, r.writes),
		strconv.Itoa(r.early), strconv.Itoa(len(r.failed)), strconv.Itoa(r.beforeResume), ms(r.catchUp), r.unreachable,
		strconv.FormatUint(r.regressions, 10), strconv.FormatUint(r.staleRefused, 10), strconv.FormatUint(r.watches, 10)}
}

var lagHeader = []string{"informers' replica made to lag by", "replica", "writes meanwhile (other replica)", "plain lister stale", "early wake-ups", "failed waits", "nil before resume", "resume to last wait", "wait for an unreached RV", "regressions declared", "stale lists refused", "watch requests"}

// testHALaggingReplica is scenario 2 of docs/ha.md: the kube-apiserver that
// holds the informers' watches (client-go's factory and ours, one
// connection through HAProxy) falls behind while writes go through another
// replica: first its etcd member is frozen (SIGSTOP; the replica keeps
// serving from a watch cache that no longer moves, and HAProxy marks it
// down but keeps the open connection), then the replica itself is frozen.
// No wait returns before our lister holds its write; every wait returns
// once the replica catches up; a wait for a resource version no server has
// reached fails with freshness.ErrTooLargeResourceVersion, and none for a
// committed write does; no regression is declared (nothing went back).
func testHALaggingReplica(t *testing.T, h *controlplane.HAControlPlane) {
	pause := 3 * time.Second
	if haLong() {
		pause = 5 * time.Second
	}
	ctx := testenv.Context(t, 8*time.Minute)

	// The informers' connection, then a writer's on another replica.
	var lagCS kubernetes.Interface
	lagAt := -1
	for range 6 {
		if cs, i := haClient(t, ctx, h); i >= 0 {
			lagCS, lagAt = cs, i
			break
		}
	}
	if lagCS == nil {
		t.Fatal("no connection through HAProxy could be placed on a replica")
	}
	writer, writerAt := writerAvoiding(t, ctx, h, lagAt)
	sb := startSideBySide(t, ctx, lagCS, writer, "ha-lagging-", nil)
	ns, plainLister, oursLister, inf := sb.ns, sb.plainLister, sb.oursLister, sb.inf
	t.Logf("informers' connection on kube-apiserver %d, writer on %d", lagAt, writerAt)

	phases := []lagPhase{
		{"its etcd member frozen (SIGSTOP)",
			func(r int) error { return h.PauseEtcdMember(r % h.EtcdMembers()) },
			func(r int) error { return h.ResumeEtcdMember(r % h.EtcdMembers()) }},
		{"the replica frozen (SIGSTOP)", h.PauseAPIServer, h.ResumeAPIServer},
	}
	var rows [][]string
	for _, ph := range phases {
		// The informers' connection may have moved (a cut connection is
		// redialled through the load balancer): follow it.
		at, err := h.WhichAPIServer(ctx, lagCS.CoreV1().RESTClient())
		if err != nil || at < 0 {
			t.Fatalf("%s: which replica holds the informers' connection: %d, %v", ph.name, at, err)
		}
		if at == writerAt {
			writer, writerAt = writerAvoiding(t, ctx, h, at)
		}
		before := inf.Stats()
		res := runLagPhase(t, ctx, h, ph, at, writer, ns, pause, plainLister, oursLister, inf, nil)
		after := inf.Stats()
		res.regressions = after.Regressions - before.Regressions
		res.staleRefused = after.StaleListsRefused - before.StaleListsRefused
		res.watches = after.Watches - before.Watches
		rows = append(rows, res.row())
		sb.check(t, ph.name, res)
		if b, err := h.Backends(ctx); err == nil {
			t.Logf("%s: HAProxy's view of the replicas after the phase: %v", ph.name, b)
		}
	}
	t.Logf("scenario 2, a lagging replica (paused %v per phase, writes every 100 ms):%s", pause, table(lagHeader, rows))
}

// unreachedBound is how long after the fault a wait for an unreached
// resource version may take to fail.
const unreachedBound = 30 * time.Second

// unreachedTimedOut is the outcome of a wait for an unreached resource
// version that waited out unreachedBound.
const unreachedTimedOut = "timed out"

// writeAt is a write's resource version and when it returned.
type writeAt struct {
	rv string
	at time.Time
}

// plainArrivals records when client-go's informer delivered each resource
// version of a ConfigMap: its handlers run once its lister holds it.
type plainArrivals struct {
	mu sync.Mutex
	at map[string]time.Time
}

func watchPlain(t *testing.T, inf toolscache.SharedIndexInformer) *plainArrivals {
	t.Helper()
	p := &plainArrivals{at: map[string]time.Time{}}
	note := func(obj any) {
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			now := time.Now()
			p.mu.Lock()
			p.at[cm.ResourceVersion] = now
			p.mu.Unlock()
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: note, UpdateFunc: func(_, obj any) { note(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	return p
}

// since returns, per write, how long after it returned client-go's lister
// held it (zero if before), waiting up to 30 s for the last ones.
func (p *plainArrivals) since(ctx context.Context, writes []writeAt) latencies {
	deadline := time.Now().Add(30 * time.Second)
	var out latencies
	for _, w := range writes {
		for {
			p.mu.Lock()
			at, ok := p.at[w.rv]
			p.mu.Unlock()
			if ok {
				out = append(out, max(at.Sub(w.at), 0))
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return out
}

func toAny[K comparable](m map[K]bool) map[any]bool {
	out := make(map[any]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// writerAvoiding returns a client whose connection landed on a replica
// other than avoid.
func writerAvoiding(t *testing.T, ctx context.Context, h *controlplane.HAControlPlane, avoid int) (kubernetes.Interface, int) {
	t.Helper()
	for range 8 {
		if cs, i := haClient(t, ctx, h); i >= 0 && i != avoid {
			return cs, i
		}
	}
	t.Fatalf("no connection through HAProxy landed on a replica other than %d", avoid)
	return nil, -1
}

// runLagPhase freezes the informers' replica (ph.pause) for pause while
// writing through writer every 100 ms, each write waited for by a
// goroutine, then resumes it and waits for every waiter.
func runLagPhase(t *testing.T, ctx context.Context, h *controlplane.HAControlPlane, ph lagPhase, replica int,
	writer kubernetes.Interface, ns string, pause time.Duration,
	plainLister, oursLister corelisters.ConfigMapLister, inf *cache.FreshInformer, arrivals *plainArrivals) lagResult {
	t.Helper()
	res := lagResult{phase: ph.name, replica: replica}
	var mu sync.Mutex
	var resumedAt time.Time
	var lastReturn time.Time
	var wg sync.WaitGroup
	var written []writeAt

	rev, err := h.EtcdRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	unreached := strconv.FormatInt(rev+1_000_000, 10)

	if err := ph.pause(replica); err != nil {
		t.Fatalf("%s: %v", ph.name, err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = ph.resume(replica)
		}
	}()
	pausedAt := time.Now()

	unreachedDone := make(chan string, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, pause+unreachedBound)
		defer cancel()
		err := inf.WaitForFreshness(wctx, unreached)
		switch {
		case errors.Is(err, freshness.ErrTooLargeResourceVersion):
			unreachedDone <- "ErrTooLargeResourceVersion"
		case err == nil:
			unreachedDone <- "nil (early)"
		case errors.Is(err, context.DeadlineExceeded) && wctx.Err() != nil && ctx.Err() == nil:
			unreachedDone <- unreachedTimedOut
		default:
			unreachedDone <- err.Error()
		}
	}()

	// Writes for pause; past it, until five have succeeded (a lost etcd
	// leader fails the first ones), for at most 30 s more.
	for i := 0; time.Since(pausedAt) < pause || (res.writes < 5 && time.Since(pausedAt) < pause+30*time.Second); i++ {
		name := "lag-" + strconv.Itoa(i%5)
		wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		out, err := writer.CoreV1().ConfigMaps(ns).Update(wctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Data:       map[string]string{"write": strconv.Itoa(i)},
		}, metav1.UpdateOptions{})
		cancel()
		if err != nil {
			res.writeErrs = append(res.writeErrs, fmt.Sprintf("write %d: %v", i, err))
			time.Sleep(100 * time.Millisecond)
			continue
		}
		rv := out.ResourceVersion
		wroteAt := time.Now()
		written = append(written, writeAt{rv, wroteAt})
		mu.Lock()
		res.writes++
		if staleIn(plainLister, ns, name, rv) {
			res.plainStale++
		}
		mu.Unlock()
		wg.Go(func() {
			wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
			defer cancel()
			err := inf.WaitForFreshness(wctx, rv)
			now := time.Now()
			stale := err == nil && staleIn(oursLister, ns, name, rv)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				res.failed = append(res.failed, fmt.Sprintf("rv %s: %v", rv, err))
			case stale:
				res.early++
			case resumedAt.IsZero():
				res.beforeResume++
			}
			if err == nil {
				res.waits = append(res.waits, now.Sub(wroteAt))
			}
			if now.After(lastReturn) {
				lastReturn = now
			}
		})
		time.Sleep(100 * time.Millisecond)
	}

	mu.Lock()
	resumedAt = time.Now()
	mu.Unlock()
	if err := ph.resume(replica); err != nil {
		t.Fatalf("%s: resuming: %v", ph.name, err)
	}
	resumed = true
	wg.Wait()
	select {
	case res.unreachable = <-unreachedDone:
	case <-ctx.Done():
		t.Fatalf("%s: the wait for an unreached resource version did not end", ph.name)
	}
	if arrivals != nil {
		res.plainShows = arrivals.since(ctx, written)
	}
	mu.Lock()
	if lastReturn.After(resumedAt) {
		res.catchUp = lastReturn.Sub(resumedAt)
	}
	mu.Unlock()
	return res
}
