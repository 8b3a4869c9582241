package e2e

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/integration/testenv"
	"github.com/freshinformer/freshinformer/readyourwrites"
	"github.com/freshinformer/freshinformer/requeue"
	"github.com/freshinformer/freshinformer/writes"
)

// countingRecorder passes records to a ReadYourWrites and counts them.
type countingRecorder struct {
	ryw              *readyourwrites.ReadYourWrites
	records, deletes atomic.Int64
}

func (c *countingRecorder) Record(o readyourwrites.Owner, gr schema.GroupResource, obj metav1.Object) error {
	c.records.Add(1)
	return c.ryw.Record(o, gr, obj)
}

func (c *countingRecorder) RecordDelete(o readyourwrites.Owner, gr schema.GroupResource, obj metav1.Object) error {
	c.deletes.Add(1)
	return c.ryw.RecordDelete(o, gr, obj)
}

// TestWritesTransportRecordsEveryClient writes through the typed clientset
// (JSON and protobuf), the dynamic client, server-side apply, the status
// and scale subresources and deletes, with plain client calls under an
// owner's context, and checks that each write was recorded and that
// EnsureFresh then makes the cache hold it.
func TestWritesTransportRecordsEveryClient(t *testing.T) {
	ns := testenv.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := testenv.Clientset(t)
	factory := cache.NewSharedInformerFactory(cs, 0, cache.WithNamespace(ns))
	cms := factory.Core().V1().ConfigMaps().Lister()
	deps := factory.Apps().V1().Deployments().Lister()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	factory.WaitForCacheSync(ctx.Done())
	ryw := readyourwrites.New(factory, 30*time.Second)
	rec := &countingRecorder{ryw: ryw}
	cfg := writes.WrapConfig(testenv.Config(t), rec, writes.WithErrorHandler(func(_ context.Context, err error) { t.Errorf("not recorded: %v", err) }))
	protoCfg := rest.CopyConfig(cfg)
	protoCfg.ContentType = runtime.ContentTypeProtobuf
	typed := kubernetes.NewForConfigOrDie(cfg)
	proto := kubernetes.NewForConfigOrDie(protoCfg)
	dyn := dynamic.NewForConfigOrDie(cfg)

	parent, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "parent"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := readyourwrites.OwnerOf(parent)
	octx := writes.WithOwner(ctx, owner)

	// fresh checks that the write was recorded and that EnsureFresh makes
	// the cache hold rv (or not hold the object, for a delete).
	wantRecords, wantDeletes := int64(0), int64(0)
	fresh := func(what string, get func() (metav1.Object, error), rv string, deleted bool) {
		t.Helper()
		if deleted {
			wantDeletes++
		} else {
			wantRecords++
		}
		if rec.records.Load() != wantRecords || rec.deletes.Load() != wantDeletes {
			t.Fatalf("%s: %d records, %d deletes; want %d, %d", what, rec.records.Load(), rec.deletes.Load(), wantRecords, wantDeletes)
		}
		if err := ryw.EnsureFresh(ctx, owner); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		obj, err := get()
		if deleted {
			if !apierrors.IsNotFound(err) {
				t.Fatalf("%s: the cache still holds the deleted object (%v)", what, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if c, err := freshness.Compare(obj.GetResourceVersion(), rv); err != nil || c < 0 {
			t.Fatalf("%s: cached at %s, written at %s", what, obj.GetResourceVersion(), rv)
		}
	}
	cm := func(name string) func() (metav1.Object, error) {
		return func() (metav1.Object, error) { return cms.ConfigMaps(ns).Get(name) }
	}

	c, err := typed.CoreV1().ConfigMaps(ns).Create(octx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fresh("typed create", cm("a"), c.ResourceVersion, false)
	c.Data = map[string]string{"k": "v"}
	if c, err = proto.CoreV1().ConfigMaps(ns).Update(octx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	fresh("protobuf update", cm("a"), c.ResourceVersion, false)
	if c, err = typed.CoreV1().ConfigMaps(ns).Apply(octx, applycorev1.ConfigMap("b", ns).WithData(map[string]string{"x": "1"}), metav1.ApplyOptions{FieldManager: "e2e"}); err != nil {
		t.Fatal(err)
	}
	fresh("server-side apply", cm("b"), c.ResourceVersion, false)
	u, err := dyn.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace(ns).Patch(octx, "b", types.MergePatchType, []byte(`{"data":{"y":"2"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fresh("dynamic patch", cm("b"), u.GetResourceVersion(), false)
	u = &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetName("c")
	if u, err = dyn.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace(ns).Apply(octx, "c", u, metav1.ApplyOptions{FieldManager: "e2e"}); err != nil {
		t.Fatal(err)
	}
	fresh("dynamic apply", cm("c"), u.GetResourceVersion(), false)

	one := int32(1)
	d, err := proto.AppsV1().Deployments(ns).Create(octx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "d"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "d"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "d"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dep := func() (metav1.Object, error) { return deps.Deployments(ns).Get("d") }
	fresh("protobuf create deployment", dep, d.ResourceVersion, false)
	sc, err := typed.AppsV1().Deployments(ns).UpdateScale(octx, "d", &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 3}}, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fresh("scale", dep, sc.ResourceVersion, false)
	d, _ = deps.Deployments(ns).Get("d")
	d = d.DeepCopy()
	d.Status.ObservedGeneration = d.Generation
	if d, err = typed.AppsV1().Deployments(ns).UpdateStatus(octx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	fresh("status", dep, d.ResourceVersion, false)

	if err := typed.CoreV1().ConfigMaps(ns).Delete(octx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fresh("typed delete", cm("a"), "", true)
	if err := dyn.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace(ns).Delete(octx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fresh("dynamic delete", cm("b"), "", true)

	// Not recorded: reads, failed writes, writes without an owner.
	if _, err := typed.CoreV1().ConfigMaps(ns).Get(octx, "c", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := typed.CoreV1().ConfigMaps(ns).Create(octx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := typed.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "e"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if rec.records.Load() != wantRecords || rec.deletes.Load() != wantDeletes {
		t.Fatalf("reads, failed writes or ownerless writes were recorded: %d, %d", rec.records.Load(), rec.deletes.Load())
	}
}

// TestRequeueWhenFreshRealServer runs a counting controller whose key
// comes straight back after each write: with requeue-when-fresh no read is
// stale and no worker blocks. Then the informers stop with keys parked:
// the keys come back and the next park reports the stop.
func TestRequeueWhenFreshRealServer(t *testing.T) {
	ns := testenv.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs := testenv.Clientset(t)
	informerCtx, stopInformers := context.WithCancel(ctx)
	factory := cache.NewSharedInformerFactory(cs, 0, cache.WithNamespace(ns))
	lister := factory.Core().V1().ConfigMaps().Lister()
	factory.Start(informerCtx.Done())
	stopped := false
	defer func() {
		if !stopped {
			stopInformers()
			factory.Shutdown()
		}
	}()
	factory.WaitForCacheSync(ctx.Done())
	ryw := readyourwrites.New(factory, 30*time.Second)
	client := kubernetes.NewForConfigOrDie(writes.WrapConfig(testenv.Config(t), ryw))
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName]())
	defer queue.ShutDown()
	rq := requeue.New(queue, ryw)
	defer rq.ShutDown()

	const parents, target = 3, 150
	var reconciles, conflicts, parkedN atomic.Int64
	var reconcileErr atomic.Value
	reconcile := func(key types.NamespacedName) error {
		reconciles.Add(1)
		parent, err := lister.ConfigMaps(ns).Get(key.Name)
		if err != nil {
			return err
		}
		owner := readyourwrites.OwnerOf(parent)
		octx := writes.WithOwner(ctx, owner)
		if parked, err := rq.ParkUntilFresh(key, owner); parked || err != nil {
			if parked {
				parkedN.Add(1)
			}
			return err
		}
		child, err := lister.ConfigMaps(ns).Get(key.Name + "-child")
		switch {
		case apierrors.IsNotFound(err):
			_, err = client.CoreV1().ConfigMaps(ns).Create(octx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: key.Name + "-child"}, Data: map[string]string{"n": "0"}}, metav1.CreateOptions{})
		case err != nil:
			return err
		default:
			n, _ := strconv.Atoi(child.Data["n"])
			if n >= target {
				return nil
			}
			child = child.DeepCopy()
			child.Data["n"] = strconv.Itoa(n + 1)
			_, err = client.CoreV1().ConfigMaps(ns).Update(octx, child, metav1.UpdateOptions{})
		}
		if err != nil {
			return err
		}
		queue.Add(key)
		return nil
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				key, shutdown := queue.Get()
				if shutdown {
					return
				}
				err := reconcile(key)
				switch {
				case err == nil:
					queue.Forget(key)
				case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
					conflicts.Add(1)
					queue.AddRateLimited(key)
				default:
					reconcileErr.Store(err)
					queue.AddRateLimited(key)
				}
				queue.Done(key)
			}
		})
	}
	for i := range parents {
		p, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("p", i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := factory.FreshInformersForResource(schema.GroupResource{Resource: "configmaps"})[0].WaitForFreshness(ctx, p.ResourceVersion); err != nil {
			t.Fatal(err)
		}
		queue.Add(types.NamespacedName{Namespace: ns, Name: p.Name})
	}
	for done := 0; done < parents; {
		if ctx.Err() != nil {
			t.Fatalf("children did not reach %d: %v", target, reconcileErr.Load())
		}
		time.Sleep(20 * time.Millisecond)
		done = 0
		for i := range parents {
			if c, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, fmt.Sprintf("p%d-child", i), metav1.GetOptions{}); err == nil && c.Data["n"] == strconv.Itoa(target) {
				done++
			}
		}
	}
	t.Logf("%d reconciles, %d parked, %d conflicts", reconciles.Load(), parkedN.Load(), conflicts.Load())
	if conflicts.Load() != 0 {
		t.Errorf("%d stale reads (conflicts) with requeue-when-fresh", conflicts.Load())
	}
	if parkedN.Load() == 0 {
		t.Log("no key was ever parked: the cache was always ahead of the worker")
	}

	// Stop the informers with keys parked: park directly for owners with
	// a write the cache cannot see any more.
	queue.ShutDown()
	wg.Wait()
	q2 := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](time.Millisecond, time.Millisecond))
	defer q2.ShutDown()
	rq2 := requeue.New(q2, ryw)
	defer rq2.ShutDown()
	stopped = true
	stopInformers()
	factory.Shutdown()
	for i := range parents {
		key := types.NamespacedName{Namespace: ns, Name: fmt.Sprint("p", i)}
		owner := readyourwrites.Owner{NamespacedName: key, UID: types.UID(fmt.Sprint("stopped-", i))}
		if err := ryw.Record(owner, schema.GroupResource{Resource: "configmaps"}, &metav1.ObjectMeta{Namespace: ns, Name: "x", ResourceVersion: "999999999"}); err != nil {
			t.Fatal(err)
		}
		parked, err := rq2.ParkUntilFresh(key, owner)
		if parked || !errors.Is(err, freshness.ErrStopped) {
			t.Fatalf("parking on a stopped informer: parked=%v err=%v", parked, err)
		}
	}
	if rq2.Parked() != 0 {
		t.Fatalf("%d keys left parked on stopped informers", rq2.Parked())
	}
}
