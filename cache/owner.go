package cache

import (
	"context"
	"fmt"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/guard"
	"github.com/freshinformer/freshinformer/internal/trust"
)

// guardOwner is what the informer is to its Guard (guard.Owner).
type guardOwner struct{ f *FreshInformer }

func (o guardOwner) Floor() (proven freshness.RV, relisting bool) {
	v := o.f.trust.View()
	return v.Proven, v.State == trust.Restoring
}

func (o guardOwner) Stamp() guard.Stamp {
	st := o.f.trust.View().Stamp
	return st
}

func (o guardOwner) Regressing() { o.f.trust.Regressed() }

func (o guardOwner) Broken() { o.f.trust.Failed().Run() }

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
