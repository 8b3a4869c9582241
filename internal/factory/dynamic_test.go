package factory_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/freshinformer/freshinformer/cache"
)

func TestDynamicFactory(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("example.com/v1")
	obj.SetKind("Widget")
	obj.SetNamespace("ns")
	obj.SetName("w")
	obj.SetResourceVersion("7")
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "WidgetList"}, obj)
	f := cache.NewDynamicSharedInformerFactory(client, 0)
	generic := f.ForResource(gvr)
	inf, ok := generic.Informer().(*cache.FreshInformer)
	if !ok || f.ForResource(gvr).Informer() != inf {
		t.Fatal("the dynamic factory does not hand out one FreshInformer per GVR")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); f.Shutdown() }()
	f.Start(ctx.Done())
	if synced := f.WaitForCacheSync(ctx.Done()); !synced[gvr] {
		t.Fatalf("synced %v", synced)
	}
	got, err := generic.Lister().ByNamespace("ns").Get("w")
	if err != nil || got.(*unstructured.Unstructured).GetResourceVersion() != "7" {
		t.Fatalf("dynamic lister: %v %v", got, err)
	}
	if inf.Resource() != gvr.GroupResource() {
		t.Fatalf("resource %v", inf.Resource())
	}
	// A write through the dynamic client is waited for by GVR.
	w2 := obj.DeepCopy()
	w2.SetName("w2")
	w2.SetResourceVersion("8")
	if _, err := client.Resource(gvr).Namespace("ns").Create(ctx, w2, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	if err := f.WaitForFreshness(wctx, gvr, "8"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := inf.GetIndexer().GetByKey("ns/w2"); !ok {
		t.Fatal("fresh at 8 without w2")
	}
}
