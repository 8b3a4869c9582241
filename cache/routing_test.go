package cache

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// Two Go types that print the same %T (core/v1 Event and
// events.k8s.io/v1 Event are both *v1.Event) are two types: an informer of
// one never names the other's resource.
func TestResourceForTellsSamePrintedTypesApart(t *testing.T) {
	core := NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.Event{}, 0, nil)
	events := NewSharedIndexInformer(&toolscache.ListWatch{}, &eventsv1.Event{}, 0, nil)
	coreGR := schema.GroupResource{Resource: "events"}
	eventsGR := schema.GroupResource{Group: "events.k8s.io", Resource: "events"}
	if fmt.Sprintf("%T", &corev1.Event{}) != fmt.Sprintf("%T", &eventsv1.Event{}) {
		t.Fatal("the two types no longer print alike: pick two that do")
	}
	for name, r := range map[string]ResourceResolver{
		"InformerList":        InformerList{core},
		"Sources, core first": Sources{InformerList{core}, InformerList{events}},
	} {
		if gr, err := r.ResourceFor(&eventsv1.Event{}); err != nil || gr != eventsGR {
			t.Errorf("%s.ResourceFor(events.k8s.io Event) = %v, %v; want %v", name, gr, err, eventsGR)
		}
	}
	if gr, err := (Sources{InformerList{events}, InformerList{core}}).ResourceFor(&corev1.Event{}); err != nil || gr != coreGR {
		t.Errorf("ResourceFor(core Event) = %v, %v; want %v", gr, err, coreGR)
	}
}
