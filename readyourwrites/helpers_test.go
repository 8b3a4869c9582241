package readyourwrites

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/internal/informertest"
)

func TestMain(m *testing.M) {
	// Informers log refused lists and regressions at error level; some
	// tests provoke them on purpose.
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m)
}

var configMapsResource = schema.GroupResource{Resource: "configmaps"}

// listResponse is what the scripted server answers to a list.
type listResponse struct {
	rv      string
	objects []*corev1.ConfigMap
}

// scriptedLW is a ListerWatcher whose answers the test scripts: lists come
// from a queue of responses (the last one repeats), the informer's watch is
// a fake the test drives, and the watches of the informer's quiet-resource
// probe (short timeouts) stay silent.
type scriptedLW struct {
	t *testing.T

	mu        sync.Mutex
	lists     []listResponse
	listCalls int
	watchers  chan *watch.RaceFreeFakeWatcher
}

func newScriptedLW(t *testing.T, first listResponse) *scriptedLW {
	return &scriptedLW{t: t, lists: []listResponse{first}, watchers: make(chan *watch.RaceFreeFakeWatcher, 16)}
}

// queueLists sets what the next lists answer (the last one repeats).
func (lw *scriptedLW) queueLists(rs ...listResponse) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.lists = rs
}

func (lw *scriptedLW) listCount() int {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.listCalls
}

func (lw *scriptedLW) List(opts metav1.ListOptions) (apiruntime.Object, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.listCalls++
	r := lw.lists[0]
	if len(lw.lists) > 1 && opts.Limit != 1 { // a probe's limit=1 list reads the current answer
		lw.lists = lw.lists[1:]
	}
	list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: r.rv}}
	for _, o := range r.objects {
		list.Items = append(list.Items, *o.DeepCopy())
	}
	return list, nil
}

func (lw *scriptedLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds < 60 {
		return watch.NewFake(), nil // the quiet-resource probe's watch: silent
	}
	w := watch.NewRaceFreeFake()
	lw.watchers <- w
	return w, nil
}

// IsWatchListSemanticsUnSupported has client-go's Reflector list, then watch.
func (lw *scriptedLW) IsWatchListSemanticsUnSupported() bool { return true }

func (lw *scriptedLW) nextWatcher() *watch.RaceFreeFakeWatcher {
	lw.t.Helper()
	select {
	case w := <-lw.watchers:
		return w
	case <-time.After(10 * time.Second):
		lw.t.Fatal("the informer opened no watch")
		return nil
	}
}

// stopFuncs maps each running informer to its stop function.
var stopFuncs sync.Map

// runInformer starts inf until the test ends and returns a function that
// stops it and waits until it has.
func runInformer(t *testing.T, inf *cache.FreshInformer) (stop func()) {
	t.Helper()
	stop = informertest.Run(t, inf)
	stopFuncs.Store(inf, stop)
	return stop
}

func mustStop(t *testing.T, inf *cache.FreshInformer) func() {
	t.Helper()
	stop, ok := stopFuncs.Load(inf)
	if !ok {
		t.Fatal("informer not started by runInformer")
	}
	return stop.(func())
}

// startScripted runs a ConfigMap informer over a scripted server whose
// first list is first, and returns it synced, with its server and watch.
func startScripted(t *testing.T, first listResponse, opts ...cache.Option) (*cache.FreshInformer, *scriptedLW, *watch.RaceFreeFakeWatcher) {
	t.Helper()
	lw := newScriptedLW(t, first)
	// No quiet probes unless asked for: a script's consistent reads answer
	// the script, not what its stream delivered, and one below that would
	// show a restore (or a written resource version beyond the server).
	opts = append([]cache.Option{cache.WithQuietProbeDelay(-1)}, opts...)
	inf := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{}, opts...)
	runInformer(t, inf)
	w := lw.nextWatcher()
	waitSynced(t, inf)
	return inf, lw, w
}

func waitSynced(t *testing.T, inf toolscache.SharedInformer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
}

func waitFresh(t *testing.T, inf *cache.FreshInformer, rv string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := inf.WaitForFreshness(ctx, rv); err != nil {
		t.Fatalf("WaitForFreshness(%s): %v", rv, err)
	}
}

// cached returns the resource version of the cached ns/name, "" if absent.
func cached(inf *cache.FreshInformer, name string) string {
	obj, ok, _ := inf.GetIndexer().GetByKey("ns/" + name)
	if !ok {
		return ""
	}
	return obj.(*corev1.ConfigMap).ResourceVersion
}

func cm(name, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
}

func withUID(c *corev1.ConfigMap, uid string) *corev1.ConfigMap {
	c.UID = types.UID(uid)
	return c
}

func inNamespace(c *corev1.ConfigMap, ns string) *corev1.ConfigMap { c.Namespace = ns; return c }

func terminating(c *corev1.ConfigMap) *corev1.ConfigMap {
	now := metav1.Now()
	c.DeletionTimestamp = &now
	c.Finalizers = []string{"example.com/keep"}
	return c
}

func owner(name, uid string) Owner {
	return Owner{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}, UID: types.UID(uid)}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
