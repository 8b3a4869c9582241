package cache

import (
	"fmt"
	"sync"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/cache/synctrack"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// minimumResyncPeriod matches client-go's floor for handler resync periods.
const minimumResyncPeriod = 1 * time.Second

type notificationKind uint8

const (
	addNotification notificationKind = iota
	updateNotification
	deleteNotification
	// barrierNotification holds a listener until its channel (newObj) is
	// closed: the notifications behind it wait for a regression found
	// while applying them to be declared.
	barrierNotification
)

// notification is one call due to a handler. Kept as a value in the
// listener's queue, so distributing an event allocates nothing.
type notification struct {
	kind           notificationKind
	initialList    bool
	oldObj, newObj any
}

// listener delivers notifications to one handler, in order, on its own
// goroutine, so a slow handler delays only itself. It is the
// ResourceEventHandlerRegistration handed back to the caller.
type listener struct {
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
	resyncDue bool // processor.mu guards the four fields above

	mu      sync.Mutex     // guards the fields below; a leaf, taken under processor.mu
	pending []notification // appended by distribute
	spare   []notification // the previous batch's array, reused
	wake    chan struct{}  // a token when pending became non-empty
	stop    chan struct{}  // closed to end run
	done    chan struct{}  // closed when run has returned
	stopped bool
}

func newListener(logger klog.Logger, handler toolscache.ResourceEventHandler, requested, resync time.Duration, now time.Time) *listener {
	l := &listener{
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
func (l *listener) HasSynced() bool { return l.synced.HasSynced() }

// HasSyncedChecker is HasSynced as a toolscache.DoneChecker.
func (l *listener) HasSyncedChecker() toolscache.DoneChecker { return l.synced }

// ShutdownChan is closed once the handler will be called no more: after
// RemoveEventHandler, when its last call has returned (at once for a
// handler that never ran), or when the informer stops. client-go's
// toolscache.ShutDownEventHandler waits on it.
func (l *listener) ShutdownChan() <-chan struct{} { return l.done }

func (l *listener) setResync(resync time.Duration, now time.Time) {
	l.resync = resync
	l.nextResync = now.Add(resync)
}

func (l *listener) add(n notification) {
	if n.kind == addNotification && n.initialList {
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
// utilruntime.ReallyCrash is off); otherwise that notification is skipped
// and, as client-go does, the next comes a second later.
func (l *listener) run() {
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
				batch[i] = notification{} // let the objects go
			}
			l.mu.Lock()
			l.spare = batch[:0]
			l.mu.Unlock()
		}
	}
}

// crashAfterPause is how long a listener waits after its handler panicked
// before the next notification, as client-go's does: a handler that
// panics on every call does not spin.
const crashAfterPause = time.Second

// pause waits d unless the listener is stopped first; it reports whether
// the listener may go on.
func (l *listener) pause(d time.Duration) bool {
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
func (l *listener) deliver(n notification) (panicked bool) {
	panicked = true
	defer utilruntime.HandleCrashWithLogger(l.logger)
	switch n.kind {
	case addNotification:
		if n.initialList { // counted even if OnAdd panics: the handler can still sync
			defer l.synced.Finished()
		}
		l.handler.OnAdd(n.newObj, n.initialList)
	case updateNotification:
		l.handler.OnUpdate(n.oldObj, n.newObj)
	case deleteNotification:
		l.handler.OnDelete(n.oldObj)
	case barrierNotification:
		select {
		case <-n.newObj.(chan struct{}):
		case <-l.stop:
		}
	}
	return false
}

// shutdown stops run and drops what is queued. Idempotent.
func (l *listener) shutdown() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.stopped = true
		l.pending = nil
		close(l.stop)
	}
}

// processor fans notifications out to listeners.
type processor struct {
	clock clock.PassiveClock

	mu        sync.RWMutex // guards listeners and running; taken under applyMu, before listener.mu
	listeners []*listener
	running   bool
	wg        sync.WaitGroup
}

func (p *processor) addListener(l *listener) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.listeners = append(p.listeners, l)
	if p.running {
		p.wg.Go(l.run)
	}
}

func (p *processor) removeListener(l *listener) bool {
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

// distribute queues n for every listener, or, for a resync (sync), for the
// listeners whose resync is due.
func (p *processor) distribute(n notification, sync bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, l := range p.listeners {
		if !sync || l.resyncDue {
			l.add(n)
		}
	}
}

// upstreamSynced tells every listener that the informer has synced.
func (p *processor) upstreamSynced() {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, l := range p.listeners {
		l.synced.UpstreamHasSynced()
	}
}

// run starts the listeners' goroutines, and stops them all (waiting for
// them) when stop is closed.
func (p *processor) run(stop <-chan struct{}) {
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

// shouldResync marks the listeners whose resync period has passed and
// reports whether any has.
func (p *processor) shouldResync() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
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

// resyncCheckPeriodChanged re-derives every listener's resync period.
func (p *processor) resyncCheckPeriodChanged(logger klog.Logger, check time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	for _, l := range p.listeners {
		l.setResync(effectiveResync(logger, l.requestedResync, check), now)
	}
}

// effectiveResync is a handler's resync period given the informer's check
// period: never below it, zero when either is zero.
func effectiveResync(logger klog.Logger, requested, check time.Duration) time.Duration {
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
