// Package probe holds an informer's requests off its own stream and the one
// "one probe in flight" mechanism they run through. The quiet-resource
// probe and the restore check (package prove) each run through a Runner,
// so that however many callers ask, at most one request series is in
// flight per informer, and stopping the informer ends it and waits for it.
// An informer's Scheduler and Runners share one lock (Mu), its prover's.
// The requests: ServerResourceVersion (a consistent read of the server's
// resource version), ObjectResourceVersion (the same of one object, for
// cache.FreshInformer.ServerResourceVersionOf) and AuxWatch (a watch whose
// bookmarks prove that the informer's stream holds no event up to a
// resource version). A Scheduler
// decides when the quiet-resource probe runs (while waits are pending and
// the stream makes no progress, backing off), and Reads keeps what
// consistent reads told of the server (the newest resource version, and
// the samples of the informer's Staleness bound).
package probe

import (
	"context"
	"sync"
)

// Runner runs a probe function at most once at a time, each run on a
// goroutine of its own and with a context that Cancel and Stop end. A
// Runner does nothing before Start and after Stop. The zero Runner is ready
// for Start.
type Runner struct {
	// OnStart, if set, is called when a run starts while none was in
	// flight, under the Runner's lock: it must be quick and must not call
	// the Runner. OnIdle is called once the last run of such a series has
	// returned, with the lock released, so that what it sets off (the
	// tracker's callbacks) may call the Runner. The restore check suspends
	// the informer's tracker in between: the calls balance, though the
	// next series' OnStart may come before the last one's OnIdle.
	OnStart, OnIdle func()
	// Mu, if set before Start, is the lock the Runner shares with its
	// owner (a Scheduler, an informer's prover): one lock for every probe
	// of an informer. Nil: the Runner's own.
	Mu *sync.Mutex

	own     sync.Mutex         // the lock when Mu is nil; it guards the fields below
	base    context.Context    // from Start; nil before it and after Stop
	running bool               // a run is in flight
	idle    chan struct{}      // closed when the series of runs in flight ends
	again   bool               // one more run follows the one in flight
	cancel  context.CancelFunc // ends the run in flight
	runs    uint64
	wg      sync.WaitGroup
}

// mu is the Runner's lock: Mu, or its own. It is taken before whatever
// OnStart takes.
func (r *Runner) mu() *sync.Mutex {
	if r.Mu != nil {
		return r.Mu
	}
	return &r.own
}

// Start lets the Runner run probes, with contexts derived from ctx.
func (r *Runner) Start(ctx context.Context) {
	r.mu().Lock()
	r.base = ctx
	r.mu().Unlock()
}

// Run starts probe and reports true, unless the Runner is not started or a
// run is in flight; then it reports false, and if again is true the run in
// flight is followed by one more (requests coalesce: at most one follows).
func (r *Runner) Run(probe func(context.Context), again bool) bool {
	r.mu().Lock()
	defer r.mu().Unlock()
	return r.RunLocked(probe, again)
}

// RunLocked is Run with the Runner's lock held (by the owner that shares
// it).
func (r *Runner) RunLocked(probe func(context.Context), again bool) bool {
	if r.base == nil {
		return false
	}
	if r.running {
		r.again = r.again || again
		return false
	}
	r.running = true
	r.idle = make(chan struct{})
	if r.OnStart != nil {
		r.OnStart()
	}
	r.wg.Go(func() { r.loop(probe) })
	return true
}

func (r *Runner) loop(probe func(context.Context)) {
	mu := r.mu()
	for {
		mu.Lock()
		if r.base == nil { // stopped
			r.endSeries()
			return
		}
		ctx, cancel := context.WithCancel(r.base)
		r.cancel = cancel
		r.runs++
		mu.Unlock()

		probe(ctx)
		cancel()

		mu.Lock()
		if !r.again {
			r.endSeries()
			return
		}
		r.again = false
		mu.Unlock()
	}
}

// endSeries ends a series of runs: the lock is held, and released before
// OnIdle is called.
func (r *Runner) endSeries() {
	r.running, r.again, r.cancel = false, false, nil
	idle := r.idle
	r.mu().Unlock()
	if r.OnIdle != nil {
		r.OnIdle()
	}
	close(idle) // after OnIdle: WaitIdle's callers see what it released
}

// Running reports whether a run is in flight.
func (r *Runner) Running() bool {
	r.mu().Lock()
	defer r.mu().Unlock()
	return r.running
}

// RunningLocked is Running with the Runner's lock held.
func (r *Runner) RunningLocked() bool { return r.running }

// WaitIdle waits until no run is in flight (the one in flight, and the one
// that was to follow it, have returned) or ctx ends.
func (r *Runner) WaitIdle(ctx context.Context) {
	r.mu().Lock()
	idle, running := r.idle, r.running
	r.mu().Unlock()
	if !running {
		return
	}
	select {
	case <-idle:
	case <-ctx.Done():
	}
}

// Runs counts the runs started.
func (r *Runner) Runs() uint64 {
	r.mu().Lock()
	defer r.mu().Unlock()
	return r.runs
}

// Cancel ends the run in flight, if any, and the one that was to follow.
func (r *Runner) Cancel() {
	r.mu().Lock()
	defer r.mu().Unlock()
	r.CancelLocked()
}

// CancelLocked is Cancel with the Runner's lock held.
func (r *Runner) CancelLocked() {
	r.again = false
	if r.cancel != nil {
		r.cancel()
	}
}

// Stop cancels the run in flight, waits for it to return and makes later
// Run calls do nothing. It must not be called from a probe, nor with the
// lock held.
func (r *Runner) Stop() {
	r.mu().Lock()
	r.base = nil
	r.CancelLocked()
	r.mu().Unlock()
	r.wg.Wait()
}
