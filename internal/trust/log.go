package trust

import (
	"errors"

	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/freshness"
)

// FromFake is a cause of plain mode that only client-go's fake clientsets
// give, not a server: objects without any resource version, or writes
// sharing one (the fakes keep what the client set).
type FromFake struct{ Err error }

func (e FromFake) Error() string { return e.Err.Error() }
func (e FromFake) Unwrap() error { return e.Err }

// LogPlain logs the switch to plain mode (List or Stream evidence that
// cannot be ordered), a FreshInformer's or a wrapped informer's. A fake
// clientset's is expected in unit tests, so it is logged at V(2), not as
// an error (package freshtest makes the fakes stamp resource versions).
func LogPlain(logger klog.Logger, err error) {
	var ie *freshness.IncomparableError
	if errors.As(err, new(FromFake)) || errors.As(err, &ie) && ie.ResourceVersion == "" {
		logger.V(2).Info("Working as a plain informer (a fake clientset?), WaitForFreshness will fail with ErrIncomparable", "reason", err.Error())
		return
	}
	logger.Error(err, "Resource versions cannot be ordered; working as a plain informer, WaitForFreshness will fail with ErrIncomparable")
}
