// Package controller is the example CRD controller: it counts each
// Counter's status.count up to its spec.target (capped by the Ceiling named
// default), one status update per reconcile, requeueing the Counter after
// each write. Its informers and listers are those of the code-generated
// factory (../generated), as in any informer-gen controller; made fresh,
// they are FreshInformers behind the same generated listers, put there by
// one call per kind (cache.InformerFor, cache.ClusterInformerFor), which
// read what the factory lists from the ListScope method that cmd/scope-gen
// wrote into the generated informers package.
//
// It counts stale reads: a reconcile that reads a Counter older than the
// controller's own last write of it (which then fails with 409 Conflict).
package controller

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/freshinformer/freshinformer/cache"
	countingv1alpha1 "github.com/freshinformer/freshinformer/examples/crdcontroller/apis/counting/v1alpha1"
	"github.com/freshinformer/freshinformer/examples/crdcontroller/generated/clientset/versioned"
	"github.com/freshinformer/freshinformer/examples/crdcontroller/generated/informers/externalversions"
	listers "github.com/freshinformer/freshinformer/examples/crdcontroller/generated/listers/counting/v1alpha1"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/readyourwrites"
	"github.com/freshinformer/freshinformer/requeue"
)

var counterKind = schema.GroupKind{Group: countingv1alpha1.SchemeGroupVersion.Group, Kind: "Counter"}

// Controller counts Counters up.
type Controller struct {
	client   versioned.Interface
	counters listers.CounterLister
	ceilings listers.CeilingLister
	queue    workqueue.TypedRateLimitingInterface[types.NamespacedName]
	ryw      *readyourwrites.ReadYourWrites          // nil when plain
	rq       *requeue.Requeuer[types.NamespacedName] // nil when plain

	reconciles, writes, staleReads, conflicts atomic.Int64

	mu      sync.Mutex
	written map[types.NamespacedName]string // the resource version of our last write of each Counter
}

// Stats are what a controller counted.
type Stats struct {
	Reconciles, Writes int64
	// StaleReads are reads of a Counter older than the controller's own
	// last write of it; Conflicts the writes the server refused (409).
	StaleReads, Conflicts int64
}

// New wires a controller to factory, the generated factory over client.
// Call it before anything else asks factory for an informer. With fresh,
// the factory's Counter and Ceiling informers are FreshInformers (opts are
// their options: WithMetrics, ...), and a reconcile waits, without
// blocking its worker, until the cache holds the controller's own writes
// of its Counter (package requeue); without, it reads whatever the cache
// holds, as client-go controllers do.
func New(client versioned.Interface, factory externalversions.SharedInformerFactory, fresh bool, opts ...cache.Option) (*Controller, error) {
	c := &Controller{
		client:  client,
		queue:   workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName]()),
		written: map[types.NamespacedName]string{},
	}
	if fresh {
		counters, err := cache.InformerFor(factory, client.CountingV1alpha1().Counters, opts...)
		if err != nil {
			return nil, err
		}
		ceilings, err := cache.ClusterInformerFor(factory, client.CountingV1alpha1().Ceilings, opts...)
		if err != nil {
			return nil, err
		}
		c.ryw = readyourwrites.New(cache.InformerList{counters, ceilings}, 10*time.Second)
		c.rq = requeue.New(c.queue, c.ryw)
	}
	informer := factory.Counting().V1alpha1().Counters()
	c.counters = informer.Lister()
	c.ceilings = factory.Counting().V1alpha1().Ceilings().Lister()
	enqueue := func(obj any) {
		if key, err := toolscache.ObjectToName(obj); err == nil {
			c.queue.Add(types.NamespacedName{Namespace: key.Namespace, Name: key.Name})
		}
	}
	if _, err := informer.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Run runs workers until ctx ends, then shuts the queue down.
func (c *Controller) Run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c.processNext(ctx) {
			}
		})
	}
	<-ctx.Done()
	c.queue.ShutDown()
	if c.rq != nil {
		c.rq.ShutDown()
	}
	wg.Wait()
}

// Stats returns what the controller counted so far.
func (c *Controller) Stats() Stats {
	return Stats{Reconciles: c.reconciles.Load(), Writes: c.writes.Load(), StaleReads: c.staleReads.Load(), Conflicts: c.conflicts.Load()}
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	switch err := c.reconcile(ctx, key); {
	case err == nil:
		c.queue.Forget(key)
	case apierrors.IsConflict(err):
		c.conflicts.Add(1)
		c.queue.AddRateLimited(key)
	default:
		c.queue.AddRateLimited(key)
	}
	return true
}

// reconcile moves the Counter one count closer to its target.
func (c *Controller) reconcile(ctx context.Context, key types.NamespacedName) error {
	c.reconciles.Add(1)
	owner := readyourwrites.Owner{GroupKind: counterKind, NamespacedName: key}
	if c.rq != nil {
		if parked, err := c.rq.ParkUntilFresh(key, owner); parked || err != nil {
			return err
		}
	}
	counter, err := c.counters.Counters(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		if c.ryw != nil {
			c.ryw.Forget(owner)
		}
		return nil
	}
	if err != nil {
		return err
	}
	c.checkRead(key, counter.ResourceVersion)
	limit := counter.Spec.Target
	if ceiling, err := c.ceilings.Get("default"); err == nil && ceiling.Spec.Max < limit {
		limit = ceiling.Spec.Max
	}
	if counter.Status.Count >= limit {
		return nil
	}
	next := counter.DeepCopy()
	next.Status.Count++
	updated, err := c.client.CountingV1alpha1().Counters(key.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{})
	if c.ryw != nil {
		err = c.ryw.Wrote(owner, updated, err)
	}
	if err != nil {
		return err
	}
	c.writes.Add(1)
	c.mu.Lock()
	c.written[key] = updated.ResourceVersion
	c.mu.Unlock()
	c.queue.Add(key) // straight back: the next step reads what this one wrote
	return nil
}

// checkRead counts a read of key at rv older than our last write of it.
func (c *Controller) checkRead(key types.NamespacedName, rv string) {
	c.mu.Lock()
	last, ok := c.written[key]
	c.mu.Unlock()
	if !ok {
		return
	}
	if cmp, err := freshness.Compare(rv, last); err == nil && cmp < 0 {
		c.staleReads.Add(1)
	}
}

// String prints the stats as one line.
func (s Stats) String() string {
	return fmt.Sprintf("%d reconciles, %d writes, %d stale reads, %d conflicts", s.Reconciles, s.Writes, s.StaleReads, s.Conflicts)
}
