package cache

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	v1 "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/freshness"
)

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
