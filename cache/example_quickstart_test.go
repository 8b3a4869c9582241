package cache_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshtest"
	"github.com/freshinformer/freshinformer/internal/informertest"
)

// The README's quick start: a FreshInformer where client-go's
// NewSharedIndexInformer was, and a reconciler that waits for its own
// write before reading the lister. The clientset is a real one, on an API
// server that serves a fake's ConfigMaps.
func ExampleNewSharedIndexInformer() {
	cfg, closeServer := informertest.ServeConfigMaps(freshtest.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}}))
	defer closeServer()
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	ns := "default"

	lw := toolscache.NewListWatchFromClient(client.CoreV1().RESTClient(), "configmaps", metav1.NamespaceAll, fields.Everything())
	informer := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
	lister := corelisters.NewConfigMapLister(informer.GetIndexer()) // typed lister over the informer's indexer
	go informer.RunWithContext(ctx)                                 // a toolscache.SharedIndexInformer: indexer, handlers, WaitForCacheSync as before
	defer cancel()
	toolscache.WaitForCacheSync(ctx.Done(), informer.HasSynced)

	reconcile := func(ctx context.Context, cm *corev1.ConfigMap) error {
		// In the reconciler, after a write:
		updated, err := client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		if err := informer.WaitForFreshness(ctx, updated.ResourceVersion); err != nil {
			return err // timed out, cancelled, informer stopped, or incomparable RVs: requeue
		}
		cached, err := lister.ConfigMaps(ns).Get(cm.Name) // the write, or something newer
		if err != nil {
			return err
		}
		fmt.Println("cached:", cached.Data["mode"], cached.ResourceVersion == updated.ResourceVersion)
		return nil
	}

	cm, err := lister.ConfigMaps(ns).Get("settings")
	if err != nil {
		fmt.Println(err)
		return
	}
	cm = cm.DeepCopy()
	cm.Data = map[string]string{"mode": "fast"}
	fmt.Println(reconcile(ctx, cm))
	// Output:
	// cached: fast true
	// <nil>
}
