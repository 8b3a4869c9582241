package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/integration/testenv"
)

// client-go's own idiom on the real control plane: `go inf.RunWithContext(ctx)`,
// then waits at once from other goroutines, for a write the server has
// committed. None may fail with ErrNotStarted (the Run goroutine may not
// have been scheduled yet); each returns nil with the write in the
// indexer. The same through the drop-in factory's getter and Start. An
// informer nobody starts fails with ErrNotStarted within the
// start grace, not at its context's end.
func TestWaitRightAfterGoRunOnTheRealServer(t *testing.T) {
	cs := testenv.Clientset(t)
	ns := testenv.Namespace(t)
	ctx := testenv.Context(t, time.Minute)
	newInformer := func() *cache.FreshInformer {
		lw := toolscache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "configmaps", ns, fields.Everything())
		return cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
	}
	for round := range 3 {
		cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "go-run-"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		inf := newInformer()
		runCtx, stop := context.WithCancel(ctx)
		var run sync.WaitGroup
		run.Go(func() { inf.RunWithContext(runCtx) })
		var waits sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			waits.Go(func() {
				wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				errs <- inf.WaitForFreshness(wctx, cm.ResourceVersion)
			})
		}
		waits.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("round %d: WaitForFreshness(%s) right after go RunWithContext = %v, want nil", round, cm.ResourceVersion, err)
			}
		}
		if _, ok, _ := inf.GetIndexer().GetByKey(ns + "/" + cm.Name); !ok {
			t.Errorf("round %d: the wait returned but the indexer lacks %s", round, cm.Name)
		}
		stop()
		run.Wait()
	}

	// The drop-in factory, as a user writes it: the getter, Start, and a
	// wait at once through cache.WaitForFreshness.
	cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "factory-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	factory := cache.NewSharedInformerFactory(cs, 0, cache.WithNamespace(ns))
	informer := factory.Core().V1().ConfigMaps().Informer()
	fctx, stopFactory := context.WithCancel(ctx)
	factory.Start(fctx.Done())
	wctxF, cancelF := context.WithTimeout(ctx, 30*time.Second)
	err = cache.WaitForFreshness(wctxF, informer, cm.ResourceVersion)
	cancelF()
	if err != nil {
		t.Errorf("cache.WaitForFreshness right after the factory's Start = %v, want nil", err)
	} else if _, ok, _ := informer.GetIndexer().GetByKey(ns + "/" + cm.Name); !ok {
		t.Errorf("the wait returned but the factory's indexer lacks %s", cm.Name)
	}
	stopFactory()
	factory.Shutdown()

	never := newInformer()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	err = never.WaitForFreshness(wctx, "1")
	if took := time.Since(start); !errors.Is(err, freshness.ErrNotStarted) || took > 5*time.Second {
		t.Fatalf("WaitForFreshness on an informer never started = %v after %v, want ErrNotStarted within the start grace", err, took)
	}
}

// A wait whose context cannot end (context.Background(), as scripts and
// tests often pass) blocks on a plain receive, not a select: on the real
// control plane, through the drop-in factory's getter, waits issued at
// once, as the factory starts (before or after Start begins: they race
// it, as a user's do), return nil with the write in the indexer; after the
// sync a wait for the next write does too; and one beyond the server
// fails with ErrTooLargeResourceVersion in under 5 s. The test bounds
// each wait itself, since none can end by its context.
func TestBackgroundContextWaitsThroughTheFactoryOnTheRealServer(t *testing.T) {
	cs := testenv.Clientset(t)
	ns := testenv.Namespace(t)
	ctx := testenv.Context(t, time.Minute)
	create := func(name string) *corev1.ConfigMap {
		cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm
	}
	factory := cache.NewSharedInformerFactory(cs, 0, cache.WithNamespace(ns))
	informer := factory.Core().V1().ConfigMaps().Informer()
	waitBackground := func(rv string, n int) []error {
		errs := make(chan error, n)
		for range n {
			go func() { errs <- cache.WaitForFreshness(context.Background(), informer, rv) }()
		}
		var got []error
		timeout := time.After(30 * time.Second)
		for range n {
			select {
			case err := <-errs:
				got = append(got, err)
			case <-timeout: // reported from the test's goroutine
				return append(got, fmt.Errorf("%d of %d waits still blocked after 30s", n-len(got), n))
			}
		}
		return got
	}
	inIndexer := func(cm *corev1.ConfigMap) bool {
		_, ok, _ := informer.GetIndexer().GetByKey(ns + "/" + cm.Name)
		return ok
	}

	first := create("before-start-")
	fctx, stopFactory := context.WithCancel(ctx)
	defer factory.Shutdown()
	defer stopFactory()
	errs := make(chan []error, 1)
	go func() { errs <- waitBackground(first.ResourceVersion, 4) }()
	factory.Start(fctx.Done())
	for _, err := range <-errs {
		if err != nil {
			t.Errorf("WaitForFreshness(Background, %s) issued as the factory starts = %v, want nil", first.ResourceVersion, err)
		}
	}
	if !inIndexer(first) {
		t.Errorf("the waits returned but the indexer lacks %s", first.Name)
	}

	next := create("after-sync-")
	for _, err := range waitBackground(next.ResourceVersion, 4) {
		if err != nil {
			t.Errorf("WaitForFreshness(Background, %s) after the sync = %v, want nil", next.ResourceVersion, err)
		}
	}
	if !inIndexer(next) {
		t.Errorf("the waits returned but the indexer lacks %s", next.Name)
	}

	start := time.Now()
	for _, err := range waitBackground("987654321", 2) {
		if !errors.Is(err, freshness.ErrTooLargeResourceVersion) {
			t.Errorf("WaitForFreshness(Background, 987654321) = %v, want ErrTooLargeResourceVersion", err)
		}
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("waits beyond the server failed after %v, want under 5s", took)
	}
}
