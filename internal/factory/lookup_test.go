package factory_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
)

// widget is a type client-go's clientset does not serve.
type widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

func (w *widget) DeepCopyObject() runtime.Object {
	c := *w
	w.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

var widgetGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

// The typed accessors' informer leads to its FreshInformer in one call, and
// the factory's lookups are deterministic.
func TestFactoryOneCallAndDeterministicLookups(t *testing.T) {
	client := fake.NewClientset()
	f := cache.NewSharedInformerFactory(client, 0)
	// client-go 0.37's typed accessors wrap the factory's informer, 0.36's
	// hand it out as it is: FreshInformerOf finds it either way.
	typed := f.Core().V1().ConfigMaps().Informer()
	fi, ok := cache.FreshInformerOf(typed)
	if !ok || fi != f.FreshInformersForResource(schema.GroupResource{Resource: "configmaps"})[0] {
		t.Fatal("FreshInformerOf(typed accessor) did not find the factory's informer")
	}
	if err := cache.WaitForFreshness(context.Background(), typed, "bad"); err == nil {
		t.Fatal("WaitForFreshness on the typed accessor accepted a malformed RV")
	}
	if err := cache.WaitForFreshness(context.Background(), toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.Pod{}, 0, nil), "1"); !errors.Is(err, cache.ErrNotFreshInformer) {
		t.Fatalf("WaitForFreshness on a plain informer: %v", err)
	}

	d := cache.NewDynamicSharedInformerFactory(nil, 0)
	v1 := d.ForResource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}).Informer()
	for range 20 {
		d.ForResource(schema.GroupVersionResource{Group: "example.com", Version: "v1beta1", Resource: "widgets"})
		if got := d.FreshInformersForResource(schema.GroupResource{Group: "example.com", Resource: "widgets"}); got[0] != v1 {
			t.Fatal("FreshInformersForResource does not list the first informer made first")
		}
	}
	if n := len(d.FreshInformersForResource(schema.GroupResource{Group: "example.com", Resource: "widgets"})); n != 2 {
		t.Fatalf("%d informers of widgets, want 2", n)
	}
	_, err := f.ForResource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "nosuch"})
	if err == nil || strings.Contains(err.Error(), "Resource=") || !strings.Contains(err.Error(), "nosuch.apps") {
		t.Fatalf("error prints the resource as a GVR: %v", err)
	}
}

// The factory takes the caller's scheme and RESTMapper for types its
// clientset does not serve, and so does ReadYourWrites over it.
func TestFactoryWithScheme(t *testing.T) {
	s := runtime.NewScheme()
	s.AddKnownTypeWithName(widgetGVK, &widget{})
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(widgetGVK, meta.RESTScopeNamespace)
	f := cache.NewSharedInformerFactory(fake.NewClientset(), 0, cache.WithInformerOptions(cache.WithScheme(s, mapper)))
	gr, err := f.ResourceFor(&widget{})
	if err != nil || gr != (schema.GroupResource{Group: "example.com", Resource: "widgets"}) {
		t.Fatalf("ResourceFor(widget) = %v, %v", gr, err)
	}
	if gr, err := f.ResourceFor(&corev1.Secret{}); err != nil || gr != (schema.GroupResource{Resource: "secrets"}) {
		t.Fatalf("ResourceFor(secret) = %v, %v", gr, err)
	}
	if _, err := cache.NewSharedInformerFactory(fake.NewClientset(), 0).ResourceFor(&widget{}); !errors.Is(err, cache.ErrUnknownResource) {
		t.Fatalf("without the scheme: %v", err)
	}
}
