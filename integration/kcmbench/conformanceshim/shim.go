// Package conformanceshim is the shim (see the integration module's
// conformance/shim) of the kube-controller-manager suites that make
// conformance ports into this module, the one module allowed to require
// k8s.io/kubernetes: their informer factory becomes the drop-in factory,
// or stays client-go's in the control run.
package conformanceshim

import (
	"os"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	fcache "github.com/freshinformer/freshinformer/cache"
)

// Upstream reports whether this is the control run (the conformance
// runner sets FRESHINFORMER_CONFORMANCE_IMPL=upstream).
func Upstream() bool { return os.Getenv("FRESHINFORMER_CONFORMANCE_IMPL") == "upstream" }

// NewKubeSharedInformerFactory stands in for client-go's
// informers.NewSharedInformerFactory: the drop-in factory.
func NewKubeSharedInformerFactory(client kubernetes.Interface, defaultResync time.Duration) informers.SharedInformerFactory {
	if Upstream() {
		return informers.NewSharedInformerFactory(client, defaultResync)
	}
	return fcache.NewSharedInformerFactory(client, defaultResync)
}
