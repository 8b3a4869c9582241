package freshtest_test

// The recipes of docs/where-controllers-read-stale.md: one Example per
// shape of controller that reads its own writes stale, each on a fake
// clientset held behind with a Lag, counting the stale-read detector's
// reports. The guide shows their bodies (internal/readme checks that they
// match); children, below, is the controller they test.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/freshtest"
	"github.com/freshinformer/freshinformer/readyourwrites"
	"github.com/freshinformer/freshinformer/stalereads"
)

// children keeps ConfigMap <parent>-child holding a copy of the parent's
// data, as examples/childcontroller does. It reads both from the informer's
// lister and records its writes (ryw.Wrote), which is what the stale-read
// detector judges reads against. With checkFresh it first checks that the
// cache holds the parent's writes (the fix); without, it reads whatever
// the cache holds.
type children struct {
	client     kubernetes.Interface
	lister     corelisters.ConfigMapLister
	ryw        *readyourwrites.ReadYourWrites
	checkFresh bool
	staleReads *atomic.Int64 // the detector's reports
}

// newChildren starts a factory on client, with its reads lagged by lag and
// the detector on, and returns the controller on it and a stop function.
func newChildren(client *fake.Clientset, lag *freshtest.Lag, resync time.Duration) (*children, *cache.SharedInformerFactory, func()) {
	c := &children{client: client, staleReads: new(atomic.Int64)}
	lag.Fake(&client.Fake)
	factory := cache.NewSharedInformerFactory(client, resync, cache.WithNamespace("ns"),
		cache.WithInformerOptions(cache.WithStaleReadDetection(func(stalereads.Report) { c.staleReads.Add(1) })))
	c.lister = factory.Core().V1().ConfigMaps().Lister()
	c.ryw = readyourwrites.New(factory, time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return c, factory, func() { lag.Release(); cancel(); factory.Shutdown() }
}

func (c *children) reconcile(ctx context.Context, name string) error {
	parent, err := c.lister.ConfigMaps("ns").Get(name)
	if err != nil {
		return err
	}
	owner := readyourwrites.OwnerOf(parent)
	if c.checkFresh {
		if err := c.ryw.CheckFresh(owner); err != nil {
			return err // a *NotFreshError: requeue
		}
	}
	child, err := c.lister.ConfigMaps("ns").Get(name + "-child")
	switch {
	case apierrors.IsNotFound(err):
		child, err = c.client.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name + "-child"}, Data: parent.Data}, metav1.CreateOptions{})
	case err != nil:
		return err
	case maps.Equal(child.Data, parent.Data):
		return nil
	default:
		child = child.DeepCopy()
		child.Data = parent.Data
		child, err = c.client.CoreV1().ConfigMaps("ns").Update(ctx, child, metav1.UpdateOptions{})
	}
	return c.ryw.Wrote(owner, child, err)
}

func parent(name, data string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: map[string]string{"v": data}}
}

// Shape 1: the controller reconciles the same key again right after its
// own write (it requeues itself, or returns Requeue: true).
func ExampleLag_reconcileAfterOwnWrite() {
	ctx := context.Background()
	client := freshtest.NewClientset(parent("p", "1"))
	lag := freshtest.NewLag()
	c, _, stop := newChildren(client, lag, 0)
	defer stop()

	lag.Hold()                         // the cache stops here
	fmt.Println(c.reconcile(ctx, "p")) // creates p-child; its event is held
	fmt.Println(c.reconcile(ctx, "p")) // reads p-child: not in the cache yet
	fmt.Println("stale reads:", c.staleReads.Load())

	c.checkFresh = true // the fix: CheckFresh (or EnsureFresh) before reading
	err := c.reconcile(ctx, "p")
	fmt.Println(errors.Is(err, freshness.ErrNotFresh), "stale reads:", c.staleReads.Load())
	// Output:
	// <nil>
	// configmaps "p-child" already exists
	// stale reads: 1
	// true stale reads: 1
}

// Shape 2: an event for a key arrives while a worker reconciles it; the
// workqueue hands the key out again the moment the worker is done, before
// the worker's own write is in the cache.
func ExampleLag_keyRequeuedWhileInFlight() {
	ctx := context.Background()
	client := freshtest.NewClientset(parent("p", "1"), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-child"}, Data: map[string]string{"v": "0"}})
	lag := freshtest.NewLag()
	c, _, stop := newChildren(client, lag, 0)
	defer stop()
	queue := workqueue.NewTyped[string]()
	defer queue.ShutDown()

	queue.Add("p")
	key, _ := queue.Get()
	lag.Hold()
	fmt.Println(c.reconcile(ctx, key)) // updates p-child to v=1; its event is held
	queue.Add("p")                     // meanwhile: an event for p (a parent update, a resync)
	queue.Done(key)                    // p comes straight back
	key, _ = queue.Get()
	err := c.reconcile(ctx, key) // reads p-child at v=0, updates it on that: 409
	fmt.Println(apierrors.IsConflict(err), "stale reads:", c.staleReads.Load())
	queue.Done(key)
	// Output:
	// <nil>
	// true stale reads: 1
}

// Shape 3: a resync re-delivers every cached object to the handlers, so
// the controller reconciles, with no watch event, a key whose write the
// cache does not hold yet.
func ExampleLag_resync() {
	ctx := context.Background()
	client := freshtest.NewClientset(parent("p", "1"))
	lag := freshtest.NewLag()
	lag.Hold() // from the start: the first list is not held, every event after it is
	c, factory, stop := newChildren(client, lag, 50*time.Millisecond)
	defer stop()
	resynced := make(chan struct{}) // unbuffered: only a resync after the write counts
	_, _ = factory.Core().V1().ConfigMaps().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, _ any) { // a resync: the watch events are held
			select {
			case resynced <- struct{}{}:
			default:
			}
		},
	})

	fmt.Println(c.reconcile(ctx, "p")) // creates p-child; its event is held
	<-resynced                         // the informer resyncs p
	fmt.Println(c.reconcile(ctx, "p")) // reads p-child: not in the cache yet
	fmt.Println("stale reads:", c.staleReads.Load())
	// Output:
	// <nil>
	// configmaps "p-child" already exists
	// stale reads: 1
}

// Shape 4: two controllers share one cache; the second reads an object
// the first has just written (here: the second labels p-child).
func ExampleLag_controllersSharingACache() {
	ctx := context.Background()
	client := freshtest.NewClientset(parent("p", "1"), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-child"}, Data: map[string]string{"v": "0"}})
	lag := freshtest.NewLag()
	first, factory, stop := newChildren(client, lag, 0)
	defer stop()
	second := factory.Core().V1().ConfigMaps().Lister() // another controller, same cache

	lag.Hold()
	fmt.Println(first.reconcile(ctx, "p"))             // updates p-child to v=1; its event is held
	child, _ := second.ConfigMaps("ns").Get("p-child") // still v=0
	child = child.DeepCopy()
	child.Labels = map[string]string{"seen": "true"}
	_, err := client.CoreV1().ConfigMaps("ns").Update(ctx, child, metav1.UpdateOptions{})
	fmt.Println(apierrors.IsConflict(err), "stale reads:", first.staleReads.Load())
	// Output:
	// <nil>
	// true stale reads: 1
}
