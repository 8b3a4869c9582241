package trust

import (
	"context"
	"errors"

	"github.com/freshinformer/freshinformer/freshness"
)

// The outcomes of a wait, as metrics name them (cache.WaitOutcome's
// values).
const (
	OutcomeFresh        = "fresh"        // the cache reached the target
	OutcomeTimeout      = "timeout"      // the context's deadline passed
	OutcomeCanceled     = "canceled"     // the context was cancelled
	OutcomeStopped      = "stopped"      // the informer stopped, or never started
	OutcomeIncomparable = "incomparable" // the target or the stream cannot be ordered
	OutcomeTooLarge     = "too_large"    // a consistent read showed the server behind the target
)

// Outcome classifies a wait's result (Wait's, or a check's).
func Outcome(err error) string {
	switch {
	case err == nil:
		return OutcomeFresh
	case errors.Is(err, freshness.ErrIncomparable):
		return OutcomeIncomparable
	case errors.Is(err, freshness.ErrStopped), errors.Is(err, freshness.ErrNotStarted):
		return OutcomeStopped
	case errors.Is(err, freshness.ErrTooLargeResourceVersion):
		return OutcomeTooLarge
	case errors.Is(err, context.DeadlineExceeded):
		return OutcomeTimeout
	}
	return OutcomeCanceled
}
