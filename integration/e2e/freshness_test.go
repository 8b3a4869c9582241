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
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/integration/controlplane"
	"github.com/freshinformer/freshinformer/integration/testenv"
)

// streamPath selects how client-go's Reflector fills the informer: the
// default watch-list (a streamed initial list) or a plain list then watch.
type streamPath struct {
	name      string
	watchList bool
}

var streamPaths = []streamPath{{"watch-list", true}, {"list+watch", false}}

// listWatchWithoutWatchList marks a ListWatch as not supporting watch-list,
// which makes the Reflector list then watch.
type listWatchWithoutWatchList struct{ *toolscache.ListWatch }

func (listWatchWithoutWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// startInformer runs a FreshInformer on resource in namespace until the
// test ends, and waits for its initial sync.
func startInformer(t *testing.T, cs kubernetes.Interface, resource string, example runtime.Object, namespace string, path streamPath, opts ...cache.Option) *cache.FreshInformer {
	t.Helper()
	var lw toolscache.ListerWatcher = toolscache.NewListWatchFromClient(cs.CoreV1().RESTClient(), resource, namespace, fields.Everything())
	if !path.watchList {
		lw = listWatchWithoutWatchList{lw.(*toolscache.ListWatch)}
	}
	inf := cache.NewSharedIndexInformer(lw, example, 0, toolscache.Indexers{}, append([]cache.Option{cache.WithName(t.Name())}, opts...)...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); inf.RunWithContext(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	syncCtx := testenv.Context(t, 60*time.Second)
	if !toolscache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	return inf
}

// cachedRV returns the cached object's resource version, "" when absent.
func cachedRV(inf *cache.FreshInformer, ns, name string) string {
	obj, ok, _ := inf.GetIndexer().GetByKey(ns + "/" + name)
	if !ok {
		return ""
	}
	return obj.(metav1.Object).GetResourceVersion()
}

// atLeast reports whether a >= b as resource versions.
func atLeast(t *testing.T, a, b string) bool {
	t.Helper()
	c, err := freshness.Compare(a, b)
	if err != nil {
		t.Fatalf("comparing %q and %q: %v", a, b, err)
	}
	return c >= 0
}

// TestWaitForFreshnessAfterWrites writes through the API server (create,
// update, patch, delete; status updates on pods) and after each write waits
// for its resource version: the cache must then hold the write or newer,
// every time.
func TestWaitForFreshnessAfterWrites(t *testing.T) {
	for _, path := range streamPaths {
		t.Run(path.name, func(t *testing.T) {
			cs := testenv.Clientset(t)
			ns := testenv.Namespace(t)
			ctx := testenv.Context(t, 3*time.Minute)
			cms := startInformer(t, cs, "configmaps", &corev1.ConfigMap{}, ns, path)
			pods := startInformer(t, cs, "pods", &corev1.Pod{}, ns, path)

			wait := func(inf *cache.FreshInformer, rv string) {
				t.Helper()
				wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				if err := inf.WaitForFreshness(wctx, rv); err != nil {
					t.Fatalf("WaitForFreshness(%s): %v", rv, err)
				}
			}
			const rounds = 60 // 4 ConfigMap writes + 2 pod writes each: 360 writes
			for i := range rounds {
				name := fmt.Sprintf("cm-%d", i%7)
				created, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"i": strconv.Itoa(i)},
				}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				wait(cms, created.ResourceVersion)
				if got := cachedRV(cms, ns, name); got == "" || !atLeast(t, got, created.ResourceVersion) {
					t.Fatalf("after create at %s the cache holds %q", created.ResourceVersion, got)
				}

				created.Data["updated"] = "yes"
				updated, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, created, metav1.UpdateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				wait(cms, updated.ResourceVersion)
				if got := cachedRV(cms, ns, name); !atLeast(t, got, updated.ResourceVersion) {
					t.Fatalf("after update at %s the cache holds %q", updated.ResourceVersion, got)
				}

				patched, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, []byte(`{"data":{"patched":"yes"}}`), metav1.PatchOptions{})
				if err != nil {
					t.Fatal(err)
				}
				wait(cms, patched.ResourceVersion)
				obj, _, _ := cms.GetIndexer().GetByKey(ns + "/" + name)
				if c := obj.(*corev1.ConfigMap); !atLeast(t, c.ResourceVersion, patched.ResourceVersion) || c.Data["patched"] != "yes" {
					t.Fatalf("after patch at %s the cache holds %s %v", patched.ResourceVersion, c.ResourceVersion, c.Data)
				}

				// A delete returns no resource version of its own: the
				// newest one after it covers the deletion.
				if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				after := consistentRV(ctx, t, cs, ns)
				wait(cms, after)
				if got := cachedRV(cms, ns, name); got != "" {
					t.Fatalf("fresh at %s after the delete, but %s is still cached at %s", after, name, got)
				}

				pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i)},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/none"}}},
				}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				pod.Status.Message = fmt.Sprintf("round %d", i)
				status, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				wait(pods, status.ResourceVersion)
				obj, _, _ = pods.GetIndexer().GetByKey(ns + "/" + pod.Name)
				if p := obj.(*corev1.Pod); !atLeast(t, p.ResourceVersion, status.ResourceVersion) || p.Status.Message != pod.Status.Message {
					t.Fatalf("after status update at %s the cache holds %s %q", status.ResourceVersion, p.ResourceVersion, p.Status.Message)
				}
			}
			if s := cms.Stats(); s.StaleListsRefused != 0 || s.Regressions != 0 {
				t.Errorf("a healthy server triggered the guards: %+v", s)
			}
		})
	}
}

// TestBookmarkAdvancesQuietResource: nothing writes ConfigMaps in the
// informer's namespace, yet an RV read from a consistent list becomes fresh,
// through watch bookmarks alone. (A resource needs the apiserver's watch
// cache for bookmarks: pod templates, for one, have none and get none.)
func TestBookmarkAdvancesQuietResource(t *testing.T) {
	cs := testenv.Clientset(t)
	ns := testenv.Namespace(t)
	ctx := testenv.Context(t, 150*time.Second)
	// Probing off: this test is about bookmarks alone (quiet_test.go
	// covers the probe).
	inf := startInformer(t, cs, "configmaps", &corev1.ConfigMap{}, ns, streamPaths[0], cache.WithQuietProbeDelay(-1))
	start := inf.LastObservedResourceVersion()
	// Move the store past the informer's start elsewhere, so its watch has
	// something to report progress on.
	other := testenv.Namespace(t)
	if _, err := cs.CoreV1().ConfigMaps(other).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "tick"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	target := consistentRV(ctx, t, cs, other)
	if atLeast(t, start, target) {
		t.Fatalf("informer started at %s, not below the target %s", start, target)
	}
	began := time.Now()
	if err := inf.WaitForFreshness(ctx, target); err != nil {
		t.Fatalf("bookmark never advanced freshness to %s: %v", target, err)
	}
	s := inf.Stats()
	if s.Bookmarks == 0 || len(inf.GetIndexer().ListKeys()) != 0 {
		t.Fatalf("fresh at %s without a bookmark: %+v", target, s)
	}
	t.Logf("quiet resource fresh at %s after %v through %d bookmarks", target, time.Since(began).Round(time.Millisecond), s.Bookmarks)
}

// TestRecoversFromAPIServerRestartAndGone restarts the kube-apiserver while
// the informer runs. The restarted server's watch cache starts at etcd's
// current revision, so the informer's re-watch gets 410 Gone and relists.
// Nothing is lost, freshness never goes back, and a waiter pending across
// the outage is released once its write is applied.
func TestRecoversFromAPIServerRestartAndGone(t *testing.T) {
	for _, path := range streamPaths {
		t.Run(path.name, func(t *testing.T) {
			cp := testenv.Plane(t)
			cs := testenv.Clientset(t)
			ns, other := testenv.Namespace(t), testenv.Namespace(t)
			ctx := testenv.Context(t, 3*time.Minute)
			inf := startInformer(t, cs, "configmaps", &corev1.ConfigMap{}, ns, path)

			// Sample the observed RV all along: it must never decrease.
			var mu sync.Mutex
			var regressions []string
			stopSampling := make(chan struct{})
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				prev := ""
				for {
					select {
					case <-stopSampling:
						return
					case <-time.After(time.Millisecond):
					}
					cur := inf.LastObservedResourceVersion()
					if prev != "" && cur != prev {
						if c, err := freshness.Compare(cur, prev); err != nil || c < 0 {
							mu.Lock()
							regressions = append(regressions, prev+"->"+cur)
							mu.Unlock()
						}
					}
					prev = cur
				}
			}()
			defer func() {
				close(stopSampling)
				<-sampled
				if len(regressions) > 0 {
					t.Errorf("observed RV went back: %v", regressions)
				}
			}()

			for i := range 5 {
				if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("before-%d", i)}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			// Writes elsewhere move etcd past the informer's last RV.
			for i := range 5 {
				if _, err := cs.CoreV1().ConfigMaps(other).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("elsewhere-%d", i)}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			before := inf.Stats()

			if err := cp.RestartAPIServer(ctx); err != nil {
				t.Fatal(err)
			}
			created, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
			defer cancel()
			if err := inf.WaitForFreshness(wctx, created.ResourceVersion); err != nil {
				t.Fatalf("after restart: %v", err)
			}
			after := inf.Stats()
			if after.Lists <= before.Lists && after.Watches <= before.Watches {
				t.Fatalf("no relist or re-watch seen across the restart: before %+v after %+v", before.Stats, after.Stats)
			}
			// Nothing lost: the cache matches the server.
			list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{ResourceVersion: created.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
			if err != nil {
				t.Fatal(err)
			}
			for _, item := range list.Items {
				if got := cachedRV(inf, ns, item.Name); got == "" || !atLeast(t, got, item.ResourceVersion) {
					t.Errorf("%s: server has %s, cache %q", item.Name, item.ResourceVersion, got)
				}
			}
			if n := len(inf.GetIndexer().ListKeys()); n != len(list.Items) {
				t.Errorf("cache holds %d objects, server %d", n, len(list.Items))
			}
			t.Logf("lists %d->%d, watches %d->%d, stale lists refused %d", before.Lists, after.Lists, before.Watches, after.Watches, after.StaleListsRefused)
		})
	}
}

// TestStopReleasesWaitersOnRealServer: waiters for an RV nobody writes are
// released with ErrStopped when the informer stops.
func TestStopReleasesWaitersOnRealServer(t *testing.T) {
	cs := testenv.Clientset(t)
	ns := testenv.Namespace(t)
	lw := toolscache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "configmaps", ns, fields.Everything())
	inf := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); inf.RunWithContext(ctx) }()
	if !toolscache.WaitForCacheSync(testenv.Context(t, 60*time.Second).Done(), inf.HasSynced) {
		t.Fatal("no sync")
	}
	errc := make(chan error, 3)
	for range 3 {
		go func() { errc <- inf.WaitForFreshness(context.Background(), "999999999999") }()
	}
	for inf.Stats().PendingWaiters < 3 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	for range 3 {
		if err := <-errc; !errors.Is(err, freshness.ErrStopped) {
			t.Fatalf("waiter after stop: %v", err)
		}
	}
}

// consistentRV returns the newest resource version of the resource right
// now: a consistent (quorum) list with limit 1.
func consistentRV(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string) string {
	t.Helper()
	l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	return l.ResourceVersion
}

// TestRecoversFromCompaction: pod templates have no watch cache here
// (controlplane.UncachedResource), so their watches are served by etcd, and
// compacting etcd past the informer's position expires them with 410 Gone.
// The informer relists and catches up; nothing is lost.
func TestRecoversFromCompaction(t *testing.T) {
	cp := testenv.Plane(t)
	cs := testenv.Clientset(t)
	ns := testenv.Namespace(t)
	ctx := testenv.Context(t, 2*time.Minute)
	// The bookmark route: on the snapshot route the restart's restore check
	// usually proves the cache fresh past the compacted revision, and the
	// watch resumes from there, with nothing to relist.
	inf := startInformer(t, cs, controlplane.UncachedResource, &corev1.PodTemplate{}, ns, streamPaths[1], cache.WithSnapshotProbeLimit(-1))

	template := func(name string) *corev1.PodTemplate {
		return &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: name},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/none"}}}}}
	}
	first, err := cs.CoreV1().PodTemplates(ns).Create(ctx, template("first"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := inf.WaitForFreshness(wctx, first.ResourceVersion); err != nil {
		t.Fatal(err)
	}
	before := inf.Stats()
	// Writes elsewhere, then compaction, leave the informer's watch behind
	// the compacted revision.
	other := testenv.Namespace(t)
	for i := range 3 {
		if _, err := cs.CoreV1().ConfigMaps(other).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cp.CompactEtcd(ctx); err != nil {
		t.Fatal(err)
	}
	// A caught-up watch survives compaction; the re-watch after a restart
	// starts from a compacted revision and gets 410 Gone.
	if err := cp.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	second, err := cs.CoreV1().PodTemplates(ns).Create(ctx, template("second"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wctx2, cancel2 := context.WithTimeout(ctx, 90*time.Second)
	defer cancel2()
	if err := inf.WaitForFreshness(wctx2, second.ResourceVersion); err != nil {
		t.Fatalf("after compaction: %v", err)
	}
	for _, name := range []string{"first", "second"} {
		if cachedRV(inf, ns, name) == "" {
			t.Errorf("%s missing after recovery", name)
		}
	}
	after := inf.Stats()
	t.Logf("across compaction: lists %d->%d, watches %d->%d", before.Lists, after.Lists, before.Watches, after.Watches)
	if after.Lists <= before.Lists {
		t.Errorf("no relist after the watch's revision was compacted: %+v", after.Stats)
	}
}
