package freshctrl

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fcache "github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/readyourwrites"
)

var configMaps = schema.GroupResource{Resource: "configmaps"}

// fakeLW serves one list and then a watch the test drives.
type fakeLW struct {
	mu    sync.Mutex
	rv    string // the "server's" current resource version
	items []corev1.ConfigMap
	w     *watch.FakeWatcher
	block bool // lists wait for their context to end
}

func (l *fakeLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), opts)
}

func (l *fakeLW) ListWithContext(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
	l.mu.Lock()
	block := l.block
	l.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: l.rv}, Items: append([]corev1.ConfigMap(nil), l.items...)}, nil
}

func (l *fakeLW) Watch(metav1.ListOptions) (watch.Interface, error) { return l.w, nil }

func (l *fakeLW) WatchWithContext(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return l.w, nil
}

// blockLists makes later lists (probes of the server's resource version)
// hang until their context ends, as an unresponsive server would.
func (l *fakeLW) blockLists() {
	l.mu.Lock()
	l.block = true
	l.mu.Unlock()
}

// IsWatchListSemanticsUnSupported has client-go's Reflector list, then watch.
func (l *fakeLW) IsWatchListSemanticsUnSupported() bool { return true }

func (l *fakeLW) setRV(rv string) {
	l.mu.Lock()
	l.rv = rv
	l.mu.Unlock()
}

type testInformer struct {
	si *ScopedInformer
	lw *fakeLW
}

// startInformer runs a FreshInformer of ConfigMaps in scope s, whose list
// is objs at resource version rv, until the test ends.
func startInformer(t *testing.T, s Scope, rv string, objs ...corev1.ConfigMap) *testInformer {
	t.Helper()
	return startInformerWith(t, s, rv, nil, objs...)
}

// startInformerWith is startInformer with more informer options.
func startInformerWith(t *testing.T, s Scope, rv string, opts []fcache.Option, objs ...corev1.ConfigMap) *testInformer {
	t.Helper()
	lw := &fakeLW{rv: rv, items: objs, w: watch.NewFakeWithChanSize(16, false)}
	opts = append([]fcache.Option{fcache.WithName(s.String()), fcache.WithResource(configMaps),
		fcache.WithSelector(s.Selector())}, opts...) // as the registry makes them
	inf := fcache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, nil, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { inf.RunWithContext(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	if !toolscache.WaitForCacheSync(waitCtx(t).Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	return &testInformer{lw: lw, si: &ScopedInformer{
		Informer: inf, GroupVersionKind: corev1.SchemeGroupVersion.WithKind("ConfigMap"),
		Resource: configMaps, Representation: Typed, Scope: s,
	}}
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newTestClient returns a freshClient writing to a controller-runtime fake
// client holding objs, over the given informers.
func newTestClient(t *testing.T, timeout time.Duration, infs []*testInformer, objs ...client.Object) *freshClient {
	t.Helper()
	reg := &registry{timeout: timeout, ctx: context.Background()} // as if started
	for _, i := range infs {
		reg.informers = append(reg.informers, &informerEntry{ScopedInformer: *i.si, name: i.si.Informer.Name()})
	}
	c, err := newFreshClient(fake.NewClientBuilder().WithObjects(objs...).Build(), &Cache{reg: reg, failOnMissing: true}, client.CacheOptions{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func cm(ns, name, rv string, lbls map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv, Labels: lbls, UID: types.UID(ns + "-" + name)}}
}

// eventually waits for cond, failing the test after a generous bound.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// background runs f and returns its result on a channel.
func background(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

func mustReturn(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("read did not return")
		return nil
	}
}

func notReturned(t *testing.T, ch <-chan error) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("read returned (%v) before the cache had the write", err)
	default:
	}
}

// update writes a new data value to ns/name through c and returns the
// written object.
func update(t *testing.T, c client.Client, ns, name string, opts ...client.UpdateOption) *corev1.ConfigMap {
	t.Helper()
	ctx := waitCtx(t)
	obj := &corev1.ConfigMap{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj, disableReadYourWrites); err != nil {
		t.Fatal(err)
	}
	obj.Data = map[string]string{"n": obj.ResourceVersion}
	if err := c.Update(ctx, obj, opts...); err != nil {
		t.Fatal(err)
	}
	return obj
}

// TestGetWaitsForOwnWrite: a Get after an Update returns only once the
// informer has applied the update's resource version, and then at once.
func TestGetWaitsForOwnWrite(t *testing.T) {
	orig := cm("a", "x", "", nil)
	c0 := fake.NewClientBuilder().WithObjects(orig.DeepCopy()).Build()
	var seeded corev1.ConfigMap
	if err := c0.Get(context.Background(), client.ObjectKeyFromObject(orig), &seeded); err != nil {
		t.Fatal(err)
	}
	inf := startInformer(t, Scope{Namespace: "a"}, seeded.ResourceVersion, seeded)
	c := newTestClient(t, 20*time.Second, []*testInformer{inf}, orig)

	written := update(t, c, "a", "x")
	got := &corev1.ConfigMap{}
	done := background(func() error { return c.Get(waitCtx(t), client.ObjectKeyFromObject(written), got) })
	eventually(t, "the Get to wait", func() bool { return inf.si.Informer.Stats().PendingWaiters == 1 })
	notReturned(t, done)
	inf.lw.w.Modify(written.DeepCopy())
	if err := mustReturn(t, done); err != nil {
		t.Fatal(err)
	}
	if cmp, _ := freshness.Compare(inf.si.Informer.LastObservedResourceVersion(), written.ResourceVersion); cmp < 0 {
		t.Fatalf("Get returned with the cache at %s, before the write %s", inf.si.Informer.LastObservedResourceVersion(), written.ResourceVersion)
	}
	// Fresh now: the next Get does not wait.
	if err := c.Get(waitCtx(t), client.ObjectKeyFromObject(written), got, FailIfNotFresh); err != nil {
		t.Fatalf("second Get: %v", err)
	}
}

// TestBookmarkEndsWait: a write whose event the informer's server-side
// selector filters out (a field the client cannot evaluate) is passed by
// the next bookmark: the applied watermark counts bookmarks.
func TestBookmarkEndsWait(t *testing.T) {
	inf := startInformer(t, Scope{Fields: fields.OneTermEqualSelector("spec.nodeName", "n1")}, "900")
	c := newTestClient(t, 20*time.Second, []*testInformer{inf}, cm("a", "x", "", nil))
	written := update(t, c, "a", "x")
	var list corev1.ConfigMapList
	done := background(func() error { return c.List(waitCtx(t), &list) })
	eventually(t, "the List to wait", func() bool { return inf.si.Informer.Stats().PendingWaiters == 1 })
	notReturned(t, done)
	bm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: written.ResourceVersion}}
	inf.lw.w.Action(watch.Bookmark, bm)
	if err := mustReturn(t, done); err != nil {
		t.Fatal(err)
	}
}

// TestTimeoutIsTypedAndBounded: a cache that never catches up fails the
// read after the timeout with a *readyourwrites.NotFreshError naming resource, informer,
// key, target and reached resource version.
func TestTimeoutIsTypedAndBounded(t *testing.T) {
	inf := startInformer(t, Scope{Namespace: "a"}, "900")
	// The server does not answer the informer's probes: its lists at 900
	// would show the write at 1000 (made by another fake) beyond it.
	inf.lw.blockLists()
	c := newTestClient(t, 20*time.Second, []*testInformer{inf}, cm("a", "x", "", nil))
	written := update(t, c, "a", "x")
	start := time.Now()
	err := c.Get(context.Background(), client.ObjectKeyFromObject(written), &corev1.ConfigMap{}, WaitTimeout(50*time.Millisecond))
	if time.Since(start) > 15*time.Second {
		t.Fatalf("read took %v", time.Since(start))
	}
	var nf *readyourwrites.NotFreshError
	if !errors.As(err, &nf) {
		t.Fatalf("got %v, want a *NotFreshError", err)
	}
	if !errors.Is(err, freshness.ErrNotFresh) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%v does not match freshness.ErrNotFresh and context.DeadlineExceeded", err)
	}
	if nf.Resource != configMaps || nf.Name != "ns=a" || nf.Key != client.ObjectKeyFromObject(written) ||
		nf.Written != written.ResourceVersion || nf.Observed != "900" || nf.Waited <= 0 {
		t.Errorf("error fields: %+v", nf)
	}
	// The default timeout applies without a per-request one.
	c.timeout = 30 * time.Millisecond
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(written), &corev1.ConfigMap{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("default timeout: got %v", err)
	}
}

// TestWritesOutsideEveryScopeNeverWait: a write in a namespace no
// informer watches, or without the label a ByObject selector asks for, is
// excluded: reads return at once.
func TestWritesOutsideEveryScopeNeverWait(t *testing.T) {
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	nsA := startInformer(t, Scope{Namespace: "a", Labels: web}, "900")
	c := newTestClient(t, time.Hour, []*testInformer{nsA}, cm("a", "unlabelled", "", nil), cm("z", "elsewhere", "", nil))
	for _, w := range []*corev1.ConfigMap{update(t, c, "a", "unlabelled"), update(t, c, "z", "elsewhere")} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := c.Get(ctx, client.ObjectKeyFromObject(w), &corev1.ConfigMap{}, FailIfNotFresh)
		cancel()
		if err != nil {
			t.Errorf("Get %s: %v (a write no informer can see must not be waited for)", client.ObjectKeyFromObject(w), err)
		}
	}
	if err := c.List(context.Background(), &corev1.ConfigMapList{}, FailIfNotFresh); err != nil {
		t.Errorf("List: %v", err)
	}
	if n := nsA.si.Informer.Stats().PendingWaiters; n != 0 {
		t.Errorf("%d waiters", n)
	}
}

// TestMultiNamespaceWaitsPerInformer: with one informer per namespace, a
// write in one namespace makes a cluster-wide List wait for that
// namespace's informer only, and a Get in the other namespace not at all,
// however far behind the other informer is.
func TestMultiNamespaceWaitsPerInformer(t *testing.T) {
	nsA := startInformer(t, Scope{Namespace: "a"}, "900")
	nsB := startInformer(t, Scope{Namespace: "b"}, "5") // far behind, quiet
	c := newTestClient(t, 20*time.Second, []*testInformer{nsA, nsB}, cm("a", "x", "", nil), cm("b", "y", "", nil))
	written := update(t, c, "a", "x")

	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "b", Name: "y"}, &corev1.ConfigMap{}, FailIfNotFresh); err != nil {
		t.Fatalf("Get in b: %v", err)
	}
	if err := c.List(context.Background(), &corev1.ConfigMapList{}, client.InNamespace("b"), FailIfNotFresh); err != nil {
		t.Fatalf("List in b: %v", err)
	}
	err := c.List(context.Background(), &corev1.ConfigMapList{}, FailIfNotFresh)
	var nf *readyourwrites.NotFreshError
	if !errors.As(err, &nf) || nf.Name != "ns=a" {
		t.Fatalf("cluster-wide List: got %v, want the ns=a informer behind", err)
	}
	done := background(func() error { return c.List(waitCtx(t), &corev1.ConfigMapList{}) })
	eventually(t, "the List to wait", func() bool { return nsA.si.Informer.Stats().PendingWaiters == 1 })
	nsA.lw.w.Modify(written.DeepCopy())
	if err := mustReturn(t, done); err != nil {
		t.Fatal(err)
	}
	if n := nsB.si.Informer.Stats().PendingWaiters; n != 0 {
		t.Errorf("namespace b's informer had %d waiters", n)
	}
}

// TestOptOut: client.DisableReadYourWritesConsistency on a read skips the
// wait; on a write, later reads do not wait for it.
func TestOptOut(t *testing.T) {
	requireOptOut(t)
	inf := startInformer(t, Scope{}, "900")
	c := newTestClient(t, 20*time.Second, []*testInformer{inf}, cm("a", "x", "", nil), cm("a", "y", "", nil))
	w := update(t, c, "a", "x")
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(w), &corev1.ConfigMap{}, disableReadYourWrites); err != nil {
		t.Errorf("opted-out Get: %v", err)
	}
	if err := c.List(context.Background(), &corev1.ConfigMapList{}, disableReadYourWrites); err != nil {
		t.Errorf("opted-out List: %v", err)
	}
	w2 := update(t, c, "a", "y", disableReadYourWrites)
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(w2), &corev1.ConfigMap{}, FailIfNotFresh); err != nil {
		t.Errorf("Get after an opted-out write: %v", err)
	}
}

// TestDeleteWaitsForTheUIDToGo: after a Delete, a Get waits until the
// cache no longer holds the object (it asks the server for its resource
// version once and waits for it).
func TestDeleteWaitsForTheUIDToGo(t *testing.T) {
	obj := cm("a", "x", "", nil)
	c0 := fake.NewClientBuilder().WithObjects(obj.DeepCopy()).Build()
	var seeded corev1.ConfigMap
	if err := c0.Get(context.Background(), client.ObjectKeyFromObject(obj), &seeded); err != nil {
		t.Fatal(err)
	}
	inf := startInformer(t, Scope{Namespace: "a"}, seeded.ResourceVersion, seeded)
	c := newTestClient(t, 20*time.Second, []*testInformer{inf}, obj)
	if err := c.Delete(context.Background(), seeded.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), &corev1.ConfigMap{}, FailIfNotFresh)
	var nf *readyourwrites.NotFreshError
	if !errors.As(err, &nf) || !nf.Deleted {
		t.Fatalf("got %v, want a NotFreshError for the delete", err)
	}
	inf.lw.setRV("2000") // the server moved past the delete
	done := background(func() error {
		return c.Get(waitCtx(t), client.ObjectKeyFromObject(obj), &corev1.ConfigMap{})
	})
	eventually(t, "the Get to wait", func() bool { return inf.si.Informer.Stats().PendingWaiters == 1 })
	gone := seeded.DeepCopy()
	gone.ResourceVersion = "2000"
	inf.lw.w.Delete(gone)
	// The fake client deleted it: the read itself says NotFound.
	if err := mustReturn(t, done); !apierrors.IsNotFound(err) {
		t.Fatalf("got %v, want NotFound once the cache is past the delete", err)
	}
}

// TestWrapClientNeedsItsCache: WrapClient without the cache its client
// reads from fails at once, rather than at the first read.
func TestWrapClientNeedsItsCache(t *testing.T) {
	if _, err := (Options{}).WrapClient(nil, nil, client.CacheOptions{}); err == nil {
		t.Fatal("WrapClient took a nil cache")
	}
}
