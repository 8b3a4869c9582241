package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	countingv1alpha1 "github.com/freshinformer/freshinformer/examples/crdcontroller/apis/counting/v1alpha1"
	"github.com/freshinformer/freshinformer/examples/crdcontroller/generated/clientset/versioned/fake"
	"github.com/freshinformer/freshinformer/examples/crdcontroller/generated/informers/externalversions"
	"github.com/freshinformer/freshinformer/freshtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// slowWatch delays every watch event by d, as a loaded apiserver or
// network does: a read right after a write finds the cache behind it.
type slowWatch struct {
	in   watch.Interface
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

func delayed(in watch.Interface, d time.Duration) watch.Interface {
	w := &slowWatch{in: in, out: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		defer close(w.out)
		for ev := range in.ResultChan() {
			select {
			case <-time.After(d):
			case <-w.stop:
				return
			}
			select {
			case w.out <- ev:
			case <-w.stop:
				return
			}
		}
	}()
	return w
}

func (w *slowWatch) ResultChan() <-chan watch.Event { return w.out }
func (w *slowWatch) Stop()                          { w.once.Do(func() { close(w.stop); w.in.Stop() }) }

// newFake returns the generated fake clientset, stamping resource versions
// as a server does (409 on a stale update) and delaying watch events.
func newFake(objects ...runtime.Object) *fake.Clientset {
	c := fake.NewSimpleClientset()
	t := freshtest.Stamp(&c.Fake, c.Tracker())
	for _, o := range objects {
		if err := t.Add(o); err != nil {
			panic(err)
		}
	}
	c.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		w, err := t.Watch(a.GetResource(), a.GetNamespace(), a.(k8stesting.WatchActionImpl).ListOptions)
		if err != nil {
			return true, nil, err
		}
		return true, delayed(w, 5*time.Millisecond), nil
	})
	return c
}

// run counts two Counters up (one capped by the Ceiling) and returns the
// controller's stats.
func run(t *testing.T, fresh bool) Stats {
	const target = 20
	client := newFake(
		&countingv1alpha1.Counter{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}, Spec: countingv1alpha1.CounterSpec{Target: target}},
		&countingv1alpha1.Counter{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"}, Spec: countingv1alpha1.CounterSpec{Target: 2 * target}},
		&countingv1alpha1.Ceiling{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: countingv1alpha1.CeilingSpec{Max: target}},
	)
	factory := externalversions.NewSharedInformerFactoryWithOptions(client, 0, externalversions.WithNamespace("ns"))
	c, err := New(client, factory, fresh)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer func() { cancel(); factory.Shutdown() }()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); c.Run(runCtx, 2) }()
	for _, name := range []string{"a", "b"} {
		for {
			counter, err := client.CountingV1alpha1().Counters("ns").Get(ctx, name, metav1.GetOptions{})
			if err == nil && counter.Status.Count == target {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s did not reach %d: %v %v", name, target, counter, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	stop()
	<-done
	stats := c.Stats()
	t.Logf("fresh=%v: %v", fresh, stats)
	if stats.Writes != 2*target {
		t.Fatalf("%d writes, want %d (the ceiling caps b at %d)", stats.Writes, 2*target, target)
	}
	return stats
}

// With the generated informers made fresh, no reconcile reads a Counter
// older than its own last write, so none conflicts.
func TestFreshReadsNoStaleCounter(t *testing.T) {
	if s := run(t, true); s.StaleReads != 0 || s.Conflicts != 0 {
		t.Fatalf("fresh: %v", s)
	}
}

// The plain generated informers, on the same fake, read stale Counters:
// the count the test above holds at zero is there to see.
func TestPlainReadsStaleCounters(t *testing.T) {
	if s := run(t, false); s.StaleReads == 0 || s.Conflicts == 0 {
		t.Fatalf("plain: %v; want stale reads and conflicts (watch events come 5 ms late)", s)
	}
}
