package cache

import (
	"context"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	v1 "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
)

// The factory's options reach the informers it makes: the tests of the
// factories themselves are in internal/factory.
func TestFactoryOptionsReachTheInformer(t *testing.T) {
	f := NewSharedInformerFactoryWithOptions(fake.NewClientset(), time.Hour,
		WithNamespace("a"),
		WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "keep=yes" }),
		WithCustomResyncConfig(map[metav1.Object]time.Duration{&corev1.ConfigMap{}: 0}),
		WithInformerOptions(WithName("opts")),
	)
	cms, _ := FreshInformerOf(f.Core().V1().ConfigMaps().Informer())
	secrets, _ := FreshInformerOf(f.Core().V1().Secrets().Informer())
	if cms.run.DefaultResync() != 0 || secrets.run.DefaultResync() != time.Hour {
		t.Fatalf("resync: configmaps %v, secrets %v", cms.run.DefaultResync(), secrets.run.DefaultResync())
	}
	if cms.Name() != "opts" || cms.Resource() != (schema.GroupResource{Resource: "configmaps"}) {
		t.Fatalf("name %q, resource %v", cms.Name(), cms.Resource())
	}
	if got := cms.Selector().String(); got != SelectorOf("a", func(o *metav1.ListOptions) { o.LabelSelector = "keep=yes" }).String() {
		t.Fatalf("selector %s", got)
	}
}

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

// client-go's informer identity is kept: a factory given an
// InformerName hands it out, and names each of its informers with it and
// the resource in client-go's informer metrics (the store's resource
// version, the queue), as client-go's factory does; Shutdown releases it.
func TestFactoryKeepsClientGosInformerName(t *testing.T) {
	name, err := toolscache.NewInformerName("freshinformer-test-factory")
	if err != nil {
		t.Fatal(err)
	}
	f := NewSharedInformerFactory(fake.NewClientset(), 0, WithInformerName(name))
	if f.InformerName() != name {
		t.Fatalf("InformerName() = %v, want the factory's", f.InformerName())
	}
	cms, _ := FreshInformerOf(f.Core().V1().ConfigMaps().Informer())
	id := cms.cfg.identifier
	if id.Name() != "freshinformer-test-factory" || id.GroupVersionResource() != corev1.SchemeGroupVersion.WithResource("configmaps") || !id.Reserved() {
		t.Fatalf("the informer's identifier: %q %v reserved %v", id.Name(), id.GroupVersionResource(), id.Reserved())
	}
	d := NewDynamicSharedInformerFactory(nil, 0, WithInformerName(name))
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	if w, _ := FreshInformerOf(d.ForResource(widgets).Informer()); w.cfg.identifier.GroupVersionResource() != widgets || !w.cfg.identifier.Reserved() {
		t.Fatal("the dynamic factory's informer is not named")
	}
	f.Shutdown()
	if id.Reserved() {
		t.Fatal("Shutdown did not release the name")
	}
}
