package factory_test

import (
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"
)

// TestMain checks that no test leaves a goroutine behind: a factory's
// informers stop with the context given to Start, and Shutdown waits for
// them.
func TestMain(m *testing.M) {
	// The informers log refused lists and regressions at error level.
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m)
}
