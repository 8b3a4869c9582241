package cache

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/informertest"
	"github.com/freshinformer/freshinformer/internal/prove"
	"github.com/freshinformer/freshinformer/internal/resources"
)

// streamMode picks the Reflector's path: a list then a watch, or a
// watch-list (initial events ending in a bookmark, client-go's default).
type streamMode int

const (
	listThenWatch streamMode = iota
	watchList
)

func (m streamMode) String() string { return [...]string{"list+watch", "watch-list"}[m] }

var modes = []streamMode{listThenWatch, watchList}

// listResponse is what the scripted server answers to one list (or to the
// initial events of one watch-list).
type listResponse struct {
	rv      string
	objects []*corev1.ConfigMap
	err     error
	delay   time.Duration // how long the server takes to answer
}

// scriptedLW is a ListerWatcher whose answers the test scripts: lists come
// from a queue of responses (the last one repeats), and each watch is a
// client-go fake watcher the test drives.
type scriptedLW struct {
	t    *testing.T
	mode streamMode

	mu         sync.Mutex
	lists      []listResponse
	listCalls  []metav1.ListOptions
	watchOpts  []metav1.ListOptions
	watchErrs  []error // what the next watch requests fail with
	watchLists int     // watch-lists answered with initial events
	watchers   chan *watch.RaceFreeFakeWatcher
	probes     gate // limit=1 lists (holdProbes)
}

// gate holds requests of one kind while closed. Under scriptedLW.mu.
type gate struct {
	ch   chan struct{} // while set, requests wait for it to close
	held int           // requests that waited
}

// holdProbes makes the informer's limit=1 lists (freshness and restore
// probes) wait until release is called.
func (lw *scriptedLW) holdProbes() (release func()) { return lw.hold(&lw.probes) }

// heldProbes reports how many limit=1 lists have waited for holdProbes.
func (lw *scriptedLW) heldProbes() int { return lw.heldAt(&lw.probes) }

func (lw *scriptedLW) hold(g *gate) (release func()) {
	ch := make(chan struct{})
	lw.mu.Lock()
	g.ch = ch
	lw.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			lw.mu.Lock()
			g.ch = nil
			lw.mu.Unlock()
			close(ch)
		})
	}
}

func (lw *scriptedLW) heldAt(g *gate) int {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return g.held
}

// pass waits while g holds requests; lw.mu is held, and released meanwhile.
func (lw *scriptedLW) pass(g *gate) {
	if ch := g.ch; ch != nil {
		g.held++
		lw.mu.Unlock()
		<-ch
		lw.mu.Lock()
	}
}

func newScriptedLW(t *testing.T, mode streamMode, first listResponse) *scriptedLW {
	return &scriptedLW{t: t, mode: mode, lists: []listResponse{first}, watchers: make(chan *watch.RaceFreeFakeWatcher, 16)}
}

// queueLists sets what the next lists answer (the last one repeats).
func (lw *scriptedLW) queueLists(rs ...listResponse) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.lists = rs
}

func (lw *scriptedLW) nextList(opts metav1.ListOptions) listResponse {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.listCalls = append(lw.listCalls, opts)
	r := lw.lists[0]
	if len(lw.lists) > 1 {
		lw.lists = lw.lists[1:]
	}
	return r
}

func (lw *scriptedLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	if opts.Limit == 1 { // a freshness probe: the current answer, not consumed
		lw.mu.Lock()
		lw.pass(&lw.probes)
		lw.listCalls = append(lw.listCalls, opts)
		r := lw.lists[0]
		lw.mu.Unlock()
		return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: r.rv}}, r.err
	}
	r := lw.nextList(opts)
	time.Sleep(r.delay)
	if r.err != nil {
		return nil, r.err
	}
	list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: r.rv}}
	for _, o := range r.objects {
		list.Items = append(list.Items, *o.DeepCopy())
	}
	return list, nil
}

func (lw *scriptedLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds == prove.AuxWatchTimeoutSeconds {
		return watch.NewFake(), nil // a freshness probe's watch: silent (quiet_test.go scripts them)
	}
	lw.mu.Lock()
	w := watch.NewRaceFreeFake()
	lw.watchOpts = append(lw.watchOpts, opts)
	if len(lw.watchErrs) > 0 {
		err := lw.watchErrs[0]
		lw.watchErrs = lw.watchErrs[1:]
		lw.mu.Unlock()
		return nil, err
	}
	lw.mu.Unlock()
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		r := lw.nextList(opts)
		if r.err != nil {
			return nil, r.err
		}
		lw.mu.Lock()
		lw.watchLists++
		lw.mu.Unlock()
		for _, o := range r.objects {
			w.Add(o.DeepCopy())
		}
		w.Action(watch.Bookmark, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			ResourceVersion: r.rv,
			Annotations:     map[string]string{metav1.InitialEventsAnnotationKey: "true"},
		}})
	}
	lw.watchers <- w
	return w, nil
}

// IsWatchListSemanticsUnSupported steers client-go's Reflector between the
// two paths.
func (lw *scriptedLW) IsWatchListSemanticsUnSupported() bool { return lw.mode != watchList }

// nextWatcher returns the watch the Reflector opened next.
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

// listCount reports how many lists (probes included) were asked for.
func (lw *scriptedLW) listCount() int {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return len(lw.listCalls)
}

func (lw *scriptedLW) lastListOptions() metav1.ListOptions {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.listCalls[len(lw.listCalls)-1]
}

func cm(name, rv string, data ...string) *corev1.ConfigMap {
	c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
	if len(data) > 0 {
		c.Data = map[string]string{"v": data[0]}
	}
	return c
}

func bookmark(rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}}
}

func goneError() *metav1.Status {
	s := apierrors.NewResourceExpired("too old resource version").Status()
	return &s
}

// stopFuncs maps each running informer to its stop function.
var stopFuncs sync.Map

// runInformer starts inf and returns a stop function that stops it and
// waits until RunWithContext has returned.
func runInformer(t *testing.T, inf *FreshInformer) (stop func()) {
	t.Helper()
	stop = informertest.Run(t, inf)
	stopFuncs.Store(inf, stop)
	return stop
}

func waitSynced(t *testing.T, inf toolscache.SharedInformer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
}

func waitFresh(t *testing.T, inf *FreshInformer, rv string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := inf.WaitForFreshness(ctx, rv); err != nil {
		t.Fatalf("WaitForFreshness(%s): %v", rv, err)
	}
}

// cached returns the resource version of the cached ns/name, "" if absent.
func cached(inf *FreshInformer, name string) string {
	obj, ok, _ := inf.GetIndexer().GetByKey("ns/" + name)
	if !ok {
		return ""
	}
	return obj.(*corev1.ConfigMap).ResourceVersion
}

// recorder is a ResourceEventHandler that records what it is told.
type recorder struct {
	mu     sync.Mutex
	events []string
	notify chan struct{}
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 1024)} }

// recordHandlers adds a new recorder to inf's handlers.
func recordHandlers(t *testing.T, inf *FreshInformer) *recorder {
	t.Helper()
	rec := newRecorder()
	if _, err := inf.AddEventHandler(rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

func (r *recorder) record(s string) {
	r.mu.Lock()
	r.events = append(r.events, s)
	r.mu.Unlock()
	r.notify <- struct{}{}
}

func (r *recorder) OnAdd(obj any, initial bool) {
	r.record(fmt.Sprintf("add %s@%s initial=%v", name(obj), resources.ResourceVersion(obj), initial))
}
func (r *recorder) OnUpdate(old, obj any) {
	r.record(fmt.Sprintf("update %s@%s->%s", name(obj), resources.ResourceVersion(old), resources.ResourceVersion(obj)))
}
func (r *recorder) OnDelete(obj any) {
	r.record(fmt.Sprintf("delete %s@%s", name(obj), resources.ResourceVersion(obj)))
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

// waitFor waits until the recorder holds n events.
func (r *recorder) waitFor(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if ev := r.get(); len(ev) >= n {
			return ev
		}
		select {
		case <-r.notify:
		case <-deadline:
			t.Fatalf("handler got %v, want %d events", r.get(), n)
		}
	}
}

func name(obj any) string {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return "tombstone:" + d.Key
	}
	if m := resources.Meta(obj); m != nil {
		return m.GetName()
	}
	return fmt.Sprintf("%T", obj)
}

// current returns the applied resource version.
func (f *FreshInformer) current() freshness.RV {
	return f.trust.View().Applied
}
