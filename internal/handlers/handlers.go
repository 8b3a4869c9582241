// Package handlers delivers an informer's notifications to its event
// handlers: one goroutine and one unbounded queue per handler, so a slow
// handler delays only itself, with client-go's resync and initial-list
// semantics. It is FreshInformer's counterpart of client-go's
// sharedProcessor; the informer calls Distribute while it applies a change
// (under its apply lock), never a handler.
package handlers

import (
	"context"
	"fmt"
	"sync"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/cache/synctrack"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// MinimumResyncPeriod matches client-go's floor for handler resync periods.
const MinimumResyncPeriod = 1 * time.Second

// Kind says which handler method a Notification calls.
type Kind uint8

// The kinds of Notification.
const (
	Add Kind = iota
	Update
	Delete
)

// Notification is one call due to a handler. Kept as a value in the
// Listener's queue, so distributing an event allocates nothing.
type Notification struct {
	Kind           Kind
	InitialList    bool
	OldObj, NewObj any
}

// Listener delivers notifications to one handler, in order, on its own
// goroutine, so a slow handler delays only itself. It is the
// ResourceEventHandlerRegistration handed back to the caller.
type Listener struct {
	handler toolscache.ResourceEventHandler
	logger  klog.Logger
	synced  *synctrack.SingleFileTracker // initial list delivered and informer synced

	requestedResync time.Duration // what the handler asked for (0: no resync)
	resync          time.Duration // what it gets, given the informer's check period
	nextResync      time.Time
	// resyncDue says whether resync notifications (and updates that did
	// not change the resource version) reach this handler. It starts
	// true, as client-go's does, and stays true while the informer does
	// no resyncs at all; shouldResync resets it on each resync check.
	resyncDue bool // Processor.mu guards the four fields above

	mu      sync.Mutex     // guards the fields below; a leaf, taken under Processor.mu
	pending []Notification // appended by distribute
	spare   []Notification // the previous batch's array, reused
	wake    chan struct{}  // a token when pending became non-empty
	stop    chan struct{}  // closed to end run
	done    chan struct{}  // closed when run has returned
	stopped bool
}

// NewListener returns a listener for handler with the resync period it
// requested and the one it gets (EffectiveResync), starting at now.
func NewListener(logger klog.Logger, handler toolscache.ResourceEventHandler, requested, resync time.Duration, now time.Time) *Listener {
	l := &Listener{
		handler:         handler,
		logger:          logger,
		synced:          synctrack.NewSingleFileTracker(fmt.Sprintf("%T", handler)),
		requestedResync: requested,
		resyncDue:       true,
		wake:            make(chan struct{}, 1),
		stop:            make(chan struct{}),
		done:            make(chan struct{}),
	}
	l.setResync(resync, now)
	return l
}

// HasSynced reports whether the informer has synced and this handler has
// been handed every object of the initial list.
func (l *Listener) HasSynced() bool { return l.synced.HasSynced() }

// HasSyncedChecker is HasSynced as a toolscache.DoneChecker.
func (l *Listener) HasSyncedChecker() toolscache.DoneChecker { return l.synced }

// ShutdownChan is closed once the handler will be called no more: after
// RemoveEventHandler, when its last call has returned (at once for a
// handler that never ran), or when the informer stops. client-go's
// toolscache.ShutDownEventHandler waits on it.
func (l *Listener) ShutdownChan() <-chan struct{} { return l.done }

func (l *Listener) setResync(resync time.Duration, now time.Time) {
	l.resync = resync
	l.nextResync = now.Add(resync)
}

// Add queues n for the handler; it never blocks.
func (l *Listener) Add(n Notification) {
	if n.Kind == Add && n.InitialList {
		l.synced.Start()
	}
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	l.pending = append(l.pending, n)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default: // a token is already there
	}
}

// run delivers notifications until stopped. Notifications still queued at
// stop are dropped, as client-go's informer does. A handler that panics
// is reported through utilruntime (which crashes the process unless
// utilruntime.ReallyCrash is off); otherwise that Notification is skipped
// and, as client-go does, the next comes a second later.
func (l *Listener) run() {
	defer close(l.done)
	crashed := false
	for {
		select {
		case <-l.stop:
			return
		case <-l.wake:
		}
		for {
			l.mu.Lock()
			batch := l.pending
			if len(batch) == 0 { // keep both buffers for the next round
				l.mu.Unlock()
				break
			}
			l.pending, l.spare = l.spare[:0], nil
			l.mu.Unlock()
			for i := range batch {
				if crashed && !l.pause(crashAfterPause) {
					return
				}
				select {
				case <-l.stop:
					return
				default:
				}
				crashed = l.deliver(batch[i])
				batch[i] = Notification{} // let the objects go
			}
			l.mu.Lock()
			l.spare = batch[:0]
			l.mu.Unlock()
		}
	}
}

// crashAfterPause is how long a Listener waits after its handler panicked
// before the next Notification, as client-go's does: a handler that
// panics on every call does not spin.
const crashAfterPause = time.Second

// pause waits d unless the Listener is stopped first; it reports whether
// the Listener may go on.
func (l *Listener) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.stop:
		return false
	case <-t.C:
		return true
	}
}

// deliver calls the handler for n and reports whether it panicked (only
// seen when utilruntime.HandleCrash does not re-panic).
func (l *Listener) deliver(n Notification) (panicked bool) {
	panicked = true
	defer utilruntime.HandleCrashWithLogger(l.logger)
	switch n.Kind {
	case Add:
		if n.InitialList { // counted even if OnAdd panics: the handler can still sync
			defer l.synced.Finished()
		}
		l.handler.OnAdd(n.NewObj, n.InitialList)
	case Update:
		l.handler.OnUpdate(n.OldObj, n.NewObj)
	case Delete:
		l.handler.OnDelete(n.OldObj)
	}
	return false
}

// shutdown stops run and drops what is queued. Idempotent.
func (l *Listener) shutdown() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.stopped = true
		l.pending = nil
		close(l.stop)
	}
}

// Processor fans notifications out to listeners.
type Processor struct {
	Clock clock.Clock // the informer's: resyncs are due and checked on it

	mu        sync.RWMutex // guards listeners and running; taken under applyMu, before Listener.mu
	listeners []*Listener
	running   bool
	wg        sync.WaitGroup
}

// AddListener registers l; it starts at once if the processor runs.
func (p *Processor) AddListener(l *Listener) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.listeners = append(p.listeners, l)
	if p.running {
		p.wg.Go(l.run)
	}
}

// RemoveListener unregisters l and stops it, dropping what it has queued;
// it reports whether l was registered.
func (p *Processor) RemoveListener(l *Listener) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.listeners {
		if x == l {
			p.listeners = append(p.listeners[:i], p.listeners[i+1:]...)
			l.shutdown()
			if !p.running { // its run never started and never will
				close(l.done)
			}
			return true
		}
	}
	return false
}

// Distribute queues n for every Listener, or, for a resync (sync), for the
// listeners whose resync is due.
func (p *Processor) Distribute(n Notification, sync bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, l := range p.listeners {
		if !sync || l.resyncDue {
			l.Add(n)
		}
	}
}

// UpstreamSynced tells every Listener that the informer has synced.
func (p *Processor) UpstreamSynced() {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, l := range p.listeners {
		l.synced.UpstreamHasSynced()
	}
}

// Run starts the listeners' goroutines, and stops them all (waiting for
// them) when stop is closed.
func (p *Processor) Run(stop <-chan struct{}) {
	p.mu.Lock()
	p.running = true
	for _, l := range p.listeners {
		p.wg.Go(l.run)
	}
	p.mu.Unlock()

	<-stop

	p.mu.Lock()
	p.running = false
	for _, l := range p.listeners {
		l.shutdown()
	}
	p.listeners = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// ShouldResync marks the listeners whose resync period has passed and
// reports whether any has.
func (p *Processor) ShouldResync() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.Clock.Now()
	due := false
	for _, l := range p.listeners {
		l.resyncDue = l.resync != 0 && !now.Before(l.nextResync)
		if l.resyncDue {
			due = true
			l.nextResync = now.Add(l.resync)
		}
	}
	return due
}

// RunResyncs checks every period, on the Processor's clock, whether a
// handler is due for a resync, and if one is, calls resync (the informer
// queues a resync of every cached object, delivered as updates to the
// handlers that are due), until ctx ends.
func (p *Processor) RunResyncs(ctx context.Context, period time.Duration, resync func() error, logger klog.Logger) {
	t := p.Clock.NewTimer(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if p.ShouldResync() {
			if err := resync(); err != nil {
				logger.Error(err, "Failed to queue a resync")
			}
		}
		t.Reset(period)
	}
}

// ResyncCheckPeriodChanged re-derives every Listener's resync period.
func (p *Processor) ResyncCheckPeriodChanged(logger klog.Logger, check time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.Clock.Now()
	for _, l := range p.listeners {
		l.setResync(EffectiveResync(logger, l.requestedResync, check), now)
	}
}

// EffectiveResync is a handler's resync period given the informer's check
// period: never below it, zero when either is zero.
func EffectiveResync(logger klog.Logger, requested, check time.Duration) time.Duration {
	switch {
	case requested == 0:
		return 0
	case check == 0:
		logger.Info("Warning: resync period requested but the informer does not resync; the handler will get none", "requested", requested)
		return 0
	case requested < check:
		logger.Info("Warning: resync period is smaller than the informer's resync check period; using the check period", "requested", requested, "check", check)
		return check
	}
	return requested
}

// UpstreamHasSynced tells the listener that the informer has synced: once
// it has also handled its initial list, its HasSynced turns true.
func (l *Listener) UpstreamHasSynced() { l.synced.UpstreamHasSynced() }

// Pending returns how many notifications wait in the listener's queue.
func (l *Listener) Pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending)
}

// Listeners returns the registered listeners, in registration order.
func (p *Processor) Listeners() []*Listener {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return append([]*Listener(nil), p.listeners...)
}
