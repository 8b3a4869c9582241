package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/integration/controlplane"
	"github.com/freshinformer/freshinformer/integration/testenv"
)

// The window after an etcd restore without --bump-revision: the
// restored server hands out resource versions the informer has already
// applied. These tests make writes in that window, wait for them with bare
// WaitForFreshness calls (nothing recorded with RecordWrite: an RV learned
// elsewhere), and check the indexer at the moment each wait returns nil.

// windowWaits writes ConfigMaps through the rig's writer without telling
// the informer (no RecordWrite) and waits for each write with a bare
// WaitForFreshness. A wait that returns nil must find the write in the
// indexer right then (content at least as new, resource version at least
// the write's): no excuse for a regression declared meanwhile, the writes
// here are not lost, the server keeps them.
type windowWaits struct {
	r       *faultRig
	timeout time.Duration
	wg      sync.WaitGroup

	mu    sync.Mutex
	n     int
	fresh int
	early []string
	errs  []string
}

// write sets key's seq to the rig's next sequence number (creating the key
// when missing), starts a waiter for the write and returns its resource
// version.
func (w *windowWaits) write(ctx context.Context, key string) (freshness.RV, error) {
	r := w.r
	n := r.seq.Add(1)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cms := r.writer.CoreV1().ConfigMaps(r.ns)
	obj, err := cms.Patch(wctx, key, types.MergePatchType, fmt.Appendf(nil, `{"data":{"seq":%q}}`, strconv.FormatInt(n, 10)), metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		obj, err = cms.Create(wctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: key}, Data: map[string]string{"seq": strconv.FormatInt(n, 10)}}, metav1.CreateOptions{})
	}
	if err != nil {
		return freshness.RV{}, err
	}
	rv, err := freshness.ParseRV(obj.ResourceVersion)
	if err != nil {
		return freshness.RV{}, err
	}
	w.mu.Lock()
	w.n++
	w.mu.Unlock()
	w.wg.Add(1)
	go w.wait(ctx, key, n, obj.ResourceVersion)
	return rv, nil
}

func (w *windowWaits) wait(ctx context.Context, key string, n int64, rv string) {
	defer w.wg.Done()
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	began := time.Now()
	err := w.r.inf.WaitForFreshness(ctx, rv)
	took := time.Since(began)
	// The indexer right when the wait returned.
	obj, ok, _ := w.r.inf.GetIndexer().GetByKey(w.r.ns + "/" + key)
	at := w.r.inf.LastObservedResourceVersion()
	regs := w.r.inf.Stats().Regressions
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.errs = append(w.errs, fmt.Sprintf("%s seq %d rv %s: %v after %v", key, n, rv, err, took.Round(time.Millisecond)))
		return
	}
	held := "nothing"
	if ok {
		cm := obj.(*corev1.ConfigMap)
		c, cerr := freshness.Compare(cm.ResourceVersion, rv)
		if seqOf(cm) >= n && cerr == nil && c >= 0 {
			w.fresh++
			return
		}
		held = fmt.Sprintf("seq %d rv %s", seqOf(cm), cm.ResourceVersion)
	}
	w.early = append(w.early, fmt.Sprintf("%s seq %d rv %s: nil after %v, indexer holds %s (informer at %s, regressions declared %d)",
		key, n, rv, took.Round(time.Microsecond), held, at, regs))
}

// check waits for every waiter and reports the early ones.
func (w *windowWaits) check(t *testing.T) {
	t.Helper()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("window writes %d: waits fresh %d, early %d, failed %d", w.n, w.fresh, len(w.early), len(w.errs))
	if len(w.early) > 0 {
		t.Errorf("WaitForFreshness returned nil while the indexer lacked the write, %d of %d times:\n%s", len(w.early), w.n, firstLines(w.early, 20))
	}
	if len(w.errs) > 0 {
		t.Errorf("WaitForFreshness failed for %d of %d writes:\n%s", len(w.errs), w.n, firstLines(w.errs, 10))
	}
	if w.n == 0 {
		t.Errorf("no write in the window")
	}
}

// reconnectGate is the informer's HTTP transport: once armed, after one of
// the Reflector's requests has failed (the apiserver is down), it
// refuses the Reflector's next requests (watches and lists, not the
// informer's probes) with "connection refused", as if the apiserver were
// still unreachable from the informer, until released: the informer has
// seen its watch fail and comes back late (client-go backs off and retries
// the watch from where it was), after the restored server has moved on.
// It refuses rather than holds: a request held in flight would be a watch
// the informer started before what the test does next, which is not the
// order under test.
type reconnectGate struct {
	mu       sync.Mutex
	armed    bool
	failed   []string // the Reflector's requests that failed while armed
	refused  []string // requests the gate refused
	afterRel []string // the Reflector's requests after release
}

func (g *reconnectGate) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = true
}

func (g *reconnectGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = false
}

// exercised fails the test unless one of the Reflector's requests failed
// while armed: otherwise nothing kept the informer out of the window.
func (g *reconnectGate) exercised(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.failed) == 0 {
		t.Errorf("no list or watch of the informer failed while the apiserver was down: the test did not exercise the window")
	}
}

func (g *reconnectGate) report() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return fmt.Sprintf("failed while armed: %q; refused: %q; after release: %q", g.failed, g.refused, g.afterRel)
}

// refusedByGate is what client-go sees when the apiserver's port is
// closed: its Reflector backs off and retries a watch that failed so.
var refusedByGate = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

// reflectorRequest tells the Reflector's list and watch requests from the
// informer's probes: the Reflector watches for minutes (or streams a
// watch-list) and lists in pages of 500 (client-go's pager); the probes
// list with other limits (1 for the server's resource version) and watch
// for seconds.
func reflectorRequest(req *http.Request) (what string, ok bool) {
	if req.Method != http.MethodGet || !strings.HasSuffix(req.URL.Path, "/configmaps") {
		return "", false
	}
	q := req.URL.Query()
	if isWatch(req) {
		if q.Get("sendInitialEvents") == "true" {
			return "watch-list rv=" + q.Get("resourceVersion"), true
		}
		if s, _ := strconv.Atoi(q.Get("timeoutSeconds")); s >= 60 {
			return "watch rv=" + q.Get("resourceVersion"), true
		}
		return "", false
	}
	if l := q.Get("limit"); l != "" && l != "500" {
		return "", false
	}
	return "list rv=" + q.Get("resourceVersion"), true
}

type gateTransport struct {
	g  *reconnectGate
	rt http.RoundTripper
}

func (t gateTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	g := t.g
	what, refl := reflectorRequest(req)
	if refl {
		g.mu.Lock()
		refuse := g.armed && len(g.failed) > 0
		if refuse {
			g.refused = append(g.refused, what)
		} else if !g.armed && len(g.refused) > 0 {
			g.afterRel = append(g.afterRel, what)
		}
		g.mu.Unlock()
		if refuse {
			if req.Body != nil {
				_ = req.Body.Close()
			}
			return nil, refusedByGate
		}
	}
	resp, err := t.rt.RoundTrip(req)
	// A list fails so too: after a stream the server ended early, the
	// informer relists before it watches again.
	if refl && (err != nil || resp.StatusCode >= 400 && resp.StatusCode != http.StatusGone) {
		g.mu.Lock()
		if g.armed {
			why := "error"
			if err != nil {
				why = err.Error()
			} else {
				why = resp.Status
			}
			g.failed = append(g.failed, what+": "+why)
		}
		g.mu.Unlock()
	}
	return resp, err
}

// gatedClient is a clientset for the informer whose Reflector requests pass
// through g, to the control plane's apiserver or, with cfg, to another
// endpoint (the proxy).
func gatedClient(t *testing.T, cfg *rest.Config, g *reconnectGate) kubernetes.Interface {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 2000
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return gateTransport{g: g, rt: rt} })
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// restoreWindowSetup writes three rounds, snapshots etcd, writes three
// more rounds (with three keys the snapshot lacks) and returns the
// snapshot and the informer's resource version before the restore (the
// floor).
func restoreWindowSetup(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, r *faultRig) (controlplane.Snapshot, freshness.RV) {
	t.Helper()
	for range 3 {
		r.round(restoreKeys)
	}
	r.settle()
	snap, err := cp.SnapshotEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		r.round(restoreKeys + 3)
	}
	r.settle()
	floor, err := freshness.ParseRV(r.inf.LastObservedResourceVersion())
	if err != nil {
		t.Fatal(err)
	}
	return snap, floor
}

// watchDeclared notes when the rig's informer declares its first
// regression; the function it returns tells that moment after from (or
// "none").
func watchDeclared(ctx context.Context, r *faultRig) func(from time.Time) string {
	var mu sync.Mutex
	var at time.Time
	go func() {
		for ctx.Err() == nil && r.regressions() == 0 {
			time.Sleep(2 * time.Millisecond)
		}
		mu.Lock()
		at = time.Now()
		mu.Unlock()
	}()
	return func(from time.Time) string {
		mu.Lock()
		defer mu.Unlock()
		if at.IsZero() || r.regressions() == 0 {
			return "none"
		}
		return fmt.Sprintf("%v after", at.Sub(from).Round(time.Millisecond))
	}
}

// TestRestoreWindowOutrunByWrites: etcd is restored
// without --bump-revision, and new writes carry the restored server's
// revision past the informer's old floor before the informer's watch comes
// back (its Reflector saw its watch fail while the apiserver was down, and
// its retries are refused until the writes are done). A consistent read of the server's
// revision alone then finds the server at or past the floor, although the
// keys the informer cached went back (the snapshot's content, keys created
// after the snapshot gone) and the writes up to the floor reused resource
// versions the informer had applied. Expected: a regression is declared
// (KeysWentBack or ServerBehind), no wait returns nil before the indexer
// holds its write, and the cache ends equal to the server's state.
func TestRestoreWindowOutrunByWrites(t *testing.T) {
	began := time.Now()
	cp := testenv.NewPlane(t, controlplane.Options{})
	cs, err := cp.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t, 2*time.Minute)
	ns, err := cp.CreateNamespace(ctx, "restore-outrun-")
	if err != nil {
		t.Fatal(err)
	}
	gate := &reconnectGate{}
	t.Cleanup(gate.release)
	r := newFaultRig(t, ctx, cs, ns, rigOptions{informerClient: gatedClient(t, cp.Config(), gate), unrecordedWrites: true})
	snap, floor := restoreWindowSetup(t, ctx, cp, r)

	gate.arm()
	restoreBegan := time.Now()
	declaredAt := watchDeclared(ctx, r)
	if err := cp.RestoreEtcd(ctx, snap, controlplane.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	rev, err := cp.EtcdRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restored snapshot at revision %d in %v; informer floor %s; etcd now at %d; gate: %s",
		snap.Revision, time.Since(restoreBegan).Round(time.Millisecond), floor, rev, gate.report())

	// Writes past the old floor, while the informer's Reflector is kept out.
	w := &windowWaits{r: r, timeout: 30 * time.Second}
	target := mustUint(t, floor.String()) + 6 // a margin past the floor
	var last uint64
	for i := 0; last < target; i++ {
		if i > 1000 {
			t.Fatalf("1000 writes after the restore did not reach %d (last at %d)", target, last)
		}
		rv, err := w.write(ctx, r.keyName(i%restoreKeys))
		if err != nil {
			t.Fatalf("write %d after the restore: %v", i, err)
		}
		last = mustUint(t, rv.String())
	}
	past := strconv.FormatUint(last, 10)
	t.Logf("wrote %d ConfigMaps after the restore, the last at %s (floor %s); gate: %s", w.n, past, floor, gate.report())
	gate.exercised(t)
	regsBefore := r.inf.Stats().Regressions
	released := time.Now()
	gate.release()

	w.check(t)
	r.converge(20 * time.Second)
	t.Logf("gate: %s; regressions declared before the release %d, first one %s; stats %+v; probes %+v",
		gate.report(), regsBefore, declaredAt(released), r.inf.Stats(), r.inf.ProbeStats())
	r.verify(1)
	t.Logf("took %v", time.Since(began).Round(time.Millisecond))
}

// TestRestoreWindowBehindProxy: the informer reaches
// the apiserver through a proxy; the apiserver is stopped, etcd restored
// without --bump-revision, the apiserver started again, and right after
// it is back ConfigMaps are written (updates of cached keys and new keys)
// and waited for with bare WaitForFreshness calls, nothing recorded: the
// writes' resource versions are below the informer's old floor, so today
// such a wait returned nil at once while the cache did not hold the write.
// Expected: no such wait returns nil unless the indexer holds the write
// then; a regression is declared; the cache ends equal to the server's
// state.
func TestRestoreWindowBehindProxy(t *testing.T) {
	began := time.Now()
	cp := testenv.NewPlane(t, controlplane.Options{})
	cs, err := cp.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t, 2*time.Minute)
	ns, err := cp.CreateNamespace(ctx, "restore-proxy-")
	if err != nil {
		t.Fatal(err)
	}
	proxy := newLaggingProxy(t, cp.Config())
	// The informer's Reflector reaches the proxy through a gate that
	// refuses its requests, once one has failed, until the writes below
	// are made: the same order as without the gate (the writes take some
	// 20 ms; without it the informer declared the restore 1.8 to 3.5 s
	// after RestoreEtcd returned), made certain.
	gate := &reconnectGate{}
	t.Cleanup(gate.release)
	informerClient := gatedClient(t, &rest.Config{Host: proxy.srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}, gate)
	r := newFaultRig(t, ctx, cs, ns, rigOptions{informerClient: informerClient, unrecordedWrites: true})
	snap, floor := restoreWindowSetup(t, ctx, cp, r)

	gate.arm()
	restoreBegan := time.Now()
	declaredAt := watchDeclared(ctx, r)
	if err := cp.RestoreEtcd(ctx, snap, controlplane.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	regsAtReturn := r.inf.Stats().Regressions
	// Right after the apiserver is back: updates of cached keys and keys
	// the informer never saw, at resource versions below its floor.
	w := &windowWaits{r: r, timeout: 40 * time.Second}
	var rvs []string
	for i := range 6 {
		key := r.keyName(i / 2)
		if i%2 == 1 {
			key = fmt.Sprintf("w-%02d", i/2)
		}
		rv, err := w.write(ctx, key)
		if err != nil {
			t.Fatalf("write %s after the restore: %v", key, err)
		}
		rvs = append(rvs, rv.String())
	}
	t.Logf("restored snapshot at revision %d (RestoreEtcd took %v); informer floor %s; regressions declared when it returned %d; wrote at %v within %v of its return; gate: %s",
		snap.Revision, back.Sub(restoreBegan).Round(time.Millisecond), floor, regsAtReturn, rvs, time.Since(back).Round(time.Millisecond), gate.report())
	gate.exercised(t)
	gate.release()

	w.check(t)
	// Wait for the informer to settle on the restored server before the
	// last round, then converge.
	for end := time.Now().Add(20 * time.Second); r.regressions() == 0 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("regressions declared %d, the first %s (RestoreEtcd returned at %s)", r.regressions(), declaredAt(restoreBegan), back.Sub(restoreBegan).Round(time.Millisecond))
	r.round(restoreKeys)
	r.converge(20 * time.Second)
	t.Logf("stats %+v; probes %+v", r.inf.Stats(), r.inf.ProbeStats())
	r.verify(1)
	t.Logf("took %v", time.Since(began).Round(time.Millisecond))
}
