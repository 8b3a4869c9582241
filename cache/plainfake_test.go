package cache

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/freshness"
)

// notServed is a type that client-go's clientset does not serve.
type notServed struct {
	metav1.TypeMeta
	metav1.ObjectMeta
}

func (n *notServed) DeepCopyObject() runtime.Object { c := *n; return &c }

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

// On client-go's plain fake, which keeps the resource version the client
// set, a name created, deleted and created again at one version (as
// kube-controller-manager's TestExpectationsOnRecreate does) reaches
// handlers three times: writes that share a version cannot be ordered, so
// none of them may be taken for a replay of another.
func TestPlainFakeRecreatedNameReachesHandlers(t *testing.T) {
	client := fake.NewSimpleClientset() //nolint:staticcheck // the fake kube-controller-manager's tests use
	f := NewSharedInformerFactory(client, 0)
	inf := f.Core().V1().ConfigMaps().Informer()
	type event struct{ kind, uid string }
	events := make(chan event, 10)
	uidOf := func(obj any) string {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		return string(obj.(*corev1.ConfigMap).UID)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { events <- event{"add", uidOf(obj)} },
		UpdateFunc: func(_, obj any) { events <- event{"update", uidOf(obj)} },
		DeleteFunc: func(obj any) { events <- event{"delete", uidOf(obj)} },
	}); err != nil {
		t.Fatal(err)
	}
	ctx := startFactory(t, f)
	next := func(want event) {
		t.Helper()
		select {
		case got := <-events:
			if got != want {
				t.Fatalf("handler heard %+v, want %+v", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("handler never heard %+v", want)
		}
	}
	cms := client.CoreV1().ConfigMaps("ns")
	// As the upstream test does: the second is a copy of what the first
	// Create returned, with a new UID.
	first, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x", UID: "first", ResourceVersion: "18"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next(event{"add", "first"})
	if err := cms.Delete(ctx, "x", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	next(event{"delete", "first"})
	second := first.DeepCopy()
	second.UID = "second"
	if _, err := cms.Create(ctx, second, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	next(event{"add", "second"})
	if obj, ok, _ := inf.GetIndexer().GetByKey("ns/x"); !ok || uidOf(obj) != "second" {
		t.Fatalf("the indexer holds %v (present %v), want the second x", obj, ok)
	}
	fi, _ := FreshInformerOf(inf)
	if err := fi.WaitForFreshness(ctx, "18"); !errors.Is(err, freshness.ErrIncomparable) || !strings.Contains(err.Error(), "freshtest") {
		t.Fatalf("WaitForFreshness over writes sharing a resource version: %v; want ErrIncomparable naming package freshtest", err)
	}
}

// On client-go's fake, a list counts its resource version apart from the
// objects', which carry none until a client sets one. The objects' versions
// then cannot be ordered with the list's, so an update at a lower version
// than the list's still reaches the cache and handlers (kube-controller-
// manager's TestFinalizersRemovedExpectations updates at "1").
func TestPlainFakeUpdateBelowTheListsVersionIsApplied(t *testing.T) {
	client := fake.NewClientset()
	gvr := corev1.SchemeGroupVersion.WithResource("configmaps")
	for _, name := range []string{"a", "b", "c"} {
		if err := client.Tracker().Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	f := NewSharedInformerFactory(client, 0)
	inf := f.Core().V1().ConfigMaps().Informer()
	updated := make(chan string, 10)
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { updated <- obj.(*corev1.ConfigMap).Data["v"] },
	}); err != nil {
		t.Fatal(err)
	}
	ctx := startFactory(t, f)
	if err := client.Tracker().Update(gvr, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", ResourceVersion: "1"}, Data: map[string]string{"v": "new"}}, "ns"); err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-updated:
		if v != "new" {
			t.Fatalf("handler heard an update to %q", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler never heard the update at resource version 1")
	}
	if obj, _, _ := inf.GetIndexer().GetByKey("ns/a"); obj.(*corev1.ConfigMap).Data["v"] != "new" {
		t.Fatalf("the indexer holds %v", obj)
	}
	fi, _ := FreshInformerOf(inf)
	if err := fi.WaitForFreshness(ctx, "1"); !errors.Is(err, freshness.ErrIncomparable) || !strings.Contains(err.Error(), "freshtest") {
		t.Fatalf("WaitForFreshness over a list of unstamped objects: %v; want ErrIncomparable naming package freshtest", err)
	}
}

// startFactory starts f and waits for its caches; the test's end stops it.
func startFactory(t *testing.T, f *SharedInformerFactory) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); f.Shutdown() })
	f.StartWithContext(ctx)
	if err := f.WaitForCacheSyncWithContext(ctx).AsError(); err != nil {
		t.Fatal(err)
	}
	return ctx
}
