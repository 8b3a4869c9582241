package freshtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
)

// heldFor checks that inf does not reach rv while the Lag holds (for a
// while: the event is held, so no wait can end it), then does once held
// events are released by release.
func heldFor(t *testing.T, inf *cache.FreshInformer, rv string, release func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := inf.WaitForFreshness(ctx, rv); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("while held: %v, want a timeout", err)
	}
	release()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := inf.WaitForFreshness(ctx, rv); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

func startInformer(t *testing.T, inf *cache.FreshInformer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { inf.RunWithContext(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("not synced")
	}
}

func createCM(t *testing.T, c kubernetes.Interface, name string) *corev1.ConfigMap {
	t.Helper()
	cm, err := c.CoreV1().ConfigMaps("ns").Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func TestLagHoldsFakeWatches(t *testing.T) {
	c := NewClientset()
	lag := NewLag()
	lag.Fake(&c.Fake)
	defer lag.Release()
	factory := cache.NewSharedInformerFactory(c, 0)
	inf, _ := cache.FreshInformerOf(factory.Core().V1().ConfigMaps().Informer())
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	factory.WaitForCacheSync(ctx.Done())

	before := createCM(t, c, "before")
	if err := inf.WaitForFreshness(ctx, before.ResourceVersion); err != nil {
		t.Fatal(err)
	}
	lag.Hold()
	held := createCM(t, c, "held")
	heldFor(t, inf, held.ResourceVersion, lag.Release)
}

func TestLagHoldFor(t *testing.T) {
	c := NewClientset()
	lag := NewLag()
	lag.Fake(&c.Fake)
	factory := cache.NewSharedInformerFactory(c, 0)
	inf, _ := cache.FreshInformerOf(factory.Core().V1().ConfigMaps().Informer())
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	factory.WaitForCacheSync(ctx.Done())

	lag.HoldFor(300 * time.Millisecond)
	lag.HoldFor(time.Hour) // held already: changes nothing
	held := createCM(t, c, "held")
	heldFor(t, inf, held.ResourceVersion, func() {}) // released by the first timer
}

func TestLagListerWatcher(t *testing.T) {
	c := NewClientset()
	lag := NewLag()
	defer lag.Release()
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.CoreV1().ConfigMaps("ns").List(ctx, o)
		},
		WatchFuncWithContext: c.CoreV1().ConfigMaps("ns").Watch,
	}
	inf := cache.NewSharedIndexInformer(lag.ListerWatcher(toolscache.ToListWatcherWithWatchListSemantics(lw, c)), &corev1.ConfigMap{}, 0, nil)
	startInformer(t, inf)
	lag.Hold()
	held := createCM(t, c, "held")
	heldFor(t, inf, held.ResourceVersion, lag.Release)
}

// WrapConfig holds a real HTTP watch stream: an event the server sends
// while held reaches the watcher only once released.
func TestLagWrapConfig(t *testing.T) {
	events := make(chan string)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" {
			http.Error(w, "watches only", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			select {
			case name := <-events:
				fmt.Fprintf(w, `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":%q,"namespace":"ns","resourceVersion":"5"}}}`+"\n", name)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	}))
	defer srv.Close()
	lag := NewLag()
	defer lag.Release()
	c := kubernetes.NewForConfigOrDie(lag.WrapConfig(&rest.Config{Host: srv.URL}))
	w, err := c.CoreV1().ConfigMaps("ns").Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	events <- "before"
	if ev := <-w.ResultChan(); ev.Object.(*corev1.ConfigMap).Name != "before" {
		t.Fatalf("got %v", ev)
	}
	lag.Hold()
	events <- "held"
	select {
	case ev := <-w.ResultChan():
		t.Fatalf("delivered while held: %v", ev)
	case <-time.After(100 * time.Millisecond):
	}
	lag.Release()
	select {
	case ev := <-w.ResultChan():
		if ev.Object.(*corev1.ConfigMap).Name != "held" {
			t.Fatalf("got %v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not delivered after release")
	}
}
