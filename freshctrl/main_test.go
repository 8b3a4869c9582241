package freshctrl

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// controller-runtime's multi-namespace informer waits, in a
		// goroutine of its own, for its informers to sync; the scope
		// tests make informers they never start.
		goleak.IgnoreTopFunction("sigs.k8s.io/controller-runtime/pkg/cache.newMultiNamespaceInformer.func1"))
}
