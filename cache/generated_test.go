package cache_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
	countingv1alpha1 "github.com/freshinformer/freshinformer/examples/crdcontroller/apis/counting/v1alpha1"
	"github.com/freshinformer/freshinformer/examples/crdcontroller/generated/clientset/versioned"
	"github.com/freshinformer/freshinformer/examples/crdcontroller/generated/clientset/versioned/fake"
	"github.com/freshinformer/freshinformer/examples/crdcontroller/generated/informers/externalversions"
	"github.com/freshinformer/freshinformer/examples/crdcontroller/generated/informers/externalversions/internalinterfaces"
	"github.com/freshinformer/freshinformer/freshtest"
	"github.com/freshinformer/freshinformer/metrics"
)

var countersResource = schema.GroupResource{Group: "counting.examples.freshinformer.io", Resource: "counters"}

func counter(ns, name string, lbls map[string]string) *countingv1alpha1.Counter {
	return &countingv1alpha1.Counter{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}}
}

// stampedClientset is the generated fake clientset, stamping resource
// versions as a server does.
func stampedClientset(objects ...runtime.Object) *fake.Clientset {
	c := fake.NewSimpleClientset()
	t := freshtest.Stamp(&c.Fake, c.Tracker())
	for _, o := range objects {
		if err := t.Add(o); err != nil {
			panic(err)
		}
	}
	return c
}

// One call puts a FreshInformer behind a generated factory's accessors and
// listers, in the factory's namespace, with its tweakListOptions and
// transform, and it waits for the writes made through the clientset.
func TestInformerForGeneratedFactory(t *testing.T) {
	client := stampedClientset(counter("a", "in", map[string]string{"keep": "yes"}), counter("a", "unlabelled", nil), counter("b", "elsewhere", map[string]string{"keep": "yes"}))
	transformed := make(chan struct{}, 100)
	factory := externalversions.NewSharedInformerFactoryWithOptions(client, 0,
		externalversions.WithNamespace("a"),
		externalversions.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "keep=yes" }),
		externalversions.WithTransform(func(obj any) (any, error) {
			select {
			case transformed <- struct{}{}:
			default:
			}
			return obj, nil
		}))
	registry := prometheus.NewRegistry()
	provider, err := metrics.NewProvider(registry)
	if err != nil {
		t.Fatal(err)
	}
	counters, err := cache.InformerFor(factory, client.CountingV1alpha1().Counters, cache.WithName("counters"), cache.WithMetrics(provider))
	if err != nil {
		t.Fatal(err)
	}
	if again, err := cache.InformerFor(factory, client.CountingV1alpha1().Counters); err != nil || again != counters {
		t.Fatalf("a second call: %p, %v; want the first's %p", again, err, counters)
	}
	accessor := factory.Counting().V1alpha1().Counters()
	if fresh, ok := cache.FreshInformerOf(accessor.Informer()); !ok || fresh != counters {
		t.Fatal("the generated accessor's informer is not the FreshInformer")
	}
	if counters.Resource() != countersResource || counters.Name() != "counters" {
		t.Fatalf("resource %v, name %q", counters.Resource(), counters.Name())
	}
	if s := counters.Selector(); s.Namespace != "a" || s.LabelSelector() != "keep=yes" {
		t.Fatalf("scope %v: want the factory's namespace and tweak", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer func() { cancel(); factory.Shutdown() }()
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%v did not sync", typ)
		}
	}
	if got, err := accessor.Lister().List(labels.Everything()); err != nil || len(got) != 1 || got[0].Name != "in" {
		t.Fatalf("the generated lister lists %v, %v; want a/in alone", got, err)
	}
	select {
	case <-transformed:
	default:
		t.Fatal("the factory's transform was not applied")
	}
	written, err := client.CountingV1alpha1().Counters("a").Create(ctx, counter("a", "new", map[string]string{"keep": "yes"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := counters.WaitForFreshness(ctx, written.ResourceVersion); err != nil {
		t.Fatal(err)
	}
	if _, err := accessor.Lister().Counters("a").Get("new"); err != nil {
		t.Fatalf("fresh, but the lister has no a/new: %v", err)
	}
	if err := counters.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(registry, "freshinformer_observed_resource_version"); err != nil || n != 1 {
		t.Fatalf("observed resource version series: %d, %v", n, err)
	}
}

// Called after the factory made its plain informer of the kind, it fails:
// it never hands back a plain informer as if it were fresh.
func TestInformerForTooLate(t *testing.T) {
	client := stampedClientset()
	factory := externalversions.NewSharedInformerFactory(client, 0)
	plain := factory.Counting().V1alpha1().Counters().Informer()
	_, err := cache.InformerFor(factory, client.CountingV1alpha1().Counters)
	if !errors.Is(err, cache.ErrNotFreshInformer) {
		t.Fatalf("InformerFor after the accessor: %v", err)
	}
	if factory.Counting().V1alpha1().Counters().Informer() != plain {
		t.Fatal("the factory's informer changed")
	}
}

// A cluster-scoped kind lists across namespaces, whatever the factory's
// namespace.
func TestClusterInformerFor(t *testing.T) {
	client := stampedClientset(&countingv1alpha1.Ceiling{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	factory := externalversions.NewSharedInformerFactoryWithOptions(client, 0, externalversions.WithNamespace("a"))
	ceilings, err := cache.ClusterInformerFor(factory, client.CountingV1alpha1().Ceilings)
	if err != nil {
		t.Fatal(err)
	}
	if ceilings.Selector().Namespace != "" || ceilings.Resource().Resource != "ceilings" {
		t.Fatalf("scope %v, resource %v", ceilings.Selector(), ceilings.Resource())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer func() { cancel(); factory.Shutdown() }()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	if _, err := factory.Counting().V1alpha1().Ceilings().Lister().Get("default"); err != nil {
		t.Fatal(err)
	}
}

// On a real clientset the resource is the kind's plural as client-gen
// makes it, checked against the factory's ForResource; nothing is sent.
func TestInformerForRealClientset(t *testing.T) {
	client, err := versioned.NewForConfig(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	factory := externalversions.NewSharedInformerFactory(client, 0)
	counters, err := cache.InformerFor(factory, client.CountingV1alpha1().Counters)
	if err != nil || counters.Resource() != countersResource {
		t.Fatalf("%v, %v", counters, err)
	}
	factory = externalversions.NewSharedInformerFactory(client, 0)
	_, err = cache.InformerFor(factory, client.CountingV1alpha1().Counters, cache.WithResource(schema.GroupResource{Group: countersResource.Group, Resource: "tallies"}))
	if !errors.Is(err, cache.ErrUnknownResource) {
		t.Fatalf("InformerFor under a resource the factory does not serve: %v", err)
	}
}

// notGenerated has the generated factory's methods, not its fields.
type notGenerated struct{}

func (notGenerated) InformerFor(runtime.Object, func(versioned.Interface, time.Duration) toolscache.SharedIndexInformer) toolscache.SharedIndexInformer {
	return nil
}
func (notGenerated) ForResource(schema.GroupVersionResource) (externalversions.GenericInformer, error) {
	return nil, nil
}

func TestInformerForUnsupportedFactory(t *testing.T) {
	client := stampedClientset()
	if _, err := cache.InformerFor(&notGenerated{}, client.CountingV1alpha1().Counters); !errors.Is(err, cache.ErrUnsupportedFactory) {
		t.Fatalf("InformerFor on another factory: %v", err)
	}
}

// withoutListScope is a generated factory without the ListScope method of
// cmd/scope-gen: the interface hides it.
type withoutListScope struct {
	externalversions.SharedInformerFactory
}

// keepOnly is a tweak listing the objects labelled keep=yes.
func keepOnly(o *metav1.ListOptions) { o.LabelSelector = "keep=yes" }

// listedNames starts factory, waits for it to sync, and returns the names
// the generated lister of Counters lists.
func listedNames(t *testing.T, factory externalversions.SharedInformerFactory) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer func() { cancel(); factory.Shutdown() }()
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%v did not sync", typ)
		}
	}
	got, err := factory.Counting().V1alpha1().Counters().Lister().List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range got {
		names = append(names, c.Namespace+"/"+c.Name)
	}
	return names
}

// A factory that cannot say what it lists is refused unless the caller
// says it with Scoped; the informer then lists in the namespace and with
// the tweak given, as the generated one would.
func TestInformerForScopedFactory(t *testing.T) {
	client := stampedClientset(counter("a", "in", map[string]string{"keep": "yes"}), counter("a", "unlabelled", nil), counter("b", "elsewhere", map[string]string{"keep": "yes"}))
	factory := withoutListScope{externalversions.NewSharedInformerFactoryWithOptions(client, 0,
		externalversions.WithNamespace("a"), externalversions.WithTweakListOptions(keepOnly))}
	if _, err := cache.InformerFor(factory, client.CountingV1alpha1().Counters); !errors.Is(err, cache.ErrUnsupportedFactory) {
		t.Fatalf("InformerFor on a factory that does not say its scope: %v", err)
	}
	counters, err := cache.InformerFor(cache.Scoped(factory, "a", keepOnly), client.CountingV1alpha1().Counters)
	if err != nil {
		t.Fatal(err)
	}
	if fresh, ok := cache.FreshInformerOf(factory.Counting().V1alpha1().Counters().Informer()); !ok || fresh != counters {
		t.Fatal("the generated accessor's informer is not the FreshInformer")
	}
	if s := counters.Selector(); s.Namespace != "a" || s.LabelSelector() != "keep=yes" {
		t.Fatalf("scope %v: want the namespace and tweak given", s)
	}
	if got := listedNames(t, factory); len(got) != 1 || got[0] != "a/in" {
		t.Fatalf("the generated lister lists %v; want a/in alone", got)
	}
}

// Scoped's scope is checked against the factory's own when the factory
// says it: a namespace or tweak that differs fails, and leaves the
// factory's informer to be made; the same one, in another closure, passes.
func TestInformerForScopeMismatch(t *testing.T) {
	client := stampedClientset()
	newFactory := func() externalversions.SharedInformerFactory {
		return externalversions.NewSharedInformerFactoryWithOptions(client, 0,
			externalversions.WithNamespace("a"), externalversions.WithTweakListOptions(keepOnly))
	}
	for name, scoped := range map[string]func(externalversions.SharedInformerFactory) cache.ScopedFactory[internalinterfaces.NewInformerFunc, externalversions.GenericInformer]{
		"namespace": func(f externalversions.SharedInformerFactory) cache.ScopedFactory[internalinterfaces.NewInformerFunc, externalversions.GenericInformer] {
			return cache.Scoped(f, "b", keepOnly)
		},
		"all namespaces": func(f externalversions.SharedInformerFactory) cache.ScopedFactory[internalinterfaces.NewInformerFunc, externalversions.GenericInformer] {
			return cache.Scoped(f, metav1.NamespaceAll, keepOnly)
		},
		"no tweak": func(f externalversions.SharedInformerFactory) cache.ScopedFactory[internalinterfaces.NewInformerFunc, externalversions.GenericInformer] {
			return cache.Scoped(f, "a", nil)
		},
		"other tweak": func(f externalversions.SharedInformerFactory) cache.ScopedFactory[internalinterfaces.NewInformerFunc, externalversions.GenericInformer] {
			return cache.Scoped(f, "a", func(o *metav1.ListOptions) { o.LabelSelector = "keep=no" })
		},
	} {
		factory := newFactory()
		if _, err := cache.InformerFor(scoped(factory), client.CountingV1alpha1().Counters); !errors.Is(err, cache.ErrScopeMismatch) {
			t.Errorf("%s: %v; want ErrScopeMismatch", name, err)
		}
		if _, ok := cache.FreshInformerOf(factory.Counting().V1alpha1().Counters().Informer()); ok {
			t.Errorf("%s: the factory took a FreshInformer of the wrong scope", name)
		}
	}
	same := func(o *metav1.ListOptions) { o.LabelSelector = "keep=yes" }
	if _, err := cache.InformerFor(cache.Scoped(newFactory(), "a", same), client.CountingV1alpha1().Counters); err != nil {
		t.Fatalf("the factory's own scope, in another closure: %v", err)
	}
}
