package cache_test

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/freshinformer/freshinformer/cache"
	countingv1alpha1 "github.com/freshinformer/freshinformer/examples/crdcontroller/apis/counting/v1alpha1"
	"github.com/freshinformer/freshinformer/examples/crdcontroller/generated/clientset/versioned/fake"
	"github.com/freshinformer/freshinformer/examples/crdcontroller/generated/informers/externalversions"
	"github.com/freshinformer/freshinformer/freshtest"
)

// A code-generated (informer-gen) factory's informer of a kind becomes a
// FreshInformer in one call, behind the generated accessor and lister.
func ExampleInformerFor() {
	client := fake.NewSimpleClientset() // the generated clientset in production
	freshtest.Stamp(&client.Fake, client.Tracker())
	factory := externalversions.NewSharedInformerFactoryWithOptions(client, 0, externalversions.WithNamespace("ns"))
	counters, err := cache.InformerFor(factory, client.CountingV1alpha1().Counters) // before anything asks the factory
	if err != nil {
		fmt.Println(err)
		return
	}
	lister := factory.Counting().V1alpha1().Counters().Lister()
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	factory.WaitForCacheSync(ctx.Done())

	written, _ := client.CountingV1alpha1().Counters("ns").Create(ctx, &countingv1alpha1.Counter{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
	if err := counters.WaitForFreshness(ctx, written.ResourceVersion); err != nil {
		fmt.Println(err)
		return
	}
	got, err := lister.Counters("ns").Get("c")
	fmt.Println(counters.Resource(), got.Name, err)
	// Output: counters.counting.examples.freshinformer.io c <nil>
}
