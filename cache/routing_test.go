package cache

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
)

func inNamespace(c *corev1.ConfigMap, ns string) *corev1.ConfigMap { c.Namespace = ns; return c }

// A write in namespace b waits on b's informer and the cluster-wide one,
// never on a's; a write no informer admits fails at Record.
func TestReadYourWritesRoutesByScope(t *testing.T) {
	a, _, _ := startScripted(t, listThenWatch, listResponse{rv: "10"}, WithResource(configMapsResource), WithSelector(Selector{Namespace: "a"}))
	b, _, wb := startScripted(t, listThenWatch, listResponse{rv: "10"}, WithResource(configMapsResource), WithSelector(Selector{Namespace: "b"}))
	all, _, wall := startScripted(t, listThenWatch, listResponse{rv: "10"}, WithResource(configMapsResource))
	ryw := NewReadYourWrites(InformerList{a, b, all}, 5*time.Second)
	o := owner("p", "1")

	written := inNamespace(cm("x", "20"), "b")
	if err := ryw.Wrote(o, written, nil); err != nil {
		t.Fatal(err)
	}
	p := ryw.pending(o)
	if _, ok := p.written[a]; ok || p.written[b].String() != "20" || p.written[all].String() != "20" {
		t.Fatalf("routed to %v", p.written)
	}
	var nf *NotFreshError
	if err := ryw.CheckFresh(o); !errors.As(err, &nf) || nf.Scope.Namespace == "a" {
		t.Fatalf("CheckFresh before the write is cached = %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- ryw.EnsureFresh(context.Background(), o) }()
	wb.Add(written.DeepCopy())
	select {
	case err := <-done:
		t.Fatalf("EnsureFresh returned %v before the cluster-wide informer had the write", err)
	case <-time.After(50 * time.Millisecond):
	}
	wall.Add(written.DeepCopy())
	if err := <-done; err != nil {
		t.Fatal(err) // a, never written to, was not waited on
	}

	selective := NewReadYourWrites(InformerList{a, b}, time.Second)
	err := selective.Wrote(o, inNamespace(cm("y", "21"), "c"), nil)
	if !errors.Is(err, ErrNotWatched) || !strings.Contains(err.Error(), "namespace a") || !strings.Contains(err.Error(), "namespace b") {
		t.Fatalf("a write outside every informer: %v", err)
	}
}

// Owners of different kinds with one namespace/name keep separate records.
func TestReadYourWritesOwnersOfDifferentKinds(t *testing.T) {
	inf, _, _ := startScripted(t, listThenWatch, listResponse{rv: "10"}, WithResource(configMapsResource))
	ryw := NewReadYourWrites(InformerMap{configMapsResource: inf}, time.Second)
	deploy := OwnerOf(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "d"}})
	svc := OwnerOf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "s"}})
	if deploy.GroupKind != (schema.GroupKind{Group: "apps", Kind: "Deployment"}) || svc.GroupKind != (schema.GroupKind{Kind: "Service"}) {
		t.Fatalf("OwnerOf kinds: %v, %v", deploy.GroupKind, svc.GroupKind)
	}
	if err := ryw.Record(deploy, configMapsResource, cm("c", "30")); err != nil {
		t.Fatal(err)
	}
	if err := ryw.Record(svc, configMapsResource, cm("d", "10")); err != nil { // evicted the Deployment's record before
		t.Fatal(err)
	}
	if err := ryw.CheckFresh(svc); err != nil {
		t.Fatalf("the Service's write is cached: %v", err)
	}
	err := ryw.CheckFresh(deploy)
	if !errors.Is(err, ErrNotFresh) || !strings.Contains(err.Error(), "Deployment.apps ns/web") {
		t.Fatalf("the Deployment's write at 30 is not cached, CheckFresh = %v", err)
	}
	ryw.Forget(Owner{GroupKind: deploy.GroupKind, NamespacedName: deploy.NamespacedName})
	if err := ryw.CheckFresh(deploy); err != nil {
		t.Fatalf("after Forget: %v", err)
	}
}

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

// Wrote derives the resource from typed, unstructured and custom objects,
// and says clearly when it cannot; no Go type name becomes a resource.
func TestWroteDerivesTheResource(t *testing.T) {
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
	ryw := NewReadYourWrites(InformerList{widgets, cms, dyn}, time.Second)
	o := owner("p", "1")

	for _, obj := range []metav1.Object{
		cm("c", "5"),
		&widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", ResourceVersion: "6"}},
		func() *unstructured.Unstructured {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(widgetGVK)
			u.SetNamespace("ns")
			u.SetName("u")
			u.SetResourceVersion("7")
			return u
		}(),
	} {
		if err := ryw.Wrote(o, obj, nil); err != nil {
			t.Fatalf("Wrote(%T): %v", obj, err)
		}
	}
	p := ryw.pending(o)
	if p.written[cms].String() != "5" || p.written[widgets].String() != "6" || p.written[dyn].String() != "7" {
		t.Fatalf("routed: %v", p.written)
	}
	bare := NewReadYourWrites(InformerList{cms}, time.Second)
	if err := bare.Wrote(o, &widget{ObjectMeta: metav1.ObjectMeta{Name: "w", ResourceVersion: "6"}}, nil); !errors.Is(err, ErrUnknownResource) {
		t.Fatalf("Wrote of a type nothing knows: %v", err)
	}
	if err := bare.Wrote(o, cm("c", ""), nil); !strings.Contains(err.Error(), "freshtest") {
		t.Fatalf("Wrote of an object without resource version: %v", err)
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
