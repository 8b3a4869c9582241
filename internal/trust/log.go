package trust

import (
	"errors"

	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/freshness"
)

// LogPlain logs the switch to plain mode (List or Stream evidence that
// cannot be ordered), a FreshInformer's or a wrapped informer's. Objects
// without any resource version come from client-go's fake clientsets, not
// from a server: that is expected in unit tests, so it is logged at V(2),
// not as an error (package freshtest makes the fakes stamp resource
// versions).
func LogPlain(logger klog.Logger, err error) {
	var ie *freshness.IncomparableError
	if errors.As(err, &ie) && ie.ResourceVersion == "" {
		logger.V(2).Info("Objects carry no resource version (a fake clientset?); working as a plain informer, WaitForFreshness will fail with ErrIncomparable")
		return
	}
	logger.Error(err, "Resource versions cannot be ordered; working as a plain informer, WaitForFreshness will fail with ErrIncomparable")
}
