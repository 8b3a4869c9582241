package factory_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/informers/apps"
	"k8s.io/client-go/informers/core"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/freshinformer/freshinformer/cache"
	freshinformers "github.com/freshinformer/freshinformer/internal/factory"
)

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// clientGoFactory is what consumer uses of client-go's
// informers.SharedInformerFactory.
type clientGoFactory interface {
	Core() core.Interface
	Apps() apps.Interface
	ForResource(schema.GroupVersionResource) (informers.GenericInformer, error)
	Start(<-chan struct{})
	WaitForCacheSync(<-chan struct{}) map[reflect.Type]bool
}

// consumer is code written for client-go's factory interface.
func consumer(ctx context.Context, t *testing.T, f clientGoFactory) {
	t.Helper()
	podLister := f.Core().V1().Pods().Lister()
	deployInformer := f.Apps().V1().Deployments().Informer()
	generic, err := f.ForResource(podsGVR)
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%v did not sync", typ)
		}
	}
	pod, err := podLister.Pods("ns").Get("p")
	if err != nil || pod.Name != "p" {
		t.Fatalf("pod lister: %v, %v", pod, err)
	}
	if n := len(deployInformer.GetStore().List()); n != 1 {
		t.Fatalf("deployments cached: %d", n)
	}
	if objs, err := generic.Lister().ByNamespace("ns").List(labels.Everything()); err != nil || len(objs) != 1 {
		t.Fatalf("generic lister: %v, %v", objs, err)
	}
	a, okA := cache.FreshInformerOf(generic.Informer())
	b, okB := cache.FreshInformerOf(f.Core().V1().Pods().Informer())
	if !okA || !okB || a != b {
		t.Fatal("ForResource and the typed accessor hand out different informers for pods")
	}
}

func TestFactoryIsDropIn(t *testing.T) {
	client := fake.NewClientset(
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", ResourceVersion: "5"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d", ResourceVersion: "6"}},
	)
	f := cache.NewSharedInformerFactory(client, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); f.Shutdown() }()
	consumer(ctx, t, f)

	inf, ok := cache.FreshInformerOf(f.Core().V1().Pods().Informer())
	if !ok {
		t.Fatalf("the factory's pod informer is %T, not a FreshInformer", f.Core().V1().Pods().Informer())
	}
	if inf.Resource() != podsGVR.GroupResource() {
		t.Fatalf("resource %v", inf.Resource())
	}
	if all := f.FreshInformersForResource(podsGVR.GroupResource()); len(all) != 1 || all[0] != inf {
		t.Fatalf("FreshInformersForResource(pods) = %v, want the accessor's", all)
	}
	// Cluster-scoped resources and groups with dotted names resolve too.
	if _, err := f.ForResource(schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := cache.FreshInformerOf(f.Rbac().V1().ClusterRoles().Informer()); !ok {
		t.Fatal("ClusterRoles informer is not a FreshInformer")
	}
	if _, err := f.ForResource(schema.GroupVersionResource{Version: "v1", Resource: "nosuch"}); err == nil {
		t.Fatal("ForResource of an unknown resource succeeded")
	}
}

func TestFactoryOptions(t *testing.T) {
	client := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "in", Labels: map[string]string{"keep": "yes"}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "unlabelled"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "other", Labels: map[string]string{"keep": "yes"}}},
	)
	var transformed int
	f := cache.NewSharedInformerFactoryWithOptions(client, time.Hour,
		cache.WithNamespace("a"),
		cache.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "keep=yes" }),
		cache.WithTransform(func(o any) (any, error) { transformed++; return o, nil }),
		cache.WithCustomResyncConfig(map[metav1.Object]time.Duration{&corev1.ConfigMap{}: 0}),
		cache.WithInformerOptions(cache.WithName("opts")),
	)
	inf, _ := cache.FreshInformerOf(f.Core().V1().ConfigMaps().Informer())
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); f.Shutdown() }()
	f.Start(ctx.Done())
	if res := f.WaitForCacheSyncWithContext(ctx); res.AsError() != nil {
		t.Fatal(res.AsError())
	}
	keys := inf.GetIndexer().ListKeys()
	if len(keys) != 1 || keys[0] != "a/in" {
		t.Fatalf("cached %v, want only a/in", keys)
	}
	if transformed == 0 || inf.Name() != "opts" {
		t.Fatalf("transform ran %d times, name %q", transformed, inf.Name())
	}
}

// Each informer gets its type's custom resync, else the factory's.
func TestFactoryCustomResync(t *testing.T) {
	resyncs := map[schema.GroupResource]time.Duration{}
	f := freshinformers.NewSharedInformerFactory(fake.NewClientset(), time.Hour, freshinformers.Config[*cache.FreshInformer]{
		CustomResync: map[reflect.Type]time.Duration{reflect.TypeFor[*corev1.ConfigMap](): time.Minute},
		New: func(s freshinformers.Spec) *cache.FreshInformer {
			resyncs[s.Resource] = s.Resync
			return cache.NewSharedIndexInformer(s.ListerWatcher, s.Object, s.Resync, s.Indexers, cache.WithResource(s.Resource))
		},
	})
	f.Core().V1().ConfigMaps().Informer()
	f.Core().V1().Secrets().Informer()
	if resyncs[schema.GroupResource{Resource: "configmaps"}] != time.Minute || resyncs[schema.GroupResource{Resource: "secrets"}] != time.Hour {
		t.Fatalf("resync periods %v", resyncs)
	}
}

// TestFactoryWaitForFreshness: client-go's fake tracker keeps the resource
// versions the test gives its objects, so they can be waited for.
func TestFactoryWaitForFreshness(t *testing.T) {
	client := fake.NewClientset()
	f := cache.NewSharedInformerFactory(client, 0)
	f.Core().V1().Pods().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); f.Shutdown() }()

	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	if err := f.WaitForFreshness(ctx, cms, "1"); !errors.Is(err, cache.ErrNoInformer) {
		t.Fatalf("waiting on a resource without informer: %v", err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	for _, name := range []string{"x", "y"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: map[string]string{"x": "10", "y": "11"}[name]}}
		if _, err := client.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	for _, rv := range []string{"10", "11"} {
		if err := f.WaitForFreshness(wctx, podsGVR, rv); err != nil {
			t.Fatal(err)
		}
	}
	short, scancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer scancel()
	if err := f.WaitForFreshness(short, podsGVR, "12"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for an RV nobody wrote: %v", err)
	}
}
