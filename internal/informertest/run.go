// Package informertest helps the tests of the packages that run informers.
package informertest

import (
	"context"
	"testing"
	"time"
)

// Runner is an informer as the tests run it.
type Runner interface{ RunWithContext(context.Context) }

// Run starts inf until the test ends and returns a function that stops it
// and waits until RunWithContext has returned (failing the test if it does
// not within 30 s). The function may be called more than once.
func Run(t testing.TB, inf Runner) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.RunWithContext(ctx)
	}()
	stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("informer did not stop")
		}
	}
	t.Cleanup(stop)
	return stop
}
