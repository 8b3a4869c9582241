package cache

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/freshness"
)

func terminating(c *corev1.ConfigMap) *corev1.ConfigMap {
	now := metav1.Now()
	c.DeletionTimestamp = &now
	c.Finalizers = []string{"example.com/keep"}
	return c
}

// Defect 1: a delete of an object with finalizers leaves it cached,
// terminating, at or past the DELETE response's resource version: fresh.
func TestReadYourWritesDeleteWithFinalizersIsFresh(t *testing.T) {
	inf, _, w := startScripted(t, listThenWatch, listResponse{rv: "10", objects: []*corev1.ConfigMap{withUID(cm("fin", "5"), "f1")}},
		WithResource(configMapsResource))
	ryw := NewReadYourWrites(InformerMap{configMapsResource: inf}, 2*time.Second)
	o := owner("p", "1")
	ryw.RecordDelete(o, configMapsResource, terminating(withUID(cm("fin", "12"), "f1"))) // the DELETE response
	w.Modify(terminating(withUID(cm("fin", "12"), "f1")))
	waitFresh(t, inf, "12")
	if err := ryw.CheckFresh(o); err != nil {
		t.Fatalf("CheckFresh with the terminating object cached at the delete's RV: %v", err)
	}
	ryw.RecordDelete(o, configMapsResource, terminating(withUID(cm("fin", "12"), "f1")))
	if err := ryw.EnsureFresh(context.Background(), o); err != nil {
		t.Fatalf("EnsureFresh with the terminating object cached: %v", err)
	}
}

// Defect 1, the message: a not-fresh delete names its owner.
func TestReadYourWritesDeleteErrorNamesOwner(t *testing.T) {
	inf, lw, _ := startScripted(t, listThenWatch, listResponse{rv: "10", objects: []*corev1.ConfigMap{withUID(cm("held", "5"), "h1")}},
		WithResource(configMapsResource))
	lw.queueLists(listResponse{rv: "10"})
	ryw := NewReadYourWrites(InformerMap{configMapsResource: inf}, 50*time.Millisecond)
	o := owner("parent", "1")
	ryw.RecordDelete(o, configMapsResource, withUID(cm("held", "11"), "h1"))
	err := ryw.EnsureFresh(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "ns/parent") || strings.Contains(err.Error(), "behalf of /") {
		t.Fatalf("EnsureFresh error does not name the owner: %v", err)
	}
}

// Defect 3: concurrent checks and records of one owner must not panic.
func TestReadYourWritesConcurrentSameOwner(t *testing.T) {
	inf, _, w := startScripted(t, listThenWatch, listResponse{rv: "10"}, WithResource(configMapsResource))
	ryw := NewReadYourWrites(InformerMap{configMapsResource: inf}, 2*time.Second)
	o := owner("p", "1")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				name := fmt.Sprintf("d%d-%d", g, i)
				switch i % 3 {
				case 0:
					ryw.RecordDelete(o, configMapsResource, withUID(cm(name, ""), "x"))
				case 1:
					if err := ryw.Record(o, configMapsResource, cm(name, "10")); err != nil {
						t.Error(err)
					}
				}
				_ = ryw.CheckFresh(o)
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_ = ryw.EnsureFresh(ctx, o)
				cancel()
			}
		})
	}
	wg.Wait()
	w.Add(cm("z", "11"))
	if err := ryw.CheckFresh(o); err != nil {
		t.Fatalf("after the hammering: %v", err)
	}
}

// Defect 4: waiting on an informer that was never started fails at once.
func TestReadYourWritesNeverStartedFailsAtOnce(t *testing.T) {
	inf := NewSharedIndexInformer(newScriptedLW(t, listThenWatch, listResponse{rv: "1"}), &corev1.ConfigMap{}, 0, nil, WithResource(configMapsResource))
	ryw := NewReadYourWrites(InformerMap{configMapsResource: inf}, 5*time.Second)
	o := owner("p", "1")
	if err := ryw.Record(o, configMapsResource, cm("c", "7")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := ryw.EnsureFresh(context.Background(), o); !errors.Is(err, ErrNoInformer) {
		t.Fatalf("EnsureFresh on a never started informer: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("EnsureFresh took %v to fail", d)
	}
	if err := ryw.CheckFresh(o); !errors.Is(err, ErrNoInformer) {
		t.Fatalf("CheckFresh on a never started informer: %v", err)
	}
}

// Defect 5: a delete whose event trails the response, on a quiet resource
// while the server's global resource version is far ahead: the wait ends
// with the delete event, not at the next bookmark.
func TestReadYourWritesDeleteOnQuietResource(t *testing.T) {
	inf, lw, w := startScripted(t, listThenWatch, listResponse{rv: "10", objects: []*corev1.ConfigMap{withUID(cm("late", "6"), "l1")}},
		WithResource(configMapsResource))
	lw.queueLists(listResponse{rv: "500"}) // other resources moved the global RV
	ryw := NewReadYourWrites(InformerMap{configMapsResource: inf}, 5*time.Second)
	o := owner("p", "1")
	ryw.RecordDelete(o, configMapsResource, withUID(cm("late", "19"), "l1")) // the DELETE response
	done := make(chan error, 1)
	go func() { done <- ryw.EnsureFresh(context.Background(), o) }()
	time.Sleep(20 * time.Millisecond)
	w.Delete(withUID(cm("late", "19"), "l1"))
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the delete wait did not end with the delete event")
	}
}

// A namespaced factory's cluster-scoped informers see every object.
func TestNamespacedFactoryClusterScopedWrites(t *testing.T) {
	client := fake.NewClientset()
	f := NewSharedInformerFactory(client, 0, WithNamespace("ns"))
	f.Core().V1().Nodes().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); f.Shutdown() }()
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	ryw := NewReadYourWrites(f, time.Second)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "3"}}
	if err := ryw.Record(owner("p", "1"), schema.GroupResource{Resource: "nodes"}, node); err != nil {
		t.Fatalf("Record(node) on a namespaced factory: %v", err)
	}
}

// InformerFor honours a custom newFunc's indexers and list options, as
// client-go's factory does (kube-scheduler's pod informer).
func TestFactoryInformerForCustomNewFunc(t *testing.T) {
	client := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", ResourceVersion: "4"}, Spec: corev1.PodSpec{NodeName: "n1"}})
	f := NewSharedInformerFactory(client, 0)
	byNode := func(obj any) ([]string, error) { return []string{obj.(*corev1.Pod).Spec.NodeName}, nil }
	newFunc := func(c kubernetes.Interface, resync time.Duration) toolscache.SharedIndexInformer {
		return v1.NewFilteredPodInformer(c, "", resync, toolscache.Indexers{"byNode": byNode},
			func(o *metav1.ListOptions) { o.FieldSelector = "status.phase!=Succeeded" })
	}
	inf := f.InformerFor(&corev1.Pod{}, newFunc)
	if _, ok := inf.GetIndexer().GetIndexers()["byNode"]; !ok {
		t.Fatal("the custom newFunc's indexer was dropped")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); f.Shutdown() }()
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	var sawSelector bool
	for _, a := range client.Actions() {
		if l, ok := a.(k8stesting.ListAction); ok && a.GetResource().Resource == "pods" {
			sawSelector = sawSelector || l.GetListRestrictions().Fields.String() == fields.OneTermNotEqualSelector("status.phase", "Succeeded").String()
		}
	}
	if !sawSelector {
		t.Fatalf("the custom newFunc's field selector was dropped: %v", client.Actions())
	}
	if objs, err := inf.GetIndexer().ByIndex("byNode", "n1"); err != nil || len(objs) != 1 {
		t.Fatalf("byNode index: %v %v", objs, err)
	}
}

// notServed is a type that client-go's clientset does not serve.
type notServed struct {
	metav1.TypeMeta
	metav1.ObjectMeta
}

func (n *notServed) DeepCopyObject() runtime.Object { c := *n; return &c }

// A type the clientset does not serve: InformerFor registers, runs and
// reuses the newFunc's informer.
func TestFactoryForeignTypeIsRegistered(t *testing.T) {
	client := fake.NewClientset()
	f := NewSharedInformerFactory(client, 0)
	made := 0
	listed := make(chan struct{}, 1)
	newFunc := func(kubernetes.Interface, time.Duration) toolscache.SharedIndexInformer {
		made++
		return toolscache.NewSharedIndexInformer(toolscache.ToListWatcherWithWatchListSemantics(&toolscache.ListWatch{
			ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
				select {
				case listed <- struct{}{}:
				default:
				}
				return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
			},
			WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
				select { // client-go may stream the list (watch-list)
				case listed <- struct{}{}:
				default:
				}
				return watch.NewFake(), nil
			},
		}, client), &corev1.ConfigMap{}, 0, nil)
	}
	a := f.InformerFor(&notServed{}, newFunc)
	_ = a.SetWatchErrorHandlerWithContext(func(context.Context, *toolscache.Reflector, error) {})
	b := f.InformerFor(&notServed{}, newFunc)
	if a != b || made != 1 {
		t.Fatalf("the foreign informer was not reused: made %d", made)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); f.Shutdown() }()
	f.Start(ctx.Done())
	select {
	case <-listed:
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not run the foreign informer")
	}
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	synced := f.WaitForCacheSync(sctx.Done())
	if ok, in := synced[reflect.TypeFor[*notServed]()]; !in || !ok {
		t.Fatalf("WaitForCacheSync ignored the foreign informer: %v", synced)
	}
}

// Defect 3, deterministically: two checks of one owner snapshot the same
// deletes and settle one after the other (the second used to cut a slice
// that the first had already shortened: a panic).
func TestReadYourWritesConcurrentSettles(t *testing.T) {
	inf, _, _ := startScripted(t, listThenWatch, listResponse{rv: "10"}, WithResource(configMapsResource))
	ryw := NewReadYourWrites(InformerMap{configMapsResource: inf}, time.Second)
	o := owner("p", "1")
	for _, name := range []string{"a", "b"} {
		if err := ryw.RecordDelete(o, configMapsResource, withUID(cm(name, ""), name)); err != nil {
			t.Fatal(err)
		}
	}
	first, second := ryw.pending(o), ryw.pending(o)
	if err := ryw.RecordDelete(o, configMapsResource, withUID(cm("c", ""), "c")); err != nil {
		t.Fatal(err)
	}
	ryw.settled(o, first)
	ryw.settled(o, second)
	if p := ryw.pending(o); len(p.deleted[inf]) != 1 || p.deleted[inf][0].key.Name != "c" {
		t.Fatalf("after both settles: %+v", p.deleted)
	}
}

// An informer over client-go's plain fake (no resource versions) is quiet
// and predictable: no error-level log, and WaitForFreshness fails at once
// with ErrIncomparable.
func TestInformerOverPlainFakeIsQuiet(t *testing.T) {
	client := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}})
	f := NewSharedInformerFactory(client, 0)
	inf, ok := FreshInformerOf(f.Core().V1().ConfigMaps().Informer())
	if !ok {
		t.Fatal("the factory's configmaps informer is not a FreshInformer")
	}
	var mu sync.Mutex
	var errorsLogged []string
	logger := logr.New(&errorSink{record: func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		errorsLogged = append(errorsLogged, msg)
	}})
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	defer func() { cancel(); f.Shutdown() }()
	f.StartWithContext(ctx)
	if err := f.WaitForCacheSyncWithContext(ctx).AsError(); err != nil {
		t.Fatal(err)
	}
	// client-go's fake lists at a per-resource counter but writes objects
	// without resource versions: such an event is applied (not dropped as
	// a malformed one would be) and makes the informer plain until the
	// next comparable list.
	if _, err := client.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "d"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, ok, _ := inf.GetIndexer().GetByKey("ns/d"); !ok && time.Now().Before(deadline); _, ok, _ = inf.GetIndexer().GetByKey("ns/d") {
		time.Sleep(time.Millisecond)
	}
	if _, ok, _ := inf.GetIndexer().GetByKey("ns/d"); !ok {
		t.Fatal("an object created on the fake without a resource version never reached the cache")
	}
	if err := inf.WaitForFreshness(ctx, "1"); !errors.Is(err, freshness.ErrIncomparable) {
		t.Fatalf("WaitForFreshness over a fake without resource versions: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(errorsLogged) > 0 {
		t.Fatalf("errors logged: %q", errorsLogged)
	}
}

// errorSink records error-level log entries only.
type errorSink struct {
	logr.LogSink
	record func(string)
}

func (s *errorSink) Init(logr.RuntimeInfo)               {}
func (s *errorSink) Enabled(int) bool                    { return true }
func (s *errorSink) Info(int, string, ...any)            {}
func (s *errorSink) Error(_ error, msg string, _ ...any) { s.record(msg) }
func (s *errorSink) WithValues(...any) logr.LogSink      { return s }
func (s *errorSink) WithName(string) logr.LogSink        { return s }
