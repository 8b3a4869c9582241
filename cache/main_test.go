package cache

import (
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"
)

func TestMain(m *testing.M) {
	// The informer logs refused lists and regressions at error level; the
	// tests provoke them on purpose.
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m)
}
