package readyourwrites

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
)

// A write in namespace b waits on b's informer and the cluster-wide one,
// never on a's; a write no informer admits fails at Record.
func TestRoutesByScope(t *testing.T) {
	a, _, _ := startScripted(t, listResponse{rv: "10"}, cache.WithResource(configMapsResource), cache.WithSelector(cache.Selector{Namespace: "a"}))
	b, _, wb := startScripted(t, listResponse{rv: "10"}, cache.WithResource(configMapsResource), cache.WithSelector(cache.Selector{Namespace: "b"}))
	all, _, wall := startScripted(t, listResponse{rv: "10"}, cache.WithResource(configMapsResource))
	ryw := New(cache.InformerList{a, b, all}, 5*time.Second)
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
	if err := ryw.CheckFresh(o); !errors.As(err, &nf) || nf.Scope.Namespace == "a" || nf.Informer == a {
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

	selective := New(cache.InformerList{a, b}, time.Second)
	err := selective.Wrote(o, inNamespace(cm("y", "21"), "c"), nil)
	if !errors.Is(err, cache.ErrNotWatched) || !strings.Contains(err.Error(), "namespace a") || !strings.Contains(err.Error(), "namespace b") {
		t.Fatalf("a write outside every informer: %v", err)
	}
}

// A write that moves an object out of an informer's label selector is
// routed to that informer too: it still holds the object, and sees the
// write as a delete at the write's resource version.
func TestRoutesToInformersHoldingTheKey(t *testing.T) {
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	labelled := cm("x", "5")
	labelled.Labels = map[string]string{"app": "web"}
	inf, _, w := startScripted(t, listResponse{rv: "10", objects: []*corev1.ConfigMap{labelled}},
		cache.WithResource(configMapsResource), cache.WithSelector(cache.Selector{Labels: web}))
	ryw := New(cache.InformerList{inf}, 5*time.Second)
	o := owner("p", "1")
	moved := cm("x", "20") // its label removed
	if err := ryw.Record(o, configMapsResource, moved); err != nil {
		t.Fatalf("a write moving a cached object out of the selector: %v", err)
	}
	if err := ryw.CheckFresh(o); !errors.Is(err, freshness.ErrNotFresh) {
		t.Fatalf("CheckFresh with the object still cached under its old labels: %v", err)
	}
	w.Delete(cm("x", "20")) // what a label-selected watch sends
	if err := ryw.EnsureFresh(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if err := ryw.Record(o, configMapsResource, cm("never-held", "21")); !errors.Is(err, cache.ErrNotWatched) {
		t.Fatalf("a write outside the selector, never held: %v", err)
	}
}

// Owners of different kinds with one namespace/name keep separate records.
func TestOwnersOfDifferentKinds(t *testing.T) {
	inf, _, _ := startScripted(t, listResponse{rv: "10"}, cache.WithResource(configMapsResource))
	ryw := New(cache.InformerList{inf}, time.Second)
	deploy := OwnerOf(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "d"}})
	svc := OwnerOf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "s"}})
	if deploy.GroupKind != (schema.GroupKind{Group: "apps", Kind: "Deployment"}) || svc.GroupKind != (schema.GroupKind{Kind: "Service"}) {
		t.Fatalf("OwnerOf kinds: %v, %v", deploy.GroupKind, svc.GroupKind)
	}
	if err := ryw.Record(deploy, configMapsResource, cm("c", "30")); err != nil {
		t.Fatal(err)
	}
	if err := ryw.Record(svc, configMapsResource, cm("d", "10")); err != nil {
		t.Fatal(err)
	}
	if err := ryw.CheckFresh(svc); err != nil {
		t.Fatalf("the Service's write is cached: %v", err)
	}
	err := ryw.CheckFresh(deploy)
	if !errors.Is(err, freshness.ErrNotFresh) || !strings.Contains(err.Error(), "Deployment.apps ns/web") {
		t.Fatalf("the Deployment's write at 30 is not cached, CheckFresh = %v", err)
	}
	ryw.Forget(Owner{GroupKind: deploy.GroupKind, NamespacedName: deploy.NamespacedName})
	if err := ryw.CheckFresh(deploy); err != nil {
		t.Fatalf("after Forget: %v", err)
	}
	if got := OwnerOf(&widget{ObjectMeta: metav1.ObjectMeta{Name: "w"}}).Kind; got != "github.com/freshinformer/freshinformer/readyourwrites.widget" {
		t.Fatalf("OwnerOf a type no scheme knows: kind %q", got)
	}
}

type widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

func (w *widget) DeepCopyObject() apiruntime.Object {
	c := *w
	w.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

var widgetGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

// Wrote derives the resource from typed, unstructured and custom objects,
// and says clearly when it cannot; no Go type name becomes a resource.
func TestWroteDerivesTheResource(t *testing.T) {
	s := apiruntime.NewScheme()
	s.AddKnownTypeWithName(widgetGVK, &widget{})
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.AddSpecific(widgetGVK, schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gizmos"},
		schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gizmo"}, meta.RESTScopeNamespace)

	widgets := cache.NewSharedIndexInformer(&toolscache.ListWatch{}, &widget{}, 0, nil, cache.WithScheme(s, mapper))
	cms := cache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.ConfigMap{}, 0, nil)
	dyn := cache.NewSharedIndexInformer(&toolscache.ListWatch{}, &unstructured.Unstructured{}, 0, nil,
		cache.WithResource(schema.GroupResource{Group: "example.com", Resource: "widgets"}))
	ryw := New(cache.InformerList{widgets, cms, dyn}, time.Second)
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
	bare := New(cache.InformerList{cms}, time.Second)
	if err := bare.Wrote(o, &widget{ObjectMeta: metav1.ObjectMeta{Name: "w", ResourceVersion: "6"}}, nil); !errors.Is(err, cache.ErrUnknownResource) {
		t.Fatalf("Wrote of a type nothing knows: %v", err)
	}
	withScheme := NewWithOptions(cache.InformerList{cms, widgets}, Options{Scheme: s, RESTMapper: mapper})
	if gr, err := withScheme.resourceFor(&widget{}); err != nil || gr != (schema.GroupResource{Group: "example.com", Resource: "gizmos"}) {
		t.Fatalf("resource of a widget with Options.Scheme and RESTMapper: %v, %v", gr, err)
	}
	if err := bare.Wrote(o, cm("c", ""), nil); !strings.Contains(err.Error(), "freshtest") {
		t.Fatalf("Wrote of an object without resource version: %v", err)
	}
	if err := bare.Record(o, configMapsResource, cm("c", "abc")); !errors.Is(err, freshness.ErrIncomparable) {
		t.Fatalf("Record of a malformed resource version: %v", err)
	}
}

// A namespaced factory's cluster-scoped informers see every object.
func TestNamespacedFactoryClusterScopedWrites(t *testing.T) {
	f := cache.NewSharedInformerFactory(fake.NewClientset(), 0, cache.WithNamespace("ns"))
	f.Core().V1().Nodes().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); f.Shutdown() }()
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	ryw := New(f, time.Second)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "3"}}
	if err := ryw.Record(owner("p", "1"), schema.GroupResource{Resource: "nodes"}, node); err != nil {
		t.Fatalf("Record(node) on a namespaced factory: %v", err)
	}
}

// RecordFor and RecordDeleteFor record one write for several owners, and
// report it to each informer once.
func TestRecordForSeveralOwners(t *testing.T) {
	inf, _, w := startScripted(t, listResponse{rv: "10", objects: []*corev1.ConfigMap{withUID(cm("old", "5"), "o1")}},
		cache.WithResource(configMapsResource))
	ryw := New(cache.InformerList{inf}, 5*time.Second)
	a, b := owner("a", "1"), owner("b", "1")
	if err := ryw.RecordFor([]Owner{a, b}, configMapsResource, cm("x", "20")); err != nil {
		t.Fatal(err)
	}
	if err := ryw.RecordDeleteFor([]Owner{a, b}, configMapsResource, withUID(cm("old", "5"), "o1")); err != nil {
		t.Fatal(err)
	}
	for _, o := range []Owner{a, b} {
		if err := ryw.CheckFresh(o); !errors.Is(err, freshness.ErrNotFresh) {
			t.Fatalf("%s before the cache has the write: %v", o, err)
		}
	}
	w.Add(cm("x", "20"))
	w.Delete(withUID(cm("old", "21"), "o1"))
	for _, o := range []Owner{a, b} {
		if err := ryw.EnsureFresh(context.Background(), o); err != nil {
			t.Fatalf("%s: %v", o, err)
		}
	}
	if owners, _, _ := ryw.sizes(); owners != 0 {
		t.Fatalf("%d owners kept after both were found fresh", owners)
	}
}

// RecordResourceVersion waits on every informer of the resource that can
// hold objects of the namespace, whatever its selectors.
func TestRecordResourceVersion(t *testing.T) {
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	a, _, wa := startScripted(t, listResponse{rv: "10"}, cache.WithResource(configMapsResource), cache.WithSelector(cache.Selector{Namespace: "a", Labels: web}))
	b, _, _ := startScripted(t, listResponse{rv: "10"}, cache.WithResource(configMapsResource), cache.WithSelector(cache.Selector{Namespace: "b"}))
	ryw := New(cache.InformerList{a, b}, 5*time.Second)
	o := owner("p", "1")
	if err := ryw.RecordResourceVersion([]Owner{o}, configMapsResource, "a", "30"); err != nil {
		t.Fatal(err)
	}
	p := ryw.pending(o)
	if len(p.written) != 1 || p.written[a].String() != "30" {
		t.Fatalf("routed to %v, want a's informer only", p.written)
	}
	var nf *NotFreshError
	if err := ryw.CheckFresh(o); !errors.As(err, &nf) || nf.Informer != a || nf.Written != "30" {
		t.Fatalf("CheckFresh: %v", err)
	}
	wa.Action(watch.Bookmark, cm("", "30"))
	if err := ryw.EnsureFresh(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if err := ryw.RecordResourceVersion([]Owner{o}, configMapsResource, "c", "31"); !errors.Is(err, cache.ErrNoInformer) {
		t.Fatalf("a namespace no informer holds: %v", err)
	}
	if err := ryw.RecordResourceVersion([]Owner{o}, configMapsResource, "", "x"); !errors.Is(err, freshness.ErrIncomparable) {
		t.Fatalf("a malformed resource version: %v", err)
	}
}

// changingSource is an InformerSource whose informers can be removed.
type changingSource struct {
	mu   sync.Mutex
	list cache.InformerList
}

func (s *changingSource) FreshInformersForResource(gr schema.GroupResource) []*cache.FreshInformer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.list.FreshInformersForResource(gr)
}

func (s *changingSource) remove(inf *cache.FreshInformer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.list {
		if x == inf {
			s.list = append(s.list[:i:i], s.list[i+1:]...)
			return
		}
	}
}

// An informer that stopped is waited for with an error while its source
// lists it, and not at all once the source has removed it.
func TestRemovedInformerIsNotWaitedFor(t *testing.T) {
	inf, _, _ := startScripted(t, listResponse{rv: "10"}, cache.WithResource(configMapsResource))
	src := &changingSource{list: cache.InformerList{inf}}
	ryw := New(src, time.Second)
	o := owner("p", "1")
	if err := ryw.Record(o, configMapsResource, cm("x", "20")); err != nil {
		t.Fatal(err)
	}
	mustStop(t, inf)()
	if err := ryw.EnsureFresh(context.Background(), o); !errors.Is(err, freshness.ErrStopped) {
		t.Fatalf("a stopped informer still listed: %v", err)
	}
	src.remove(inf)
	if err := ryw.CheckFresh(o); err != nil {
		t.Fatalf("a stopped informer no longer listed: %v", err)
	}
	if owners, _, _ := ryw.sizes(); owners != 0 {
		t.Fatalf("%d owners kept", owners)
	}
}
