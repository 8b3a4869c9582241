package freshctrl

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientgofeatures "k8s.io/client-go/features"
	clientgofeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"go.uber.org/goleak"

	fcache "github.com/freshinformer/freshinformer/cache"
)

// startCache runs c until the test ends and waits for it to have started.
// When the test ends it stops c and waits for every goroutine started
// since (the cache's informers, Reflectors and handlers) to have ended:
// Start returning is not enough, since controller-runtime v0.24's
// multi-namespace cache returns from Start when its context ends, without
// waiting for its per-namespace caches (v0.25 waits for them), and an
// informer still winding down when the test returns is a leak for
// TestMain's goleak check, reported against no test.
func startCache(t *testing.T, c crcache.Cache) {
	t.Helper()
	before := goleak.IgnoreCurrent()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("cache Start: %v", err)
		}
		waitGoroutinesEnded(t, before)
	})
	if !c.WaitForCacheSync(waitCtx(t)) {
		t.Fatal("cache did not start")
	}
}

// TestNewCacheHonoursNewInformer: cache.Options.NewInformer is called, and
// the informer it returns is the one the cache hands out (a fake
// informer's own methods keep working). One that is a FreshInformer
// already is used as such.
func TestNewCacheHonoursNewInformer(t *testing.T) {
	ctx := waitCtx(t)
	fake := controllertest.NewFakeInformer()
	var calls int
	cc, err := Options{DisableMetrics: true}.NewCache(offlineConfig(), crcache.Options{
		Scheme: scheme.Scheme, Mapper: staticMapper(),
		NewInformer: func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
			calls++
			return fake
		},
	})
	if err != nil {
		t.Fatalf("NewCache refused NewInformer: %v", err)
	}
	inf, err := cc.GetInformer(ctx, &corev1.ConfigMap{}, crcache.BlockUntilSynced(false))
	if err != nil {
		t.Fatal(err)
	}
	if inf != fake || calls != 1 {
		t.Fatalf("GetInformer returned %T (hook called %d times), want the hook's informer", inf, calls)
	}
	if inf.HasSynced() {
		t.Error("the fake informer reports synced before Synced()")
	}

	// A hook that builds FreshInformers gets them used as such.
	var made *fcache.FreshInformer
	cc2, err := Options{DisableMetrics: true}.NewCache(offlineConfig(), crcache.Options{
		Scheme: scheme.Scheme, Mapper: staticMapper(),
		NewInformer: func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
			made = fcache.NewSharedIndexInformer(lw, obj, resync, idx, fcache.WithName("mine"))
			return made
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	inf2, err := cc2.GetInformer(ctx, &corev1.ConfigMap{}, crcache.BlockUntilSynced(false))
	if err != nil {
		t.Fatal(err)
	}
	if inf2 != made {
		t.Fatalf("GetInformer returned %T, want the hook's FreshInformer", inf2)
	}
	fis := cc2.(*Cache).FreshInformers()
	if len(fis) != 1 || fis[0].Informer != made || fis[0].Scope.Unknown || fis[0].Resource != configMaps {
		t.Fatalf("FreshInformers = %+v", fis)
	}
}

// newCachedClient returns NewClient's client over cache cc, offline: its
// writes are recorded by hand.
func newCachedClient(t *testing.T, o Options, cc crcache.Cache) *freshClient {
	t.Helper()
	cl, err := o.NewClient(offlineConfig(), client.Options{Scheme: scheme.Scheme, Mapper: staticMapper(), Cache: &client.CacheOptions{Reader: cc}})
	if err != nil {
		t.Fatal(err)
	}
	fc, ok := cl.(*freshClient)
	if !ok {
		t.Fatalf("NewClient returned a %T", cl)
	}
	return fc
}

// TestForeignInformerIsWaitedFor: an informer from cache.Options.NewInformer
// that is not a FreshInformer (here client-go's own) is wrapped
// (cache.Wrap), so the client's reads still wait for its own writes to
// reach it.
func TestForeignInformerIsWaitedFor(t *testing.T) {
	lw := &fakeLW{rv: "100", items: []corev1.ConfigMap{*cm("a", "seed", "100", nil)}, w: watch.NewFakeWithChanSize(16, false)}
	var made toolscache.SharedIndexInformer
	o := Options{DisableMetrics: true, Timeout: 20 * time.Second}
	cc, err := o.NewCache(offlineConfig(), crcache.Options{
		Scheme: scheme.Scheme, Mapper: staticMapper(),
		NewInformer: func(_ toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
			made = toolscache.NewSharedIndexInformer(lw, obj, resync, idx)
			return made
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Made before Start: wrapped when the cache starts.
	if _, err := cc.GetInformer(waitCtx(t), &corev1.ConfigMap{}, crcache.BlockUntilSynced(false)); err != nil {
		t.Fatal(err)
	}
	startCache(t, cc)
	if inf, err := cc.GetInformer(waitCtx(t), &corev1.ConfigMap{}); err != nil || inf != made {
		t.Fatalf("GetInformer = %T, %v; want the hook's informer, synced", inf, err)
	}
	c := newCachedClient(t, o, cc)
	written := cm("a", "x", "200", nil)
	c.record(written)

	key := types.NamespacedName{Namespace: "a", Name: "x"}
	err = c.Get(waitCtx(t), key, &corev1.ConfigMap{}, FailIfNotFresh)
	var nf *NotFreshError
	if !errors.As(err, &nf) || nf.Target != "200" || nf.Reached != "100" || nf.Informer != "*" {
		t.Fatalf("Get before the informer saw the write: got %v, want informer * at 100 behind 200", err)
	}
	got := &corev1.ConfigMap{}
	done := background(func() error { return c.Get(waitCtx(t), key, got) })
	notReturned(t, done)
	lw.w.Add(written.DeepCopy())
	if err := mustReturn(t, done); err != nil {
		t.Fatalf("Get after the informer saw the write: %v", err)
	}
	if got.ResourceVersion != "200" {
		t.Fatalf("read %s at %q, want the write at 200", got.Name, got.ResourceVersion)
	}
}

// TestForeignInformerWithoutAtomicFIFO: with client-go's AtomicFIFO gate
// off, cache.Wrap refuses; the cache still takes the informer, and reads
// do not wait for it (it cannot say what it applied).
func TestForeignInformerWithoutAtomicFIFO(t *testing.T) {
	setAtomicFIFO(t, false)
	logs := &logCapture{}
	o := Options{DisableMetrics: true, Timeout: 20 * time.Second, Logger: logs.logger()}
	cc, err := o.NewCache(offlineConfig(), crcache.Options{
		Scheme: scheme.Scheme, Mapper: staticMapper(),
		DefaultNamespaces: map[string]crcache.Config{"a": {}, "b": {}},
		NewInformer: func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
			// One each: a FakeInformer is not safe to run twice at once.
			return controllertest.NewFakeInformer(controllertest.Synced)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	startCache(t, cc)
	if _, err := cc.GetInformer(waitCtx(t), &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	c := newCachedClient(t, o, cc)
	c.record(cm("a", "x", "200", nil))
	err = c.Get(waitCtx(t), types.NamespacedName{Namespace: "a", Name: "x"}, &corev1.ConfigMap{}, FailIfNotFresh)
	if errors.Is(err, ErrNotFresh) || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("got %v, want the plain read's NotFound", err)
	}
	if n := logs.count("cannot be wrapped"); n != 1 {
		t.Errorf("two unwrapped informers logged %d times, want once:\n%s", n, logs)
	}
}

// logCapture collects log lines.
type logCapture struct {
	mu    sync.Mutex
	lines []string
}

func (c *logCapture) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		c.mu.Lock()
		c.lines = append(c.lines, prefix+" "+args)
		c.mu.Unlock()
	}, funcr.Options{})
}

func (c *logCapture) count(substr string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, l := range c.lines {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

func (c *logCapture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.lines, "\n")
}

// TestCacheNeedsNoLeaderElection: like controller-runtime's cache, the
// cache runs on every replica: a second cache added to a manager whose
// leader election this replica never wins still starts and syncs.
func TestCacheNeedsNoLeaderElection(t *testing.T) {
	cc, err := Options{DisableMetrics: true}.NewCache(offlineConfig(), crcache.Options{Scheme: scheme.Scheme, Mapper: staticMapper()})
	if err != nil {
		t.Fatal(err)
	}
	ler, ok := cc.(manager.LeaderElectionRunnable)
	if !ok || ler.NeedLeaderElection() {
		t.Fatalf("the cache is not a LeaderElectionRunnable answering false (ok=%v)", ok)
	}

	mgr, err := manager.New(offlineConfig(), manager.Options{
		Scheme:                              scheme.Scheme,
		MapperProvider:                      func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return staticMapper(), nil },
		NewCache:                            Options{DisableMetrics: true}.NewCache,
		NewClient:                           Options{}.NewClient,
		Metrics:                             metricsserver.Options{BindAddress: "0"},
		LeaderElection:                      true,
		LeaderElectionResourceLockInterface: neverLeader{},
	})
	if err != nil {
		t.Fatal(err)
	}
	second, err := Options{DisableMetrics: true}.NewCache(offlineConfig(), crcache.Options{Scheme: scheme.Scheme, Mapper: staticMapper()})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(second); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	if !second.WaitForCacheSync(waitCtx(t)) {
		t.Fatal("the added cache never started on a replica that is not the leader")
	}
}

// neverLeader is a lease this replica never gets.
type neverLeader struct{}

var errNoLease = errors.New("this replica never leads")

func (neverLeader) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	return nil, nil, errNoLease
}
func (neverLeader) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	return errNoLease
}
func (neverLeader) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	return errNoLease
}
func (neverLeader) RecordEvent(string) {}
func (neverLeader) Identity() string   { return "replica-2" }
func (neverLeader) Describe() string   { return "test/never" }

// countingReader is a cache reader that is not freshctrl's.
type countingReader struct {
	mu    sync.Mutex
	calls int
	err   error
}

func (r *countingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	return r.err
}

func (r *countingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	return r.err
}

func (r *countingReader) called() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// TestNewClientAcceptsAnyReader: with a cache reader that is not
// freshctrl's, NewClient is controller-runtime's client: the reader serves
// cached reads, ErrResourceNotCached comes through, DisableFor and
// unstructured objects go to the server; the log says once that
// read-your-writes is off.
func TestNewClientAcceptsAnyReader(t *testing.T) {
	ctx := waitCtx(t)
	logs := &logCapture{}
	r := &countingReader{}
	cl, err := Options{Logger: logs.logger()}.NewClient(offlineConfig(), client.Options{
		Scheme: scheme.Scheme, Mapper: staticMapper(),
		Cache: &client.CacheOptions{Reader: r, DisableFor: []client.Object{&corev1.Namespace{}}},
	})
	if err != nil {
		t.Fatalf("NewClient refused a reader: %v", err)
	}
	key := types.NamespacedName{Namespace: "a", Name: "x"}
	for range 3 {
		if err := cl.Get(ctx, key, &corev1.ConfigMap{}); err != nil {
			t.Fatal(err)
		}
		if err := cl.List(ctx, &corev1.ConfigMapList{}); err != nil {
			t.Fatal(err)
		}
	}
	if r.called() != 6 {
		t.Fatalf("reader called %d times, want 6", r.called())
	}
	// Not cached: these go to the (unreachable) server, never the reader.
	_ = cl.Get(ctx, types.NamespacedName{Name: "ns"}, &corev1.Namespace{})
	_ = cl.List(ctx, &corev1.NamespaceList{})
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	_ = cl.Get(ctx, key, u)
	if r.called() != 6 {
		t.Fatalf("reader called for an uncached read (%d calls)", r.called())
	}
	if n := logs.count("read-your-writes"); n != 1 {
		t.Errorf("read-your-writes being off logged %d times, want once:\n%s", n, logs)
	}

	notCached := &countingReader{err: &crcache.ErrResourceNotCached{}}
	cl, err = Options{Logger: funcr.New(func(string, string) {}, funcr.Options{})}.NewClient(offlineConfig(), client.Options{Scheme: scheme.Scheme, Mapper: staticMapper(), Cache: &client.CacheOptions{Reader: notCached}})
	if err != nil {
		t.Fatal(err)
	}
	var errNotCached *crcache.ErrResourceNotCached
	if err := cl.Get(ctx, key, &corev1.ConfigMap{}); !errors.As(err, &errNotCached) {
		t.Errorf("Get: got %v, want ErrResourceNotCached", err)
	}
	if err := cl.List(ctx, &corev1.ConfigMapList{}); !errors.As(err, &errNotCached) {
		t.Errorf("List: got %v, want ErrResourceNotCached", err)
	}
}

// TestReadBeforeStartSaysNotStarted: a read through the client before the
// cache started fails with controller-runtime's ErrCacheNotStarted at
// once, even with a write to wait for (no informer runs to wait on).
func TestReadBeforeStartSaysNotStarted(t *testing.T) {
	o := Options{DisableMetrics: true, Timeout: 20 * time.Second}
	for _, prepare := range []bool{false, true} {
		cc, err := o.NewCache(offlineConfig(), crcache.Options{Scheme: scheme.Scheme, Mapper: staticMapper()})
		if err != nil {
			t.Fatal(err)
		}
		if prepare { // the informer exists, not running
			if _, err := cc.GetInformer(waitCtx(t), &corev1.ConfigMap{}); err != nil {
				t.Fatal(err)
			}
		}
		c := newCachedClient(t, o, cc)
		c.record(cm("a", "x", "200", nil))
		var notStarted *crcache.ErrCacheNotStarted
		err = c.Get(waitCtx(t), types.NamespacedName{Namespace: "a", Name: "x"}, &corev1.ConfigMap{}, WaitTimeout(2*time.Second))
		if !errors.As(err, &notStarted) {
			t.Errorf("informer made first %v: got %v, want ErrCacheNotStarted", prepare, err)
		}
		err = c.List(waitCtx(t), &corev1.ConfigMapList{}, WaitTimeout(2*time.Second))
		if !errors.As(err, &notStarted) {
			t.Errorf("informer made first %v: List got %v, want ErrCacheNotStarted", prepare, err)
		}
	}
}

// TestRemoveInformerIsForgotten: RemoveInformer drops the informer from
// freshctrl's records too (its metric name is freed, reads stop waiting
// on it): add/remove cycles leave nothing behind.
func TestRemoveInformerIsForgotten(t *testing.T) {
	reg := newTestRegistry(t)
	// The informers run: serve them, rather than have them list and watch
	// the offline server. Its "connection refused" is retriable to
	// client-go's watch-list, whose Reflector (client-go v0.36 and v0.37,
	// reflector.go watchList) then sleeps out its backoff (0.8s, doubling
	// up to 30s) without watching its context: the informers would
	// outlive the cache by seconds.
	cc, err := Options{Registerer: reg, NewListerWatcher: idleListerWatcher}.NewCache(offlineConfig(), crcache.Options{
		Scheme: scheme.Scheme, Mapper: staticMapper(),
		DefaultNamespaces: map[string]crcache.Config{"a": {}, "b": {}},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := cc.(*Cache)
	startCache(t, cc)
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	noBlock := crcache.BlockUntilSynced(false)
	ctx := waitCtx(t)
	if _, err := cc.GetInformer(ctx, m, noBlock); err != nil { // stays
		t.Fatal(err)
	}
	for i := range 50 {
		if _, err := cc.GetInformer(ctx, &corev1.ConfigMap{}, noBlock); err != nil {
			t.Fatal(err)
		}
		if i == 0 && len(c.FreshInformers()) != 4 {
			t.Fatalf("%d informers, want 4", len(c.FreshInformers()))
		}
		if err := cc.RemoveInformer(ctx, &corev1.ConfigMap{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := informerNames(c, "configmaps"); strings.Join(got, " ") != "metadata|metadata:ns=a metadata|metadata:ns=b" {
		t.Errorf("informers after 50 add/remove cycles: %v", got)
	}
	// The next one is made again under its own name.
	if _, err := cc.GetInformer(ctx, &corev1.ConfigMap{}, noBlock); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(informerNames(c, "configmaps"), " "); !strings.Contains(got, "typed|ns=a ") {
		t.Errorf("informers: %s", got)
	}
}

// TestGetInformerByRepresentation: GetInformer, GetInformerForKind and
// BlockUntilSynced(false) behave as controller-runtime's; unstructured and
// metadata-only informers are FreshInformers of their own.
func TestGetInformerByRepresentation(t *testing.T) {
	cc, err := Options{DisableMetrics: true}.NewCache(offlineConfig(), crcache.Options{Scheme: scheme.Scheme, Mapper: staticMapper()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := waitCtx(t)
	gvk := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	byKind, err := cc.GetInformerForKind(ctx, gvk, crcache.BlockUntilSynced(false))
	if err != nil {
		t.Fatal(err)
	}
	typed, err := cc.GetInformer(ctx, &corev1.ConfigMap{}, crcache.BlockUntilSynced(false))
	if err != nil {
		t.Fatal(err)
	}
	if byKind != typed {
		t.Error("GetInformerForKind and GetInformer returned different informers")
	}
	for _, obj := range []client.Object{&unstructured.Unstructured{}, &metav1.PartialObjectMetadata{}} {
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		inf, err := cc.GetInformer(ctx, obj, crcache.BlockUntilSynced(false))
		if err != nil {
			t.Fatal(err)
		}
		if inf == typed {
			t.Errorf("%T shares the typed informer", obj)
		}
		if _, ok := inf.(*fcache.FreshInformer); !ok {
			t.Errorf("%T informer is a %T", obj, inf)
		}
	}
	if _, err := cc.GetInformerForKind(ctx, schema.GroupVersionKind{Version: "v1", Kind: "NoSuchKind"}); err == nil {
		t.Error("GetInformerForKind of an unknown kind succeeded")
	}
}

// waitGoroutinesEnded waits until no goroutine runs but those before
// ignores (goleak.IgnoreCurrent at the start of what is checked) and those
// TestMain ignores; it fails the test if some still run after 30s.
func waitGoroutinesEnded(t *testing.T, before goleak.Option) {
	t.Helper()
	opts := append([]goleak.Option{before}, ignoredGoroutines...)
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := goleak.Find(opts...) // retries for a while itself
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("goroutines still run 30s after the cache stopped: %v", err)
			return
		}
	}
}

// idleListerWatcher has an informer list nothing and then watch until it
// stops, without a server.
func idleListerWatcher(inf ScopedInformer) toolscache.ListerWatcher {
	var list runtime.Object
	gvk := inf.GroupVersionKind
	switch inf.Representation {
	case Metadata:
		list = &metav1.PartialObjectMetadataList{}
	case Unstructured:
		u := &unstructured.UnstructuredList{}
		u.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		list = u
	default:
		l, err := scheme.Scheme.New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err != nil {
			panic(err) // the hook has no error to return
		}
		list = l
	}
	if err := meta.SetList(list, nil); err != nil {
		panic(err)
	}
	la, err := meta.ListAccessor(list)
	if err != nil {
		panic(err)
	}
	la.SetResourceVersion("1")
	return idleLW{list: list}
}

// idleLW lists an empty list, then watches until the Reflector stops the
// watch. Its informer syncs at once and never retries.
type idleLW struct{ list runtime.Object }

func (l idleLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), opts)
}

func (l idleLW) ListWithContext(context.Context, metav1.ListOptions) (runtime.Object, error) {
	return l.list.DeepCopyObject(), nil
}

func (idleLW) Watch(metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil }

func (idleLW) WatchWithContext(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return watch.NewFake(), nil
}

// IsWatchListSemanticsUnSupported has client-go's Reflector list, then watch.
func (idleLW) IsWatchListSemanticsUnSupported() bool { return true }

func setAtomicFIFO(t *testing.T, on bool) {
	clientgofeaturestesting.SetFeatureDuringTest(t, clientgofeatures.AtomicFIFO, on)
}

func newTestRegistry(*testing.T) *prometheus.Registry { return prometheus.NewRegistry() }
