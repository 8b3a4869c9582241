package cache

import (
	"context"
	"fmt"

	"github.com/freshinformer/freshinformer/freshness"
)

// guardOwner is what the informer is to its Guard (guard.Owner): the
// Guard submits its evidence to the informer's trust state itself
// (guard.Options.Trust), and asks the informer only how a broken stream
// resumes.
type guardOwner struct{ f *FreshInformer }

// Resuming decides how the stream resumes after it broke: the informer's
// prover relists a small informer and runs the restore check for a large
// one (prove.Prover.Resuming). The Reflector waits for either.
func (o guardOwner) Resuming(ctx context.Context) (relist bool) { return o.f.prover.Resuming(ctx) }

// parseInitialFloor validates Options.InitialFloor ("" for none).
func parseInitialFloor(s string) (freshness.RV, error) {
	if s == "" {
		return freshness.RV{}, nil
	}
	rv, err := freshness.ParseRV(s)
	if err != nil {
		return freshness.RV{}, fmt.Errorf("initial floor: %w", err)
	}
	return rv, nil
}
