package cache

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
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
