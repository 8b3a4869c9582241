// Package clientgoshim is the shim (see package shim) of the suites whose
// code registers flags of its own: sample-controller's main registers
// -kubeconfig, as controller-runtime's packages, which package shim
// imports, do. It imports nothing of controller-runtime.
package clientgoshim

import (
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/sample-controller/pkg/generated/clientset/versioned"
	"k8s.io/sample-controller/pkg/generated/informers/externalversions"

	fcache "github.com/freshinformer/freshinformer/cache"
)

// Upstream reports whether this is the control run (package shim's
// EnvImpl is "upstream").
func Upstream() bool { return os.Getenv("FRESHINFORMER_CONFORMANCE_IMPL") == "upstream" }

// NewKubeSharedInformerFactory stands in for client-go's
// informers.NewSharedInformerFactory: the drop-in factory.
func NewKubeSharedInformerFactory(client kubernetes.Interface, defaultResync time.Duration) informers.SharedInformerFactory {
	if Upstream() {
		return informers.NewSharedInformerFactory(client, defaultResync)
	}
	return fcache.NewSharedInformerFactory(client, defaultResync)
}

// NewSampleSharedInformerFactory stands in for sample-controller's
// code-generated NewSharedInformerFactory: the same factory, whose Foo
// informer is a FreshInformer (one call, cache.InformerFor). The upstream
// generated package has no ListScope (cmd/scope-gen), so the call says the
// factory's scope: all namespaces, no tweak, as NewSharedInformerFactory
// makes it.
func NewSampleSharedInformerFactory(client versioned.Interface, defaultResync time.Duration) externalversions.SharedInformerFactory {
	factory := externalversions.NewSharedInformerFactory(client, defaultResync)
	if Upstream() {
		return factory
	}
	if _, err := fcache.InformerFor(fcache.Scoped(factory, metav1.NamespaceAll, nil), client.SamplecontrollerV1alpha1().Foos); err != nil {
		panic(fmt.Sprintf("conformance shim: %v", err))
	}
	return factory
}
