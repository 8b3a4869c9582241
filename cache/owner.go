package cache

import (
	"context"
	"fmt"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/trust"
)

// guardOwner is what the informer is to its Guard (guard.Owner): the
// Guard submits its evidence to the informer's trust state itself
// (guard.Options.Trust), and asks the informer only how a broken stream
// resumes.
type guardOwner struct{ f *FreshInformer }

// Resuming decides how the stream resumes after it broke (a failed
// request, a stream ended early): the server may have restarted from a
// restored etcd, whose history the resumed watch would not show. An
// informer of up to the restore check's size relists (client-go's
// Reflector does too after an apiserver restart: the restarted watch
// cache has no history to resume from); a larger one runs the restore
// check (one consistent read of the first objects and the server's
// resource version) and resumes if it answers. The Reflector waits for
// either.
func (o guardOwner) Resuming(ctx context.Context) (relist bool) {
	f := o.f
	if !f.trust.View().Outage {
		return false
	}
	if n := f.restoreCheckKeys(); n == 0 || f.cachedKeys.Load() <= int64(n) {
		return true
	}
	f.resumeChecks.Add(1)
	st := f.trust.Stamp()
	due, _ := f.trust.Submit(trust.Check{}) // holds waits
	due.Run()
	defer func() {
		due, _ := f.trust.Submit(trust.Check{Done: true})
		due.Run()
	}()
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if !f.checkServer(ctx, st) {
		return true
	}
	due, _ = f.trust.Submit(trust.Read{Shows: trust.ReadAnswered, Stamp: st})
	due.Run()
	return false
}

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
