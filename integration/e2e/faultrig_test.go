package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/reflector"
	"github.com/freshinformer/freshinformer/stalereads"
)

// faultRig writes ConfigMaps through a real kube-apiserver while a
// FreshInformer watches them (possibly through another apiserver or a
// proxy), while a test breaks the control plane. It checks the three
// properties every fault test needs:
//
//   - never fresh early: when WaitForFreshness(rv of a write) returns nil,
//     the indexer holds that write (or newer), unless a regression was
//     declared after the write returned;
//   - never back silently: no cached key moves to older content, an older
//     resource version, or disappears (nothing here deletes) unless the
//     informer declared a regression;
//   - convergence: once the faults stop, the cache equals the server's
//     state (same keys, same resource versions, same content).
//
// Each write is told to the informer with RecordWrittenObject, as read-your-writes
// does for every write (rigOptions.unrecordedWrites leaves that out), and
// puts a globally increasing sequence number in data["seq"];
// each key is written by one goroutine at a time, so a key's seq only grows
// on the server except across an etcd restore. Content, not only the
// resource version, is compared: after a restore without --bump-revision
// resource versions are reused for different content.
type faultRig struct {
	t      *testing.T
	ns     string
	writer kubernetes.Interface
	inf    *cache.FreshInformer
	lw     *holdingLW // set with rigOptions.holdable

	seq atomic.Int64

	waiters      sync.WaitGroup
	ctx          context.Context
	waitTimeout  time.Duration
	recordWrites bool
	// staleReads counts the stale-read detector's reports: the rig reads
	// the cache behind its own writes on purpose (a checker after its
	// wait, while a writer has written the key again; while converging).
	staleReads atomic.Int64

	mu       sync.Mutex
	declared []reflector.Regression
	back     []string // keys seen going back, with the regression count then
	early    []string // fresh before the indexer held the write
	waitErrs []string
	writes   int
	fresh    int
	excused  int // fresh while older, after a regression declared since the write
	writeErr int
}

type rigOptions struct {
	// informerClient is what the informer lists and watches through;
	// default: the writer.
	informerClient kubernetes.Interface
	// listWatch makes the informer list then watch (default: watch-list).
	listWatch bool
	// acceptRegressionAfter is the informer's bound (default 10 s).
	acceptRegressionAfter time.Duration
	// waitTimeout bounds each write's WaitForFreshness (default 90 s).
	waitTimeout time.Duration
	// holdable makes the informer's watch events holdable (faultRig.lw).
	holdable bool
	// unrecordedWrites leaves out FreshInformer.RecordWrittenObject after each
	// write (which read-your-writes does), so the informer learns of the
	// writes only from its stream.
	unrecordedWrites bool
}

func newFaultRig(t *testing.T, ctx context.Context, writer kubernetes.Interface, ns string, o rigOptions) *faultRig {
	t.Helper()
	if o.informerClient == nil {
		o.informerClient = writer
	}
	if o.acceptRegressionAfter == 0 {
		o.acceptRegressionAfter = 10 * time.Second
	}
	if o.waitTimeout == 0 {
		o.waitTimeout = 90 * time.Second
	}
	r := &faultRig{t: t, ns: ns, writer: writer, ctx: ctx, recordWrites: !o.unrecordedWrites}
	var lw toolscache.ListerWatcher = toolscache.NewListWatchFromClient(o.informerClient.CoreV1().RESTClient(), "configmaps", ns, fields.Everything())
	if o.holdable {
		r.lw = &holdingLW{ListWatch: lw.(*toolscache.ListWatch)}
		lw = r.lw
	} else if o.listWatch {
		lw = listWatchWithoutWatchList{lw.(*toolscache.ListWatch)}
	}
	r.inf = cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{},
		cache.WithName(t.Name()),
		cache.WithAcceptRegressionAfter(o.acceptRegressionAfter),
		cache.WithRegressionHandler(func(reg reflector.Regression) {
			r.mu.Lock()
			r.declared = append(r.declared, reg)
			r.mu.Unlock()
			t.Logf("declared regression: %s", regressionJSON(reg))
		}),
		cache.WithStaleReadDetection(func(stalereads.Report) { r.staleReads.Add(1) }))
	r.waitTimeout = o.waitTimeout
	if _, err := r.inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*corev1.ConfigMap), newObj.(*corev1.ConfigMap)
			so, sn := seqOf(o), seqOf(n)
			c, err := freshness.Compare(n.ResourceVersion, o.ResourceVersion)
			if sn < so || err != nil || c < 0 {
				r.noteBack(fmt.Sprintf("%s: seq %d rv %s -> seq %d rv %s", n.Name, so, o.ResourceVersion, sn, n.ResourceVersion))
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				r.noteBack(fmt.Sprintf("%s: seq %d rv %s -> deleted", cm.Name, seqOf(cm), cm.ResourceVersion))
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.inf.RunWithContext(runCtx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		r.waiters.Wait()
	})
	syncCtx, cancelSync := context.WithTimeout(ctx, 60*time.Second)
	defer cancelSync()
	if !toolscache.WaitForCacheSync(syncCtx.Done(), r.inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	return r
}

func regressionJSON(reg reflector.Regression) string {
	b, _ := json.Marshal(reg)
	return string(b)
}

func (r *faultRig) noteBack(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.back = append(r.back, fmt.Sprintf("%s (declared so far: %d)", what, len(r.declared)))
}

func (r *faultRig) regressions() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.declared)
}

func seqOf(cm *corev1.ConfigMap) int64 {
	n, _ := strconv.ParseInt(cm.Data["seq"], 10, 64)
	return n
}

// write sets key's seq to the next sequence number (creating the key when
// missing) and starts a checker that waits for the write's resource
// version. It returns the write's error; failures (the server is down) are
// counted, not fatal.
func (r *faultRig) write(key string) error {
	n := r.seq.Add(1)
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	cms := r.writer.CoreV1().ConfigMaps(r.ns)
	obj, err := cms.Patch(ctx, key, types.MergePatchType, fmt.Appendf(nil, `{"data":{"seq":%q}}`, strconv.FormatInt(n, 10)), metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		obj, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: key}, Data: map[string]string{"seq": strconv.FormatInt(n, 10)}}, metav1.CreateOptions{})
	}
	regsAt := r.regressions()
	r.mu.Lock()
	if err != nil {
		r.writeErr++
	} else {
		r.writes++
	}
	r.mu.Unlock()
	if err != nil {
		return err
	}
	if r.recordWrites {
		// As read-your-writes does for every write: lets the informer
		// notice a write below what it applied that its stream never
		// delivered (a server restored without --bump-revision), and a
		// relist past a write that holds its key older (the write was lost
		// by a restore with --bump-revision).
		if err := r.inf.RecordWrittenObject(obj); err != nil {
			r.t.Errorf("RecordWrittenObject(%s): %v", obj.ResourceVersion, err)
		}
	}
	r.waiters.Add(1)
	go r.check(key, n, obj.ResourceVersion, regsAt)
	return nil
}

// check waits for a write and records whether the indexer held it then.
func (r *faultRig) check(key string, n int64, rv string, regsAt int) {
	defer r.waiters.Done()
	ctx, cancel := context.WithTimeout(r.ctx, r.waitTimeout)
	defer cancel()
	err := r.inf.WaitForFreshness(ctx, rv)
	var held int64 = -1
	if obj, ok, _ := r.inf.GetIndexer().GetByKey(r.ns + "/" + key); ok {
		held = seqOf(obj.(*corev1.ConfigMap))
	}
	regsNow := r.regressions()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err != nil:
		r.waitErrs = append(r.waitErrs, fmt.Sprintf("%s seq %d rv %s: %v", key, n, rv, err))
	case held >= n:
		r.fresh++
	case regsNow > regsAt:
		r.excused++
	default:
		r.early = append(r.early, fmt.Sprintf("%s seq %d rv %s: fresh (informer at %s) but the indexer holds seq %d",
			key, n, rv, r.inf.LastObservedResourceVersion(), held))
	}
}

// keyName is the i-th key's name.
func (r *faultRig) keyName(i int) string { return fmt.Sprintf("k-%02d", i) }

// round writes each of keys once, in order, and returns how many failed.
func (r *faultRig) round(keys int) int {
	failed := 0
	for i := range keys {
		if r.write(r.keyName(i)) != nil {
			failed++
		}
	}
	return failed
}

// runWriters starts n writers; writer w owns the keys i with i%n == w and
// writes them round-robin, pausing pause between writes, until stop is
// called (which waits for them, not for the checkers).
func (r *faultRig) runWriters(n, keys int, pause time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			for i := w; ; i += n {
				select {
				case <-done:
					return
				case <-r.ctx.Done():
					return
				default:
				}
				if r.write(r.keyName(i%keys)) != nil {
					// The server is down or restarting: back off a little.
					select {
					case <-done:
						return
					case <-time.After(100 * time.Millisecond):
					}
				}
				if pause > 0 {
					time.Sleep(pause)
				}
			}
		})
	}
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// settle waits for every checker started so far.
func (r *faultRig) settle() { r.waiters.Wait() }

// converge waits until the cache equals the server's state (a consistent
// list through the writer), and fails the test with the difference if it
// does not within d.
func (r *faultRig) converge(d time.Duration) {
	r.t.Helper()
	deadline := time.Now().Add(d)
	var diff string
	for {
		diff = r.diff()
		if diff == "" {
			return
		}
		if time.Now().After(deadline) || r.ctx.Err() != nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	r.t.Errorf("the cache did not converge to the server's state within %v (informer at %s, stats %+v):\n%s",
		d, r.inf.LastObservedResourceVersion(), r.inf.Stats(), diff)
}

func (r *faultRig) diff() string {
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	list, err := r.writer.CoreV1().ConfigMaps(r.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "listing the server: " + err.Error()
	}
	var out []string
	seen := map[string]bool{}
	for i := range list.Items {
		s := &list.Items[i]
		seen[s.Name] = true
		obj, ok, _ := r.inf.GetIndexer().GetByKey(r.ns + "/" + s.Name)
		if !ok {
			out = append(out, fmt.Sprintf("%s: server seq %d rv %s, not cached", s.Name, seqOf(s), s.ResourceVersion))
			continue
		}
		c := obj.(*corev1.ConfigMap)
		if c.ResourceVersion != s.ResourceVersion || seqOf(c) != seqOf(s) {
			out = append(out, fmt.Sprintf("%s: server seq %d rv %s, cache seq %d rv %s", s.Name, seqOf(s), s.ResourceVersion, seqOf(c), c.ResourceVersion))
		}
	}
	for _, k := range r.inf.GetIndexer().ListKeys() {
		if _, name, _ := strings.Cut(k, "/"); !seen[name] {
			out = append(out, fmt.Sprintf("%s: cached, not on the server", name))
		}
	}
	sort.Strings(out)
	if len(out) > 20 {
		out = append(out[:20], fmt.Sprintf("... %d more", len(out)-20))
	}
	return strings.Join(out, "\n")
}

// verify settles the checkers and checks never-fresh-early and
// never-back-silently. wantRegressions is the number of declared
// regressions the test's faults call for: exactly that many must be
// declared, consistently in Stats and through the callback; with zero, no
// key may have gone back at all.
func (r *faultRig) verify(wantRegressions int) {
	r.t.Helper()
	r.verifyRange(wantRegressions, wantRegressions)
}

// verifyRange is verify with between lo and hi declared regressions.
func (r *faultRig) verifyRange(lo, hi int) {
	r.t.Helper()
	r.settle()
	st := r.inf.Stats()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.t.Logf("writes %d (failed %d), checked fresh %d, excused by a declared regression %d, early %d, wait errors %d; keys gone back %d; declared %d; stale reads reported %d; stats %+v",
		r.writes, r.writeErr, r.fresh, r.excused, len(r.early), len(r.waitErrs), len(r.back), len(r.declared), r.staleReads.Load(), st)
	if len(r.early) > 0 {
		r.t.Errorf("WaitForFreshness returned nil before the indexer held the write, %d times; first ones:\n%s", len(r.early), firstLines(r.early, 10))
	}
	if len(r.waitErrs) > 0 {
		r.t.Errorf("WaitForFreshness failed for %d writes; first ones:\n%s", len(r.waitErrs), firstLines(r.waitErrs, 10))
	}
	if len(r.declared) != int(st.Regressions) {
		r.t.Errorf("regression callback ran %d times, Stats.Regressions is %d", len(r.declared), st.Regressions)
	}
	if n := len(r.declared); n < lo || n > hi {
		r.t.Errorf("declared %d regressions, want %d to %d", n, lo, hi)
	}
	if hi == 0 && len(r.back) > 0 {
		r.t.Errorf("%d cached keys went back with no regression to declare; first ones:\n%s", len(r.back), firstLines(r.back, 10))
	}
	if len(r.declared) == 0 && len(r.back) > 0 {
		r.t.Errorf("%d cached keys went back without a declared regression; first ones:\n%s", len(r.back), firstLines(r.back, 10))
	}
	if r.writes == 0 || r.fresh == 0 {
		r.t.Errorf("the test checked nothing: %d writes, %d fresh", r.writes, r.fresh)
	}
}

// wentBack is how many cached keys went back so far.
func (r *faultRig) wentBack() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.back)
}

func firstLines(s []string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return "  " + strings.Join(s, "\n  ")
}
