package informers_test

import (
	"context"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/freshinformer/freshinformer/cache"
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

// A resource this client-go serves but the factory's own accessors do not
// know (added after the lowest supported client-go, or dropped by a newer
// one) is client-go's informer, without freshness, from ForResource as
// from the group accessors; Start and WaitForCacheSync cover it.
func TestResourcesOutsideTheFloorArePlain(t *testing.T) {
	candidates := []schema.GroupVersionResource{
		{Group: "lifecycle.k8s.io", Version: "v1alpha1", Resource: "evictionrequests"}, // client-go 0.37 added it
		{Group: "scheduling.k8s.io", Version: "v1alpha2", Resource: "workloads"},       // client-go 0.37 removed it
	}
	f := cache.NewSharedInformerFactory(fake.NewClientset(), 0)
	checked := 0
	for _, gvr := range candidates {
		if !scheme.Scheme.IsVersionRegistered(gvr.GroupVersion()) {
			t.Logf("%v: this client-go does not serve it", gvr)
			continue
		}
		generic, err := f.ForResource(gvr)
		if err != nil {
			t.Fatalf("ForResource(%v): %v", gvr, err)
		}
		if _, ok := cache.FreshInformerOf(generic.Informer()); ok {
			t.Fatalf("ForResource(%v) is a FreshInformer: the factory's table has it, update this test", gvr)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no candidate is served by this client-go: update the candidates")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); f.Shutdown() }()
	f.Start(ctx.Done())
	synced := f.WaitForCacheSync(ctx.Done())
	if len(synced) != checked {
		t.Fatalf("WaitForCacheSync reported %v, %d were made", synced, checked)
	}
}
