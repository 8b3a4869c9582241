package cache

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/freshinformer/freshinformer/freshness"
)

// withStartGrace shortens the grace a wait gives an informer whose Run has
// not begun, so that these tests need not wait out the default.
func withStartGrace(d time.Duration) Option {
	return func(o *Options) { o.internal.startGrace = d }
}

// client-go's idiom, `go inf.RunWithContext(ctx)` followed at once by
// waits from other goroutines, never fails with ErrNotStarted: the Run
// goroutine may not have been scheduled yet, and the waits give it time.
func TestWaitRightAfterGoRunNeverFindsItNotStarted(t *testing.T) {
	const iterations, waiters = 50, 4
	for i := range iterations {
		inf := NewSharedIndexInformer(newQuietLW(t, "10"), &corev1.ConfigMap{}, 0, nil, scriptOptions()...)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); inf.RunWithContext(ctx) }()
		var wg sync.WaitGroup
		errs := make(chan error, waiters+2)
		for range waiters {
			wg.Go(func() {
				wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer wcancel()
				errs <- inf.WaitForFreshness(wctx, "10")
			})
		}
		wg.Go(func() {
			fired := make(chan error, 1)
			inf.AfterFreshness("10", func(err error) { fired <- err })
			errs <- <-fired
		})
		wg.Go(func() {
			if err := inf.CheckFreshness("10"); errors.Is(err, freshness.ErrNotStarted) {
				errs <- err
			}
		})
		wg.Wait()
		cancel()
		<-done
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("iteration %d: a wait right after go Run: %v", i, err)
			}
		}
	}
}

// An informer that is really never run fails a wait with ErrNotStarted
// once the grace has passed, not before, and not much after.
func TestWaitOnAnInformerNeverStartedFailsAfterTheGrace(t *testing.T) {
	for _, grace := range []time.Duration{0, 200 * time.Millisecond} { // 0: the default
		inf := NewSharedIndexInformer(newQuietLW(t, "10"), &corev1.ConfigMap{}, 0, nil, withStartGrace(grace))
		want := grace
		if grace == 0 {
			want = defaultStartGrace
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		err := inf.WaitForFreshness(ctx, "10")
		took := time.Since(start)
		cancel()
		var we *freshness.WaitError
		if !errors.Is(err, freshness.ErrNotStarted) || !errors.As(err, &we) || we.Target != "10" {
			t.Fatalf("WaitForFreshness on an informer never started = %v, want a WaitError matching ErrNotStarted", err)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WaitForFreshness on an informer never started = %v: its context did not end", err)
		}
		if took < want || took > want+time.Second {
			t.Fatalf("WaitForFreshness on an informer never started failed after %v, want the grace %v (and at most 1s more)", took, want)
		}
	}
}

// A wait whose context ends during the grace says both: its context's
// error and that the informer has not started.
func TestWaitWhoseContextEndsBeforeTheStartSaysBoth(t *testing.T) {
	inf := NewSharedIndexInformer(newQuietLW(t, "10"), &corev1.ConfigMap{}, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := inf.WaitForFreshness(ctx, "10")
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, freshness.ErrNotStarted) {
		t.Fatalf("WaitForFreshness whose context ends before the informer starts = %v, want both DeadlineExceeded and ErrNotStarted", err)
	}
	if took := time.Since(start); took > defaultStartGrace {
		t.Fatalf("it returned after %v, not when its context ended", took)
	}
	cancelled, cancelNow := context.WithCancel(context.Background())
	cancelNow()
	if err := inf.WaitForFreshness(cancelled, "10"); !errors.Is(err, context.Canceled) || !errors.Is(err, freshness.ErrNotStarted) {
		t.Fatalf("WaitForFreshness with a cancelled context before the start = %v", err)
	}
}

// Run beginning during the grace: the wait, and a callback registered
// before it, go on as on a running informer.
func TestRunStartingDuringTheGraceReleasesTheWait(t *testing.T) {
	inf := NewSharedIndexInformer(newQuietLW(t, "10"), &corev1.ConfigMap{}, 0, nil, scriptOptions()...)
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		errc <- inf.WaitForFreshness(ctx, "10")
	}()
	fired := make(chan error, 1)
	inf.AfterFreshness("10", func(err error) { fired <- err })
	if err := inf.CheckFreshness("10"); !errors.Is(err, freshness.ErrNotFresh) || errors.Is(err, freshness.ErrNotStarted) {
		t.Fatalf("CheckFreshness during the grace = %v, want ErrNotFresh", err)
	}
	time.Sleep(defaultStartGrace / 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); inf.RunWithContext(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := <-errc; err != nil {
		t.Fatalf("a wait begun before Run, which began during the grace: %v", err)
	}
	if err := <-fired; err != nil {
		t.Fatalf("a callback registered before Run, which began during the grace: %v", err)
	}
}

// AfterFreshness and CheckFreshness on an informer never started: the
// callback is told ErrNotStarted after the grace; a check says
// ErrNotFresh until the grace has passed since the informer was first
// found not started, then ErrNotStarted whatever the resource version.
func TestCallbacksAndChecksOnAnInformerNeverStarted(t *testing.T) {
	const grace = 200 * time.Millisecond
	inf := NewSharedIndexInformer(newQuietLW(t, "10"), &corev1.ConfigMap{}, 0, nil, withStartGrace(grace))
	start := time.Now()
	if err := inf.CheckFreshness("10"); !errors.Is(err, freshness.ErrNotFresh) || errors.Is(err, freshness.ErrNotStarted) {
		t.Fatalf("CheckFreshness right after the informer was made = %v, want ErrNotFresh", err)
	}
	fired := make(chan error, 1)
	inf.AfterFreshness("10", func(err error) { fired <- err })
	select {
	case err := <-fired:
		if took := time.Since(start); !errors.Is(err, freshness.ErrNotStarted) || took < grace || took > grace+time.Second {
			t.Fatalf("AfterFreshness on an informer never started called back with %v after %v", err, took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("AfterFreshness on an informer never started never called back")
	}
	time.Sleep(time.Until(start.Add(grace)))
	if err := inf.CheckFreshness("not-a-number"); !errors.Is(err, freshness.ErrNotStarted) {
		t.Fatalf("CheckFreshness once the grace has passed = %v, want ErrNotStarted whatever the resource version", err)
	}
	inf.starting() // a factory's Start about to run it
	if err := inf.CheckFreshness("10"); !errors.Is(err, freshness.ErrNotFresh) || errors.Is(err, freshness.ErrNotStarted) {
		t.Fatalf("CheckFreshness on an informer being started = %v, want ErrNotFresh", err)
	}
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := inf.WaitForFreshness(short, "10"); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, freshness.ErrNotStarted) {
		t.Fatalf("WaitForFreshness on an informer being started = %v, want it to wait", err)
	}
}
