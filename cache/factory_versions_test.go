package cache

import (
	"context"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// newerGroupNames are the API group accessors of client-go's factory
// interface that only client-go versions newer than the lowest supported
// one (0.36) have: the factory lends them from an embedded client-go
// factory (the var _ assertion in factory.go checks they are there).
var newerGroupNames = map[string]string{
	"Lifecycle": "client-go 0.37",
}

// A newer group's accessor, called through the factory, gives client-go's
// informers that the factory's Start and WaitForCacheSync cover.
func TestNewerGroupsAreStartedAndSynced(t *testing.T) {
	f := NewSharedInformerFactory(fake.NewClientset(), 0)
	var factory informers.SharedInformerFactory = f
	made := 0
	for name, since := range newerGroupNames {
		group := reflect.ValueOf(factory).MethodByName(name)
		if !group.IsValid() {
			t.Logf("%s: this client-go has no such group (%s added it)", name, since)
			continue
		}
		versions := group.Call(nil)[0]
		for i := range versions.NumMethod() {
			resources := versions.Method(i).Call(nil)[0]
			for j := range resources.NumMethod() {
				informer := resources.Method(j).Call(nil)[0].MethodByName("Informer").Call(nil)[0]
				if informer.IsNil() {
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
	if made == 0 && reflect.ValueOf(factory).MethodByName("Lifecycle").IsValid() {
		t.Fatal("client-go has Lifecycle() but no informer of it was made")
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

// The informers of a newer group, reached with the group's New over the
// factory, come from InformerFor: each of the group's types must get a
// FreshInformer there. The types are read off client-go's interface
// (group, version, resource, Lister().List's element), so the test needs
// no import of the newer packages; on client-go 0.36 there is nothing to
// check.
func TestNewerGroupsGetFreshInformers(t *testing.T) {
	f := NewSharedInformerFactory(fake.NewClientset(), 0)
	iface := reflect.TypeFor[informers.SharedInformerFactory]()
	checked := 0
	for name, since := range newerGroupNames {
		group, ok := iface.MethodByName(name)
		if !ok {
			t.Logf("%s: this client-go has no such group (%s added it)", name, since)
			continue
		}
		for _, version := range methodsOf(group.Type.Out(0)) {
			for _, res := range methodsOf(version.Type.Out(0)) {
				obj, ok := listedObject(res.Type.Out(0))
				if !ok {
					t.Errorf("%s().%s().%s(): no Lister().List to read the type from", name, version.Name, res.Name)
					continue
				}
				if _, err := f.FreshInformerFor(obj); err != nil {
					t.Errorf("%s().%s().%s(): %v", name, version.Name, res.Name, err)
				}
				checked++
			}
		}
	}
	if _, ok := iface.MethodByName("Lifecycle"); ok && checked == 0 {
		t.Fatal("client-go has Lifecycle() but no resource of it was checked")
	}
}

func methodsOf(t reflect.Type) []reflect.Method {
	out := make([]reflect.Method, t.NumMethod())
	for i := range out {
		out[i] = t.Method(i)
	}
	return out
}

// listedObject returns a new object of the type a typed informer's
// Lister().List returns a slice of pointers to.
func listedObject(informer reflect.Type) (runtime.Object, bool) {
	lister, ok := informer.MethodByName("Lister")
	if !ok || lister.Type.NumOut() != 1 {
		return nil, false
	}
	list, ok := lister.Type.Out(0).MethodByName("List")
	if !ok || list.Type.NumOut() != 2 || list.Type.Out(0).Kind() != reflect.Slice {
		return nil, false
	}
	elem := list.Type.Out(0).Elem()
	if elem.Kind() != reflect.Pointer {
		return nil, false
	}
	obj, ok := reflect.New(elem.Elem()).Interface().(runtime.Object)
	return obj, ok
}
