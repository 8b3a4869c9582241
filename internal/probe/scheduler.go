package probe

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/freshinformer/freshinformer/freshness"
)

const (
	// MaxDelay caps the delay between probes while waits stay pending
	// for resource versions the server has not reached.
	MaxDelay = 5 * time.Second
	// BehindDelay is the delay after a probe found the server behind
	// every pending target: only a server response can name a committed
	// resource version, so such targets come from a restored etcd or are
	// made up, and probing for them often would only cost.
	BehindDelay = 30 * time.Second
	// StuckAfter is how long a target may go unreached by a stream that
	// keeps moving before the informer probes anyway: a stream delivers a
	// write within milliseconds, so a target it has not reached in a
	// second while busy with others may be beyond the server (another
	// cluster's resource version, a made-up one), which only a
	// consistent read can show.
	StuckAfter = time.Second
)

// Scheduler decides when an informer probes the server for its pending
// waits: a probe once waits have seen no progress on the informer's own
// stream for the delay, one at a time (through its Runner), backing off
// while waits stay pending. Nothing runs while no wait is pending: no
// goroutine, no timer. The zero Scheduler, with its functions set, is
// ready for Start.
type Scheduler struct {
	// Set before Start and not changed after. Delay is the base delay;
	// Applied the informer's applied resource version; Lowest the lowest
	// pending target (ok false: none); Busy reports that the stream is
	// about to move anyway (a relist on its way); Probe runs one probe and
	// reports whether the server was behind every pending target.
	Delay   func() time.Duration
	Applied func() freshness.RV
	Lowest  func() (rv freshness.RV, ok bool)
	Busy    func() bool
	Probe   func(ctx context.Context) (behind bool)

	// Mu, if set before the Scheduler is used, is the lock it shares with
	// its owner (an informer's prover); nil: its own. Its Runner takes the
	// same lock.
	Mu *sync.Mutex

	runner Runner // the probe in flight; it shares the Scheduler's lock
	probes atomic.Uint64
	// timers counts the armed timer's callback until it has returned or
	// the timer is stopped before firing: Stop waits for it, so no
	// callback outlives the informer.
	timers sync.WaitGroup

	own     sync.Mutex   // the lock when Mu is nil; it guards the fields below, taken before whatever the functions above take
	waiters int          // waits in their slow path
	timer   *time.Timer  // armed while waits are pending and no probe runs
	armedAt freshness.RV // the applied resource version when armed
	stopped bool
	idle    int // consecutive probes after which waits were still pending
	// slow is how long the informer's relist after a failed request took,
	// the least delay until slowUntil (see Recovered).
	slow      time.Duration
	slowUntil time.Time
	// high is the highest target joined since the last probe began;
	// sentinel is what high was when the stream last reached the
	// previous sentinel, at sentinelAt (see stuckLocked).
	high, sentinel freshness.RV
	sentinelAt     time.Time
	// probing: a probe runs, from fire until run has decided what follows
	// (the Runner's own flag clears a moment later: a wait that joins in
	// between arms the timer, or nothing would).
	probing bool
}

// Start lets the Scheduler run probes, with contexts derived from ctx.
func (s *Scheduler) Start(ctx context.Context) {
	s.runner.Mu = s.mu()
	s.runner.Start(ctx)
}

// mu is the Scheduler's lock, and its Runner's: Mu, or its own.
func (s *Scheduler) mu() *sync.Mutex {
	if s.Mu != nil {
		return s.Mu
	}
	return &s.own
}

// Probes counts the probes started.
func (s *Scheduler) Probes() uint64 { return s.probes.Load() }

// Running reports whether a probe is in flight.
func (s *Scheduler) Running() bool {
	s.mu().Lock()
	defer s.mu().Unlock()
	return s.runner.RunningLocked()
}

// Idle reports whether nothing is pending: no wait, no timer, no probe.
func (s *Scheduler) Idle() bool {
	s.mu().Lock()
	defer s.mu().Unlock()
	return s.waiters == 0 && s.timer == nil && !s.runner.RunningLocked()
}

// Recovered tells the Scheduler the informer applied a list sent at sent,
// after a request had failed: a server just back from an outage, still
// filling its caches, that took this long to answer the list is as slow
// to send the next events. For as long again (at most MaxDelay), a probe
// waits at least as long: sooner, it mostly asks what the stream is about
// to tell, and on the snapshot route lists as much as the relist did.
func (s *Scheduler) Recovered(sent time.Time) {
	now := time.Now()
	took := min(now.Sub(sent), MaxDelay)
	s.mu().Lock()
	defer s.mu().Unlock()
	s.slow, s.slowUntil = took, now.Add(took)
}

// delayLocked is the base delay, or a slow server's (see Recovered).
func (s *Scheduler) delayLocked() time.Duration {
	d := s.Delay()
	if d >= 0 && d < s.slow && time.Now().Before(s.slowUntil) {
		return s.slow
	}
	return d
}

// Join counts a wait for target, and arms the timer if none is armed. A
// wait for a lower target than any pending one ends the backoff: the
// pending ones may be out of the server's reach (a made-up or restored
// target), this one may well not be.
func (s *Scheduler) Join(target freshness.RV) {
	s.mu().Lock()
	defer s.mu().Unlock()
	s.waiters++
	if target.Compare(s.high) > 0 {
		s.high = target
	}
	if s.stopped {
		return
	}
	if s.idle > 0 { // backing off: is this the lowest target? (scanned only then)
		if lowest, ok := s.Lowest(); !ok || target.Compare(lowest) < 0 {
			s.idle = 0
			s.disarmLocked()
		}
	}
	if s.timer == nil && !s.probing {
		s.armLocked(s.delayLocked())
	}
}

// Leave ends a wait Join counted. With none left, the timer is stopped and
// the probe in flight ends.
func (s *Scheduler) Leave() {
	s.mu().Lock()
	defer s.mu().Unlock()
	s.waiters--
	if s.waiters > 0 {
		return
	}
	s.idle = 0
	s.high, s.sentinel = freshness.RV{}, freshness.RV{}
	s.disarmLocked()
	s.runner.CancelLocked()
}

// Stop ends probing for good and waits for a running probe, and for a
// timer's callback that fired before it, to return.
func (s *Scheduler) Stop() {
	s.mu().Lock()
	s.stopped = true
	s.disarmLocked()
	s.mu().Unlock()
	s.runner.Stop() // outside the lock: a run's end takes it
	s.timers.Wait()
}

func (s *Scheduler) armLocked(d time.Duration) {
	s.armedAt = s.Applied()
	s.timers.Add(1)
	s.timer = time.AfterFunc(d, s.fire) // real time: probes talk to a real server
}

func (s *Scheduler) disarmLocked() {
	if s.timer != nil && s.timer.Stop() {
		s.timers.Done() // it will not fire
	}
	s.timer = nil
}

// fire runs when the timer fires: it probes unless the stream moved
// meanwhile (the waits are being met by the stream: check again later).
func (s *Scheduler) fire() {
	defer s.timers.Done()
	s.mu().Lock()
	defer s.mu().Unlock()
	s.timer = nil
	if s.stopped || s.waiters == 0 || s.probing {
		return
	}
	applied := s.Applied()
	if s.Busy() || (applied.Compare(s.armedAt) > 0 && !s.stuckLocked(applied)) {
		s.armLocked(s.delayLocked())
		return
	}
	if !s.runner.RunLocked(s.run, false) {
		// Not started yet: the informer's first list will need a probe.
		s.rearmLocked(false)
		return
	}
	// The probe's read covers every target joined so far.
	s.high, s.sentinel = freshness.RV{}, freshness.RV{}
	s.probing = true
	s.probes.Add(1)
}

// stuckLocked reports whether a target has gone unreached for StuckAfter
// while the stream moved (it is at applied): the stream must reach the
// highest target joined when it reached the previous one (the sentinel)
// within StuckAfter. While it keeps doing so, waits are met by the stream
// and cost no request; a target beyond the server becomes the sentinel at
// the latest once the stream reaches the one before it, and fails a
// StuckAfter later.
func (s *Scheduler) stuckLocked(applied freshness.RV) bool {
	if applied.Compare(s.sentinel) < 0 {
		return time.Since(s.sentinelAt) >= StuckAfter
	}
	s.sentinel, s.sentinelAt = freshness.RV{}, time.Time{}
	if applied.Compare(s.high) < 0 {
		s.sentinel, s.sentinelAt = s.high, time.Now()
	}
	return false
}

// run is one probe run (the Runner's function).
func (s *Scheduler) run(ctx context.Context) {
	start := s.Applied()
	behind := s.Probe(ctx)
	progressed := s.Applied().Compare(start) > 0
	s.mu().Lock()
	defer s.mu().Unlock()
	s.probing = false
	if s.stopped || s.waiters == 0 {
		return
	}
	if progressed {
		s.idle = -1 // the probes are meeting waits: the next at the base delay
	}
	s.rearmLocked(behind)
}

// rearmLocked arms the next check while waits are still pending, backing
// off while they wait for resource versions the server has not reached.
func (s *Scheduler) rearmLocked(behind bool) {
	s.idle++
	d := min(s.delayLocked()<<min(s.idle, 6), MaxDelay)
	if behind {
		d = BehindDelay
	}
	s.armLocked(d)
}
