package freshtest_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/freshinformer/freshinformer/freshtest"
)

// One constructor swapped per fake: typed, dynamic, or any fake built on
// k8s.io/client-go/testing (a code-generated clientset's, here client-go's
// own). Each stamps resource versions from its own counter.
func ExampleStamp() {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		fmt.Println(err)
		return
	}
	objects := []runtime.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "settings"}}}
	other := fake.NewClientset()

	client := freshtest.NewClientset(objects...)                // was: fake.NewClientset(objects...)
	dyn := freshtest.NewSimpleDynamicClient(scheme, objects...) // was: dynamicfake.NewSimpleDynamicClient(scheme, objects...)
	tracker := freshtest.Stamp(&other.Fake, other.Tracker())    // any fake built on k8s.io/client-go/testing

	cm, err := client.CoreV1().ConfigMaps("ns").Get(ctx, "settings", metav1.GetOptions{})
	fmt.Println("typed:", cm.ResourceVersion, err)
	u, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns").Get(ctx, "settings", metav1.GetOptions{})
	fmt.Println("dynamic:", u.GetResourceVersion(), err)
	created, err := other.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, metav1.CreateOptions{})
	fmt.Println("stamped:", created.ResourceVersion, tracker.ResourceVersion(), err)
	// Output:
	// typed: 2 <nil>
	// dynamic: 2 <nil>
	// stamped: 2 2 <nil>
}
