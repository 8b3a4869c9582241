package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/integration/testenv"
)

// A fake clientset's deletion at its object's own resource version, or its
// list of objects without one, turns the informer plain (waits fail with
// ErrIncomparable). A real kube-apiserver sends neither: each write has a
// resource version of its own and a deletion's is past its object's. As a
// user writes it (the drop-in factory's getter, Start, a wait at once), a
// name created, deleted and created again, and a deletion, are each waited
// for and reached, and handlers hear all four events.
func TestRecreatedNameOnTheRealServerStaysComparable(t *testing.T) {
	cs := testenv.Clientset(t)
	ns := testenv.Namespace(t)
	ctx := testenv.Context(t, time.Minute)
	factory := cache.NewSharedInformerFactory(cs, 0, cache.WithNamespace(ns))
	informer := factory.Core().V1().ConfigMaps().Informer()
	heard := make(chan string, 8)
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { heard <- "add" },
		UpdateFunc: func(_, _ any) { heard <- "update" },
		DeleteFunc: func(any) { heard <- "delete" },
	}); err != nil {
		t.Fatal(err)
	}
	fctx, stop := context.WithCancel(ctx)
	defer func() { stop(); factory.Shutdown() }()
	factory.Start(fctx.Done())

	cms := cs.CoreV1().ConfigMaps(ns)
	waitFor := func(what, rv string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := cache.WaitForFreshness(wctx, informer, rv); err != nil {
			t.Fatalf("WaitForFreshness(%s) after the %s = %v, want nil", rv, what, err)
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	for i, step := range []string{"create", "delete", "create again", "delete again"} {
		var rv string
		if i%2 == 0 {
			out, err := cms.Create(ctx, cm, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rv = out.ResourceVersion
		} else {
			// A deletion's resource version is the next write's floor: read
			// it from a consistent list after the deletion.
			if err := cms.Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			list, err := cms.List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rv = list.ResourceVersion
		}
		waitFor(step, rv)
		_, ok, _ := informer.GetIndexer().GetByKey(ns + "/x")
		if want := i%2 == 0; ok != want {
			t.Fatalf("after the %s, the indexer holds x: %v", step, ok)
		}
	}
	for _, want := range []string{"add", "delete", "add", "delete"} {
		select {
		case got := <-heard:
			if got != want {
				t.Fatalf("handler heard %s, want %s", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("handler never heard the %s", want)
		}
	}
}
