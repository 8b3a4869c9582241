package stalereads_test

import (
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"
)

func TestMain(m *testing.M) {
	// The detector logs its reports at error level; the tests provoke
	// them on purpose.
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m)
}
