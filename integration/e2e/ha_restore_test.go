package e2e

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/integration/controlplane"
	"github.com/freshinformer/freshinformer/integration/testenv"
)

var restoreHeader = []string{"restore", "snapshot at", "etcd after", "apiservers down", "regressions declared", "declared, from RestoreEtcd's return",
	"writes (failed)", "early wake-ups", "failed waits", "waits for lost writes at once: fresh / nil, declared / too large / early", "the same 15 s later",
	"our cache = server at the end", "plain: keys gone back silently", "plain: keys deleted", "plain: stale keys before new writes", "plain: stale keys at the end"}

// haRestoreWarmup is how long the informers are left after the restore,
// before anything writes again: the restored, older state is what they
// list (as TestEtcdRestore), and client-go's lister is compared with the
// restored server at its end.
const haRestoreWarmup = 15 * time.Second

// testHAEtcdRestore is scenario 5 of docs/ha.md: the etcd cluster is
// restored from a snapshot behind the load balancer, the way an operator
// does (every kube-apiserver stopped, every member restored with etcdutl
// and the cluster's flags, the members started, then the kube-apiservers;
// HAProxy stays up). The snapshot is taken while writers and both
// informers run; more writes follow it (newer content of every key, three
// keys the snapshot lacks), all lost by the restore. Our informer (the
// fault rig's: every write recorded as read-your-writes does, and waited
// for) and client-go's factory watch through one connection through
// HAProxy; writes go through another.
//
// Requirements: the restore is declared (exactly one regression, as on
// one server), no wait returns nil before the indexer holds its write
// unless a regression was declared after the write (the rig's definition
// of early, as in restore_test.go), including waits started after the
// restore for the lost writes' resource versions; no cached key goes back
// silently; the cache ends equal to the server's state. What client-go's
// lister shows is reported.
func testHAEtcdRestore(t *testing.T, h *controlplane.HAControlPlane, name string, opts controlplane.RestoreOptions) {
	ctx := testenv.Context(t, 8*time.Minute)
	watchCS, watchAt := haClient(t, ctx, h)
	writer, writerAt := writerAvoiding(t, ctx, h, watchAt)
	nsObj, err := writer.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ha-restore-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns := nsObj.Name
	r := newFaultRig(t, ctx, writer, ns, rigOptions{informerClient: watchCS})
	plain := startPlainView(t, ctx, watchCS, ns)
	t.Logf("informers' connection on kube-apiserver %d, writer on %d", watchAt, writerAt)

	for range 3 {
		r.round(restoreKeys)
	}
	r.settle()
	// The snapshot while writers and the informers run.
	stopWriters := r.runWriters(2, restoreKeys, 20*time.Millisecond)
	time.Sleep(time.Second)
	snap, err := h.SnapshotEtcd(ctx)
	if err != nil {
		stopWriters()
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	stopWriters()
	// Lost by the restore: newer content of every key, and keys the
	// snapshot lacks.
	for range 3 {
		r.round(restoreKeys + 3)
	}
	r.settle()
	before := serverState(t, ctx, writer, ns)
	floor := r.inf.LastObservedResourceVersion()
	regsBefore := r.regressions()

	began := time.Now()
	declaredAt := watchDeclared(ctx, r)
	if err := h.RestoreEtcd(ctx, snap, opts); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	rev, err := h.EtcdRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: restored the snapshot taken at revision %d in %v (apiservers down meanwhile); informer was at %s; etcd now at %d",
		name, snap.Revision, back.Sub(began).Round(time.Millisecond), floor, rev)

	// The writes the restore lost, and a waiter for each: a reconciler
	// that wrote before the restore waits for its write's resource
	// version after it, right when the apiservers are back (the informer
	// may not have relisted yet), and again once it has had time to.
	restored := serverState(t, ctx, writer, ns)
	waitLost := func() *lostWaits {
		l := &lostWaits{r: r, regsAt: regsBefore}
		for key, b := range before {
			if a, ok := restored[key]; !ok || a.seq < b.seq {
				l.start(ctx, key, b.seq, b.rv)
			}
		}
		return l
	}
	lostAtOnce := waitLost()
	if lostAtOnce.n == 0 {
		t.Fatalf("%s: the restore lost no write: the test did not exercise one", name)
	}
	time.Sleep(haRestoreWarmup)
	plainStaleBefore := plain.stale(t, ctx, writer)
	lostLater := waitLost()

	// Writes after the restore: with no bump their resource versions are
	// ones the informers have already seen.
	stopWriters = r.runWriters(2, restoreKeys, 20*time.Millisecond)
	time.Sleep(8 * time.Second)
	stopWriters()
	r.round(restoreKeys)
	r.converge(90 * time.Second)
	lostAtOnce.wait()
	lostLater.wait()
	declared := declaredAt(back)
	r.verify(1)
	if r.wentBack() == 0 {
		t.Errorf("%s: no cached key went back across the restore: the test did not exercise one", name)
	}
	lostAtOnce.check(t, "right after the restore")
	lostLater.check(t, fmt.Sprintf("%v after the restore", haRestoreWarmup))
	ourConverged := "yes"
	if d := r.diff(); d != "" {
		ourConverged = "no"
	}
	// Client-go's lister, given as long to catch up as ours had.
	var plainStaleEnd []string
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		if plainStaleEnd = plain.stale(t, ctx, writer); len(plainStaleEnd) == 0 || time.Now().After(end) {
			break
		}
	}
	plainBack, plainDeleted := plain.counts()

	r.mu.Lock()
	var reasons []string
	for _, d := range r.declared {
		reasons = append(reasons, fmt.Sprintf("%s (%d keys, %d writes lost)", d.Reason, d.Keys, d.WritesLost))
	}
	writes, writeErrs, early, waitErrs := r.writes, r.writeErr, len(r.early), len(r.waitErrs)
	r.mu.Unlock()
	row := []string{name, strconv.FormatInt(snap.Revision, 10), strconv.FormatInt(rev, 10), back.Sub(began).Round(100 * time.Millisecond).String(),
		strings.Join(reasons, ", "), declared,
		fmt.Sprintf("%d (%d)", writes, writeErrs), strconv.Itoa(early + len(lostAtOnce.early) + len(lostLater.early)), strconv.Itoa(waitErrs),
		lostAtOnce.cell(), lostLater.cell(),
		ourConverged, strconv.Itoa(plainBack), strconv.Itoa(plainDeleted),
		fmt.Sprintf("%d (the server has %d)", len(plainStaleBefore), len(restored)), strconv.Itoa(len(plainStaleEnd))}
	t.Logf("scenario 5, %s: client-go's lister %d s after the restore: %s; at the end: %s", name, int(haRestoreWarmup.Seconds()),
		firstLines(plainStaleBefore, 8), firstLines(plainStaleEnd, 8))
	t.Logf("scenario 5, an etcd cluster restore behind the load balancer:%s", table(restoreHeader, [][]string{row}))
}

// keyState is one ConfigMap's state on the server.
type keyState struct {
	seq int64
	rv  string
}

// serverState lists ns's ConfigMaps with a consistent read.
func serverState(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns string) map[string]keyState {
	t.Helper()
	var list *corev1.ConfigMapList
	var err error
	// The writer's connection may be redialled after the restore: retry.
	for i := 0; i < 20; i++ {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		list, err = cs.CoreV1().ConfigMaps(ns).List(lctx, metav1.ListOptions{})
		cancel()
		if err == nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("listing %s: %v", ns, err)
	}
	out := make(map[string]keyState, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = keyState{seqOf(&list.Items[i]), list.Items[i].ResourceVersion}
	}
	return out
}

// lostWaits waits for the resource versions of writes a restore lost,
// from after the restore. A wait that returns nil must find the indexer
// holding that write or a newer one, unless a regression was declared
// after the write (regsAt: the count before the restore), as the fault
// rig's checker decides; a wait may also fail with
// freshness.ErrTooLargeResourceVersion (the restored server has not
// reached the resource version again).
type lostWaits struct {
	r      *faultRig
	regsAt int
	wg     sync.WaitGroup

	mu       sync.Mutex // guards the fields below
	n        int
	fresh    int
	excused  int
	tooLarge int
	early    []string
	errs     []string
}

func (l *lostWaits) start(ctx context.Context, key string, seq int64, rv string) {
	l.mu.Lock()
	l.n++
	l.mu.Unlock()
	l.wg.Go(func() {
		wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		err := l.r.inf.WaitForFreshness(wctx, rv)
		var held int64 = -1
		if obj, ok, _ := l.r.inf.GetIndexer().GetByKey(l.r.ns + "/" + key); ok {
			held = seqOf(obj.(*corev1.ConfigMap))
		}
		regs := l.r.regressions()
		l.mu.Lock()
		defer l.mu.Unlock()
		switch {
		case errors.Is(err, freshness.ErrTooLargeResourceVersion):
			l.tooLarge++
		case err != nil:
			l.errs = append(l.errs, fmt.Sprintf("%s seq %d rv %s: %v", key, seq, rv, err))
		case held >= seq:
			l.fresh++
		case regs > l.regsAt:
			l.excused++
		default:
			l.early = append(l.early, fmt.Sprintf("%s seq %d rv %s: nil (informer at %s) but the indexer holds seq %d, no regression declared",
				key, seq, rv, l.r.inf.LastObservedResourceVersion(), held))
		}
	})
}

func (l *lostWaits) wait() { l.wg.Wait() }

// cell is the table's summary: fresh / nil after a declared regression /
// too large / early, of all.
func (l *lostWaits) cell() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("%d / %d / %d / %d of %d", l.fresh, l.excused, l.tooLarge, len(l.early), l.n)
}

func (l *lostWaits) check(t *testing.T, when string) {
	t.Helper()
	l.wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("waits for %d lost writes started %s: fresh %d, nil after a declared regression %d, ErrTooLargeResourceVersion %d, early %d, other errors %d",
		l.n, when, l.fresh, l.excused, l.tooLarge, len(l.early), len(l.errs))
	if len(l.early) > 0 {
		t.Errorf("a wait for a lost write returned nil while the indexer lacked it and no regression was declared, %d times:\n%s", len(l.early), firstLines(l.early, 10))
	}
	if len(l.errs) > 0 {
		t.Errorf("a wait for a lost write failed otherwise than as too large, %d times:\n%s", len(l.errs), firstLines(l.errs, 10))
	}
}

// plainView is client-go's informer factory on one namespace's
// ConfigMaps, with what its handlers saw go back: client-go declares
// nothing, so every such change is silent.
type plainView struct {
	ns     string
	lister corelisters.ConfigMapLister

	mu      sync.Mutex // guards back and deleted
	back    int        // updates to older content or an older resource version
	deleted int
}

func startPlainView(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns string) *plainView {
	t.Helper()
	p := &plainView{ns: ns}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().ConfigMaps().Informer()
	p.lister = f.Core().V1().ConfigMaps().Lister()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*corev1.ConfigMap), newObj.(*corev1.ConfigMap)
			c, err := freshness.Compare(n.ResourceVersion, o.ResourceVersion)
			if seqOf(n) < seqOf(o) || err != nil || c < 0 {
				p.mu.Lock()
				p.back++
				p.mu.Unlock()
			}
		},
		DeleteFunc: func(any) {
			p.mu.Lock()
			p.deleted++
			p.mu.Unlock()
		},
	}); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	f.Start(runCtx.Done())
	t.Cleanup(func() {
		stop()
		f.Shutdown()
	})
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("client-go's %v informer did not sync", typ)
		}
	}
	return p
}

func (p *plainView) counts() (back, deleted int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.back, p.deleted
}

// stale lists the keys where client-go's lister differs from the server
// (a consistent list through cs).
func (p *plainView) stale(t *testing.T, ctx context.Context, cs kubernetes.Interface) []string {
	t.Helper()
	server := serverState(t, ctx, cs, p.ns)
	var out []string
	for key, s := range server {
		cm, err := p.lister.ConfigMaps(p.ns).Get(key)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("%s: server seq %d rv %s, not in client-go's lister", key, s.seq, s.rv))
		case cm.ResourceVersion != s.rv || seqOf(cm) != s.seq:
			out = append(out, fmt.Sprintf("%s: server seq %d rv %s, client-go's lister seq %d rv %s", key, s.seq, s.rv, seqOf(cm), cm.ResourceVersion))
		}
	}
	cms, err := p.lister.ConfigMaps(p.ns).List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms {
		if _, ok := server[cm.Name]; !ok {
			out = append(out, fmt.Sprintf("%s: seq %d rv %s in client-go's lister, not on the server", cm.Name, seqOf(cm), cm.ResourceVersion))
		}
	}
	sort.Strings(out)
	return out
}
