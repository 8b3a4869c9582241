package cache_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/freshinformer/freshinformer/cache"
	countingv1alpha1 "github.com/freshinformer/freshinformer/examples/crdcontroller/apis/counting/v1alpha1"
	"github.com/freshinformer/freshinformer/examples/crdcontroller/generated/clientset/versioned/fake"
	informers "github.com/freshinformer/freshinformer/examples/crdcontroller/generated/informers/externalversions"
	"github.com/freshinformer/freshinformer/freshtest"
	"github.com/freshinformer/freshinformer/metrics"
	"github.com/freshinformer/freshinformer/readyourwrites"
)

// The README's code-generated factory: one call per kind, namespaced or
// cluster-scoped, then the generated listers and read-your-writes over
// them and a client-go factory.
func ExampleClusterInformerFor() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns, resync := "ns", time.Duration(0)
	client := fake.NewSimpleClientset() // the generated clientset in production
	freshtest.Stamp(&client.Fake, client.Tracker())
	kubeFactory := cache.NewSharedInformerFactory(freshtest.NewClientset(), 0)
	provider, err := metrics.NewProvider(prometheus.NewRegistry())
	if err != nil {
		fmt.Println(err)
		return
	}

	factory := informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithNamespace(ns))
	counters, err := cache.InformerFor(factory, client.CountingV1alpha1().Counters, cache.WithMetrics(provider))
	if err != nil {
		fmt.Println(err)
		return
	}
	ceilings, err := cache.ClusterInformerFor(factory, client.CountingV1alpha1().Ceilings) // cluster-scoped kinds
	if err != nil {
		fmt.Println(err)
		return
	}
	lister := factory.Counting().V1alpha1().Counters().Lister() // the generated, typed lister, over `counters`
	ryw := readyourwrites.New(cache.Sources{kubeFactory, cache.InformerList{counters, ceilings}}, 10*time.Second)

	factory.Start(ctx.Done())
	kubeFactory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown(); kubeFactory.Shutdown() }()
	factory.WaitForCacheSync(ctx.Done())
	kubeFactory.WaitForCacheSync(ctx.Done())

	owner := readyourwrites.OwnerOf(&countingv1alpha1.Ceiling{ObjectMeta: metav1.ObjectMeta{Name: "top", UID: "u1"}})
	written, err := client.CountingV1alpha1().Counters(ns).Create(ctx, &countingv1alpha1.Counter{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
	if err := ryw.Wrote(owner, written, err); err != nil {
		fmt.Println(err)
		return
	}
	if err := ryw.EnsureFresh(ctx, owner); err != nil {
		fmt.Println(err)
		return
	}
	got, err := lister.Counters(ns).Get("c")
	fmt.Println(got.ResourceVersion == written.ResourceVersion, err, ceilings.Resource())
	// Output: true <nil> ceilings.counting.examples.freshinformer.io
}

// The README's code-generated factory without cmd/scope-gen's ListScope:
// the caller says the factory's namespace and tweak.
func ExampleScoped() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns, resync := "ns", time.Duration(0)
	tweak := func(o *metav1.ListOptions) { o.LabelSelector = "team=a" }
	client := fake.NewSimpleClientset() // the generated clientset in production
	freshtest.Stamp(&client.Fake, client.Tracker())

	factory := informers.NewSharedInformerFactoryWithOptions(client, resync,
		informers.WithNamespace(ns), informers.WithTweakListOptions(tweak))
	counters, err := cache.InformerFor(cache.Scoped(factory, ns, tweak), client.CountingV1alpha1().Counters)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = cache.InformerFor(cache.Scoped(informers.NewSharedInformerFactoryWithOptions(client, resync,
		informers.WithNamespace(ns), informers.WithTweakListOptions(tweak)), "elsewhere", tweak), client.CountingV1alpha1().Counters)
	fmt.Println(counters.Selector(), errors.Is(err, cache.ErrScopeMismatch))

	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	factory.WaitForCacheSync(ctx.Done())
	// Output: namespace ns, labels team=a true
}
