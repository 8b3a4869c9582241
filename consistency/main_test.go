package consistency_test

import (
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"
)

func TestMain(m *testing.M) {
	// The store logs a write lost by a restore at error level; a test
	// provokes it on purpose.
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m)
}
