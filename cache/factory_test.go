package cache

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
)

// The factory's options reach the informers it makes: the tests of the
// factories themselves are in package informers.
func TestFactoryOptionsReachTheInformer(t *testing.T) {
	f := NewSharedInformerFactoryWithOptions(fake.NewClientset(), time.Hour,
		WithNamespace("a"),
		WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "keep=yes" }),
		WithCustomResyncConfig(map[metav1.Object]time.Duration{&corev1.ConfigMap{}: 0}),
		WithInformerOptions(WithName("opts")),
	)
	cms, _ := FreshInformerOf(f.Core().V1().ConfigMaps().Informer())
	secrets, _ := FreshInformerOf(f.Core().V1().Secrets().Informer())
	if cms.defaultHandlerResync != 0 || secrets.defaultHandlerResync != time.Hour {
		t.Fatalf("resync: configmaps %v, secrets %v", cms.defaultHandlerResync, secrets.defaultHandlerResync)
	}
	if cms.Name() != "opts" || cms.Resource() != (schema.GroupResource{Resource: "configmaps"}) {
		t.Fatalf("name %q, resource %v", cms.Name(), cms.Resource())
	}
	if got := cms.Selector().String(); got != SelectorOf("a", func(o *metav1.ListOptions) { o.LabelSelector = "keep=yes" }).String() {
		t.Fatalf("selector %s", got)
	}
}
