package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/readyourwrites"
	"github.com/freshinformer/freshinformer/requeue"
	"github.com/freshinformer/freshinformer/writes"
)

// Labels and annotations of the soak's objects.
const (
	labelApp   = "app" // appValue on every object the soak makes
	appValue   = "heapsoak"
	labelRole  = "heapsoak/role"   // roleOwner or roleChild
	labelOwner = "heapsoak/owner"  // on a child: its owner's name
	annTarget  = "heapsoak/target" // on an owner: the steps it asks for
	annDone    = "heapsoak/done"   // on an owner: the steps done (written by the controller)
	roleOwner  = "owner"
	roleChild  = "child"
)

// maxLogLines bounds the unexpected errors logged.
const maxLogLines = 20

// configMapGK is the owners' kind.
var configMapGK = schema.GroupKind{Kind: "ConfigMap"}

// stats are the controller's counters, read by the sampler.
type stats struct {
	reconciles atomic.Int64
	steps      atomic.Int64 // steps done: a child created (and the previous one deleted), the owner annotated
	completed  atomic.Int64 // owners whose last step was done
	stale      atomic.Int64 // 409 Conflict on the owner's update: the cache served an owner older than our own write
	gone       atomic.Int64 // reconciles that found the owner deleted (the NotFound path)
	forgotten  atomic.Int64 // of those, the ones that called ReadYourWrites.Forget
	parked     atomic.Int64 // keys parked by the Requeuer
	notFresh   atomic.Int64 // CheckFresh said the cache was behind: requeued with backoff
	errs       atomic.Int64 // other reconcile errors (EnsureFresh timeouts included)
	unrecorded atomic.Int64 // successful writes the writes transport could not record
	logged     atomic.Int64
}

// controller reconciles owners: each step creates the owner's next child
// Secret, deletes the previous one, and records the step in an annotation
// on the owner, until the owner's target is reached. Every write goes
// through the recording client with the owner in the context, so each
// reconcile reads its own previous step from the caches.
//
// Before reading, a key uses one of the library's three ways to wait for
// its writes, chosen by a hash of its name: park in the Requeuer until
// fresh, block in EnsureFresh, or CheckFresh and requeue with backoff.
type controller struct {
	client  kubernetes.Interface // writes through it are recorded
	owners  corelisters.ConfigMapLister
	secrets corelisters.SecretLister
	queue   workqueue.TypedRateLimitingInterface[types.NamespacedName]
	ryw     *readyourwrites.ReadYourWrites
	rq      *requeue.Requeuer[types.NamespacedName]
	forget  float64
	st      *stats

	ownerInformer *cache.FreshInformer // for the stale-read log lines
}

// waysOfWaiting names the ways a key waits for its owner's writes, by
// hash(name, 'w') % 3.
var waysOfWaiting = [3]string{"Requeuer.ParkUntilFresh", "EnsureFresh", "CheckFresh"}

func newController(client kubernetes.Interface, factory *cache.SharedInformerFactory, queue workqueue.TypedRateLimitingInterface[types.NamespacedName],
	ryw *readyourwrites.ReadYourWrites, rq *requeue.Requeuer[types.NamespacedName], forget float64, st *stats) (*controller, error) {
	c := &controller{
		client:  client,
		owners:  factory.Core().V1().ConfigMaps().Lister(),
		secrets: factory.Core().V1().Secrets().Lister(),
		queue:   queue,
		ryw:     ryw,
		rq:      rq,
		forget:  forget,
		st:      st,
	}
	var ok bool
	if c.ownerInformer, ok = cache.FreshInformerOf(factory.Core().V1().ConfigMaps().Informer()); !ok {
		return nil, errors.New("the factory has no ConfigMap informer")
	}
	enqueue := func(obj any) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Labels[labelRole] == roleOwner {
			c.queue.Add(types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name})
		}
	}
	if _, err := factory.Core().V1().ConfigMaps().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue, // the reconcile then takes the NotFound path
	}); err != nil {
		return nil, err
	}
	// The children's writes are recorded on the Secret informer and
	// waited for there: it must exist before the factory starts.
	_ = factory.Core().V1().Secrets().Informer()
	return c, nil
}

// hash picks a key's way of waiting and whether it is forgotten.
func hash(name string, salt byte) uint32 {
	h := fnv.New32a()
	h.Write([]byte{salt})
	h.Write([]byte(name))
	return h.Sum32()
}

// next processes one work item; false once the queue is shut down.
func (c *controller) next(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	err := c.reconcile(ctx, key)
	switch {
	case err == nil:
		c.queue.Forget(key)
	case ctx.Err() != nil:
		c.queue.Forget(key) // shutting down
	case errors.Is(err, freshness.ErrNotFresh):
		c.st.notFresh.Add(1)
		c.queue.AddRateLimited(key)
	case apierrors.IsConflict(err):
		if c.st.stale.Add(1) <= maxLogLines {
			logf("stale read: %v", err)
		}
		c.queue.AddRateLimited(key)
	default:
		c.st.errs.Add(1)
		if c.st.logged.Add(1) <= maxLogLines {
			logf("reconcile %s: %v", key, err)
		}
		c.queue.AddRateLimited(key)
	}
	return true
}

func (c *controller) reconcile(ctx context.Context, key types.NamespacedName) error {
	c.st.reconciles.Add(1)
	owner, err := c.owners.ConfigMaps(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.ownerGone(key)
		return nil
	}
	if err != nil {
		return err
	}
	o := readyourwrites.OwnerOf(owner)
	ctx = writes.WithOwner(ctx, o) // every write below is recorded for o
	switch hash(key.Name, 'w') % 3 {
	case 0:
		if parked, err := c.rq.ParkUntilFresh(key, o); parked || err != nil {
			if parked {
				c.st.parked.Add(1)
			}
			return err
		}
	case 1:
		if err := c.ryw.EnsureFresh(ctx, o); err != nil {
			return err
		}
	default:
		if err := c.ryw.CheckFresh(o); err != nil {
			return err
		}
	}

	// Read again, now that the caches hold this owner's writes: the read
	// above (for its UID) may predate them.
	owner, err = c.owners.ConfigMaps(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.ownerGone(key)
		return nil
	}
	if err != nil {
		return err
	}
	target, _ := strconv.Atoi(owner.Annotations[annTarget])
	done, _ := strconv.Atoi(owner.Annotations[annDone])
	if done >= target {
		return nil
	}
	next := childName(key.Name, done+1)
	_, err = c.client.CoreV1().Secrets(key.Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: next,
			Labels: map[string]string{labelApp: appValue, labelRole: roleChild, labelOwner: key.Name}},
		StringData: map[string]string{"step": strconv.Itoa(done + 1)},
	}, metav1.CreateOptions{})
	// AlreadyExists: an earlier attempt created it and then failed to
	// annotate the owner; carry on from there.
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if done > 0 {
		err := c.client.CoreV1().Secrets(key.Namespace).Delete(ctx, childName(key.Name, done), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	owner = owner.DeepCopy()
	owner.Annotations[annDone] = strconv.Itoa(done + 1)
	// An update from the cached owner: a cache that does not hold this
	// owner's previous step yet makes it a 409 Conflict.
	if _, err := c.client.CoreV1().ConfigMaps(key.Namespace).Update(ctx, owner, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) { // deleted meanwhile: its writes stay recorded, it never comes back
			c.ownerGone(key)
			return nil
		}
		return fmt.Errorf("%s waiting by %s, owner read at %s (step %d), informer at %s: %w", key, waysOfWaiting[hash(key.Name, 'w')%3], owner.ResourceVersion, done, c.ownerInformer.LastObservedResourceVersion(), err)
	}
	c.st.steps.Add(1)
	if done+1 == target {
		c.st.completed.Add(1)
	} else {
		c.queue.Add(key) // the next step (the update's event would bring it too)
	}
	return nil
}

// ownerGone is the NotFound path: as the library's examples do, forget
// the owner's records, but only for a -forget fraction of the owners, so
// that the others are left to ReadYourWrites' own bounds.
func (c *controller) ownerGone(key types.NamespacedName) {
	c.st.gone.Add(1)
	if float64(hash(key.Name, 'f')%1000) < c.forget*1000 {
		c.st.forgotten.Add(1)
		c.ryw.Forget(readyourwrites.Owner{GroupKind: configMapGK, NamespacedName: key})
	}
}

func childName(owner string, step int) string {
	return fmt.Sprintf("%s-step-%d", owner, step)
}
