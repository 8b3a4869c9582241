package freshctrl

import (
	"testing"

	"go.uber.org/goleak"
)

// ignoredGoroutines are not leaks: controller-runtime's multi-namespace
// informer waits, in a goroutine of its own, for its informers to sync;
// the scope tests make informers they never start, and an informer
// removed or stopped before it synced never does.
var ignoredGoroutines = []goleak.Option{
	goleak.IgnoreTopFunction("sigs.k8s.io/controller-runtime/pkg/cache.newMultiNamespaceInformer.func1"),
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, ignoredGoroutines...)
}
