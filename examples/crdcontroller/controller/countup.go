package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/freshinformer/freshinformer/cache"
	countingv1alpha1 "github.com/freshinformer/freshinformer/examples/crdcontroller/apis/counting/v1alpha1"
	"github.com/freshinformer/freshinformer/examples/crdcontroller/generated/clientset/versioned"
	"github.com/freshinformer/freshinformer/examples/crdcontroller/generated/informers/externalversions"
)

// CountUp is a whole run against a cluster: it installs the CRDs, makes
// counters Counters in namespace (created if missing, Counters of earlier
// runs deleted) counting to target under a Ceiling of target, runs a
// controller (fresh or plain) with workers workers until the server says
// every Counter is done, and returns what the controller counted and how
// long it took.
func CountUp(ctx context.Context, cfg *rest.Config, namespace string, counters, target, workers int, fresh bool, opts ...cache.Option) (Stats, time.Duration, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Stats{}, 0, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return Stats{}, 0, err
	}
	client, err := versioned.NewForConfig(cfg)
	if err != nil {
		return Stats{}, 0, err
	}
	if err := InstallCRDs(ctx, dyn); err != nil {
		return Stats{}, 0, err
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return Stats{}, 0, err
	}
	api := client.CountingV1alpha1()
	if err := api.Counters(namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return Stats{}, 0, err
	}
	if err := api.Ceilings().Delete(ctx, "default", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return Stats{}, 0, err
	}
	if _, err := api.Ceilings().Create(ctx, &countingv1alpha1.Ceiling{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: countingv1alpha1.CeilingSpec{Max: int32(target)}}, metav1.CreateOptions{}); err != nil {
		return Stats{}, 0, err
	}

	factory := externalversions.NewSharedInformerFactoryWithOptions(client, 0, externalversions.WithNamespace(namespace))
	c, err := New(client, factory, fresh, opts...)
	if err != nil {
		return Stats{}, 0, err
	}
	informerCtx, stopInformers := context.WithCancel(ctx)
	defer func() { stopInformers(); factory.Shutdown() }()
	factory.Start(informerCtx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return Stats{}, 0, fmt.Errorf("%v did not sync", typ)
		}
	}

	start := time.Now()
	for i := range counters {
		counter := &countingv1alpha1.Counter{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("counter-%d", i)},
			Spec: countingv1alpha1.CounterSpec{Target: int32(target)}}
		if _, err := api.Counters(namespace).Create(ctx, counter, metav1.CreateOptions{}); err != nil {
			return Stats{}, 0, err
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); c.Run(runCtx, workers) }()
	// The stats are read once the workers are done: the server may show a
	// write before its worker has counted it.
	finish := func(err error) (Stats, time.Duration, error) {
		elapsed := time.Since(start)
		stop()
		<-done
		return c.Stats(), elapsed, err
	}
	for {
		list, err := api.Counters(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return finish(err)
		}
		finished := 0
		for _, counter := range list.Items {
			if counter.Status.Count >= int32(target) {
				finished++
			}
		}
		if finished == counters {
			return finish(nil)
		}
		select {
		case <-ctx.Done():
			return finish(fmt.Errorf("%d of %d counters reached %d: %w", finished, counters, target, ctx.Err()))
		case <-time.After(50 * time.Millisecond):
		}
	}
}
