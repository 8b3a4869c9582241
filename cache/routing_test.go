package cache

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"
)

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

// Informers and InformerList name the resource of typed, unstructured and
// custom objects, and say clearly when they cannot; no Go type name becomes
// a resource.
func TestInformerListResourceFor(t *testing.T) {
	s := runtime.NewScheme()
	s.AddKnownTypeWithName(widgetGVK, &widget{})
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.AddSpecific(widgetGVK, schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gizmos"},
		schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gizmo"}, meta.RESTScopeNamespace)

	unknown := NewSharedIndexInformer(&toolscache.ListWatch{}, &widget{}, 0, nil)
	if gr := unknown.Resource(); !gr.Empty() {
		t.Fatalf("an unknown type's resource is %q, want none", gr)
	}
	widgets := NewSharedIndexInformer(&toolscache.ListWatch{}, &widget{}, 0, nil, WithScheme(s, mapper))
	if gr := widgets.Resource(); gr != (schema.GroupResource{Group: "example.com", Resource: "gizmos"}) {
		t.Fatalf("resource with the caller's scheme and mapper: %v", gr)
	}
	cms := NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.ConfigMap{}, 0, nil)
	dyn := NewSharedIndexInformer(&toolscache.ListWatch{}, &unstructured.Unstructured{}, 0, nil,
		WithResource(schema.GroupResource{Group: "example.com", Resource: "widgets"}))
	list := InformerList{widgets, cms, dyn}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(widgetGVK)
	for _, tc := range []struct {
		obj  runtime.Object
		want schema.GroupResource
	}{
		{cm("c", "5"), schema.GroupResource{Resource: "configmaps"}},
		{&widget{}, schema.GroupResource{Group: "example.com", Resource: "gizmos"}}, // by the informer's Go type
		{u, schema.GroupResource{Group: "example.com", Resource: "widgets"}},        // by its own kind
	} {
		if gr, err := list.ResourceFor(tc.obj); err != nil || gr != tc.want {
			t.Errorf("ResourceFor(%T) = %v, %v; want %v", tc.obj, gr, err, tc.want)
		}
	}
	if gr, err := (Sources{InformerList{cms}, list}).ResourceFor(&widget{}); err != nil || gr.Resource != "gizmos" {
		t.Errorf("Sources.ResourceFor(widget) = %v, %v", gr, err)
	}
	if _, err := (InformerList{cms}).ResourceFor(&widget{}); !errors.Is(err, ErrUnknownResource) {
		t.Fatalf("ResourceFor of a type nothing knows: %v", err)
	}
}

// The typed accessors' informer leads to its FreshInformer in one call, and
// the factory's lookups are deterministic.
func TestFactoryOneCallAndDeterministicLookups(t *testing.T) {
	client := fake.NewClientset()
	f := NewSharedInformerFactory(client, 0)
	// client-go 0.37's typed accessors wrap the factory's informer, 0.36's
	// hand it out as it is: FreshInformerOf finds it either way.
	typed := f.Core().V1().ConfigMaps().Informer()
	fi, ok := FreshInformerOf(typed)
	if !ok || fi != f.FreshInformersForResource(schema.GroupResource{Resource: "configmaps"})[0] {
		t.Fatal("FreshInformerOf(typed accessor) did not find the factory's informer")
	}
	if err := WaitForFreshness(context.Background(), typed, "bad"); err == nil {
		t.Fatal("WaitForFreshness on the typed accessor accepted a malformed RV")
	}
	if err := WaitForFreshness(context.Background(), toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.Pod{}, 0, nil), "1"); !errors.Is(err, ErrNotFreshInformer) {
		t.Fatalf("WaitForFreshness on a plain informer: %v", err)
	}

	d := NewDynamicSharedInformerFactory(nil, 0)
	v1 := d.FreshInformerFor(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"})
	for range 20 {
		d.FreshInformerFor(schema.GroupVersionResource{Group: "example.com", Version: "v1beta1", Resource: "widgets"})
		if got, _ := d.FreshInformerForResource(schema.GroupResource{Group: "example.com", Resource: "widgets"}); got != v1 {
			t.Fatal("FreshInformerForResource is not the first informer made")
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
	f := NewSharedInformerFactory(fake.NewClientset(), 0, WithInformerOptions(WithScheme(s, mapper)))
	gr, err := f.ResourceFor(&widget{})
	if err != nil || gr != (schema.GroupResource{Group: "example.com", Resource: "widgets"}) {
		t.Fatalf("ResourceFor(widget) = %v, %v", gr, err)
	}
	if gr, err := f.ResourceFor(&corev1.Secret{}); err != nil || gr != (schema.GroupResource{Resource: "secrets"}) {
		t.Fatalf("ResourceFor(secret) = %v, %v", gr, err)
	}
	if _, err := NewSharedInformerFactory(fake.NewClientset(), 0).ResourceFor(&widget{}); !errors.Is(err, ErrUnknownResource) {
		t.Fatalf("without the scheme: %v", err)
	}
}

func TestSelectorMatches(t *testing.T) {
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	for _, tc := range []struct {
		name      string
		s         Selector
		ns, obj   string
		lbls      map[string]string
		wantMatch bool
	}{
		{"everything", Selector{}, "x", "o", nil, true},
		{"namespace in", Selector{Namespace: "a"}, "a", "o", nil, true},
		{"namespace out", Selector{Namespace: "a"}, "b", "o", nil, false},
		{"cluster-scoped object in a namespace's scope", Selector{Namespace: "a"}, "", "node", nil, true},
		{"labels in", Selector{Labels: web}, "a", "o", map[string]string{"app": "web"}, true},
		{"labels out", Selector{Labels: web}, "a", "o", map[string]string{"app": "db"}, false},
		{"name equals", Selector{Fields: fields.OneTermEqualSelector("metadata.name", "o")}, "a", "o", nil, true},
		{"name differs", Selector{Fields: fields.OneTermEqualSelector("metadata.name", "o")}, "a", "p", nil, false},
		{"namespace not equal, met", Selector{Fields: fields.OneTermNotEqualSelector("metadata.namespace", "a")}, "b", "o", nil, true},
		{"namespace not equal, unmet", Selector{Fields: fields.OneTermNotEqualSelector("metadata.namespace", "a")}, "a", "o", nil, false},
		{"other field counts as met", Selector{Fields: fields.OneTermEqualSelector("spec.nodeName", "n1")}, "a", "o", nil, true},
		{"other field does not hide a metadata one", Selector{Fields: fields.AndSelectors(
			fields.OneTermEqualSelector("spec.nodeName", "n1"), fields.OneTermEqualSelector("metadata.name", "o"))}, "a", "p", nil, false},
	} {
		if got := tc.s.Matches(tc.ns, tc.obj, tc.lbls); got != tc.wantMatch {
			t.Errorf("%s: Matches = %v, want %v", tc.name, got, tc.wantMatch)
		}
	}
}
