package factory_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/informers/apps"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshtest"
)

// newerGroupNames are the API group accessors of client-go's factory
// interface that only client-go versions newer than the lowest supported
// one (0.36) have: the factory lends them from an embedded client-go
// factory (the var _ assertion in typed.go checks they are there).
var newerGroupNames = map[string]string{
	"Lifecycle": "client-go 0.37",
}

// method returns v's method called name, if v has one.
func method(v reflect.Value, name string) (reflect.Value, bool) {
	for i := range v.NumMethod() {
		if v.Type().Method(i).Name == name {
			return v.Method(i), true
		}
	}
	return reflect.Value{}, false
}

// A newer group's accessor, called through the factory, gives client-go's
// informers that the factory's Start and WaitForCacheSync cover.
func TestNewerGroupsAreStartedAndSynced(t *testing.T) {
	f := cache.NewSharedInformerFactory(fake.NewClientset(), 0)
	var factory informers.SharedInformerFactory = f
	made := 0
	found := false
	for name, since := range newerGroupNames {
		group, ok := method(reflect.ValueOf(factory), name)
		if !ok {
			t.Logf("%s: this client-go has no such group (%s added it)", name, since)
			continue
		}
		found = true
		versions := group.Call(nil)[0]
		for i := range versions.NumMethod() {
			resources := versions.Method(i).Call(nil)[0]
			for j := range resources.NumMethod() {
				informer, ok := method(resources.Method(j).Call(nil)[0], "Informer")
				if !ok || informer.Call(nil)[0].IsNil() {
					t.Fatalf("%s: no informer", name)
				}
				made++
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); f.Shutdown() }()
	f.Start(ctx.Done())
	synced := f.WaitForCacheSync(ctx.Done())
	if found && made == 0 {
		t.Fatal("client-go has a newer group but no informer of it was made")
	}
	if len(synced) != made {
		t.Fatalf("WaitForCacheSync reported %d informers, %d were made", len(synced), made)
	}
	for typ, ok := range synced {
		if !ok {
			t.Errorf("%v did not sync", typ)
		}
	}
}

// outsideCandidates are resources client-go serves on only some supported
// versions, so outside the factory's table: each test uses those the
// linked client-go serves.
var outsideCandidates = []schema.GroupVersionResource{
	{Group: "lifecycle.k8s.io", Version: "v1alpha1", Resource: "evictionrequests"}, // client-go 0.37 added it
	{Group: "scheduling.k8s.io", Version: "v1alpha2", Resource: "workloads"},       // client-go 0.37 removed it
}

// served returns the candidates this client-go serves, failing the test if
// none is.
func served(t *testing.T) []schema.GroupVersionResource {
	t.Helper()
	var out []schema.GroupVersionResource
	for _, gvr := range outsideCandidates {
		if !scheme.Scheme.IsVersionRegistered(gvr.GroupVersion()) {
			t.Logf("%v: this client-go does not serve it", gvr)
			continue
		}
		out = append(out, gvr)
	}
	if len(out) == 0 {
		t.Fatal("no candidate is served by this client-go: update the candidates")
	}
	return out
}

// newObject returns an object of gvr's kind (its one kind whose guessed
// plural is the resource) named name in namespace ns.
func newObject(t *testing.T, gvr schema.GroupVersionResource, ns, name string) runtime.Object {
	t.Helper()
	for kind := range scheme.Scheme.KnownTypes(gvr.GroupVersion()) {
		gvk := gvr.GroupVersion().WithKind(kind)
		if plural, _ := meta.UnsafeGuessKindToResource(gvk); plural != gvr {
			continue
		}
		obj, err := scheme.Scheme.New(gvk)
		if err != nil {
			t.Fatal(err)
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			t.Fatal(err)
		}
		m.SetNamespace(ns)
		m.SetName(name)
		return obj
	}
	t.Fatalf("no kind of %v", gvr)
	return nil
}

// A resource this client-go serves but the factory's table does not have
// (added after the lowest supported client-go, or dropped by a newer one)
// is a FreshInformer from ForResource and InformerFor alike, and lists,
// watches and waits on the fake clientset.
func TestResourcesOutsideTheFloorAreFresh(t *testing.T) {
	client := freshtest.NewClientset()
	f := cache.NewSharedInformerFactory(client, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer func() { cancel(); f.Shutdown() }()
	gvrs := served(t)
	infs := map[schema.GroupVersionResource]*cache.FreshInformer{}
	for _, gvr := range gvrs {
		if _, err := client.Invokes(k8stesting.NewCreateAction(gvr, "ns", newObject(t, gvr, "ns", "before")), nil); err != nil {
			t.Fatal(err)
		}
		generic, err := f.ForResource(gvr)
		if err != nil {
			t.Fatalf("ForResource(%v): %v", gvr, err)
		}
		inf, ok := cache.FreshInformerOf(generic.Informer())
		if !ok {
			t.Fatalf("ForResource(%v) is not a FreshInformer", gvr)
		}
		if inf.Resource() != gvr.GroupResource() {
			t.Fatalf("ForResource(%v) lists %v", gvr, inf.Resource())
		}
		again := f.InformerFor(newObject(t, gvr, "", ""), func(kubernetes.Interface, time.Duration) toolscache.SharedIndexInformer {
			t.Fatal("InformerFor made a second informer of the type")
			return nil
		})
		if again != generic.Informer() {
			t.Fatalf("InformerFor(%v's type) is another informer", gvr)
		}
		infs[gvr] = inf
	}
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%v did not sync", typ)
		}
	}
	for _, gvr := range gvrs {
		generic, _ := f.ForResource(gvr)
		if _, err := generic.Lister().ByNamespace("ns").Get("before"); err != nil {
			t.Fatalf("%v: the listed object is not in the cache: %v", gvr, err)
		}
		created, err := client.Invokes(k8stesting.NewCreateAction(gvr, "ns", newObject(t, gvr, "ns", "after")), nil)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := meta.Accessor(created)
		if err := f.WaitForFreshness(ctx, gvr, m.GetResourceVersion()); err != nil {
			t.Fatalf("%v: %v", gvr, err)
		}
		if _, err := generic.Lister().ByNamespace("ns").Get("after"); err != nil {
			t.Fatalf("%v: fresh at %s but the watched object is not in the cache: %v", gvr, m.GetResourceVersion(), err)
		}
		if got := infs[gvr].LastObservedResourceVersion(); got == "" {
			t.Fatalf("%v: no observed resource version", gvr)
		}
	}
}

// Through the group accessors a client-go serves (0.36's
// Scheduling().V1alpha2(), reached by name since 0.37 has no such method),
// the informers are FreshInformers too, with the accessor's scope.
func TestGroupAccessorsOutsideTheFloorAreFresh(t *testing.T) {
	f := cache.NewSharedInformerFactory(fake.NewClientset(), 0, cache.WithNamespace("ns"))
	versions := reflect.ValueOf(f.Scheduling())
	v1alpha2, ok := method(versions, "V1alpha2")
	if !ok {
		t.Skip("this client-go has no scheduling.k8s.io/v1alpha2")
	}
	workloads, ok := method(v1alpha2.Call(nil)[0], "Workloads")
	if !ok {
		t.Skip("this client-go has no scheduling.k8s.io/v1alpha2 workloads")
	}
	informer, _ := method(workloads.Call(nil)[0], "Informer")
	inf, ok := cache.FreshInformerOf(informer.Call(nil)[0].Interface().(toolscache.SharedIndexInformer))
	if !ok {
		t.Fatal("Scheduling().V1alpha2().Workloads().Informer() is not a FreshInformer")
	}
	if want := (schema.GroupResource{Group: "scheduling.k8s.io", Resource: "workloads"}); inf.Resource() != want {
		t.Fatalf("lists %v, want %v", inf.Resource(), want)
	}
	if _, ok := inf.GetIndexer().GetIndexers()[toolscache.NamespaceIndex]; !ok {
		t.Fatal("the accessor's namespace index is missing")
	}
}

// NewGroup gives a group accessor over the factory, as its own are made:
// FreshInformers in the factory's scope (what 0.37's Lifecycle() takes).
func TestNewGroupIsFresh(t *testing.T) {
	f := cache.NewSharedInformerFactory(fake.NewClientset(), 0, cache.WithNamespace("ns"))
	inf, ok := cache.FreshInformerOf(cache.NewGroup(f, apps.New).V1().Deployments().Informer())
	if !ok {
		t.Fatal("NewGroup's informer is not a FreshInformer")
	}
	if inf.Selector().Namespace != "ns" {
		t.Fatalf("scope %v, want the factory's namespace", inf.Selector())
	}
	if again, _ := cache.FreshInformerOf(f.Apps().V1().Deployments().Informer()); again != inf {
		t.Fatal("the factory's own accessor gives another informer")
	}
}
