package trust

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/freshinformer/freshinformer/freshness"
)

// Each way a wait ends has its outcome, wrapped errors included; a
// never-started wait whose context ended first is a stopped one.
func TestOutcome(t *testing.T) {
	for err, want := range map[error]string{
		nil: OutcomeFresh,
		fmt.Errorf("w: %w", freshness.ErrIncomparable):         OutcomeIncomparable,
		freshness.ErrStopped:                                   OutcomeStopped,
		errors.Join(context.Canceled, freshness.ErrNotStarted): OutcomeStopped,
		freshness.ErrTooLargeResourceVersion:                   OutcomeTooLarge,
		fmt.Errorf("w: %w", context.DeadlineExceeded):          OutcomeTimeout,
		context.Canceled:                                       OutcomeCanceled,
	} {
		if got := Outcome(err); got != want {
			t.Errorf("Outcome(%v) = %q, want %q", err, got, want)
		}
	}
}
