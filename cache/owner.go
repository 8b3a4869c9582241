package cache

import (
	"context"
	"fmt"

	"github.com/freshinformer/freshinformer/freshness"
)

// guardOwner is what the informer is to its Guard (guard.Owner): the
// Guard submits its evidence to the trust state itself; the prover decides
// how the stream resumes after a failed request (relist, or the restore
// check first), and checks the server once an ended stream resumed.
type guardOwner struct{ f *FreshInformer }

func (o guardOwner) Resuming(ctx context.Context) (relist bool) { return o.f.prover.Resuming(ctx) }
func (o guardOwner) Resumed()                                   { o.f.prover.Resumed() }

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
