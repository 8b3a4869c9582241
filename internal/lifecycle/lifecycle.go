// Package lifecycle keeps what a FreshInformer's client-go surface needs
// of its run, as client-go's sharedIndexInformer does: whether it started
// or stopped, the settings taken only before Run (a transform, a watch
// error handler), its controller, its handlers' resync periods, and
// whether its initial list is applied. Handlers added while it runs join
// under the informer's apply lock, with the cached objects as their
// initial list.
package lifecycle

import (
	"errors"
	"fmt"
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/freshinformer/freshinformer/internal/handlers"
)

// State is one informer's run state.
type State struct {
	mu                sync.Mutex // guards the fields below; taken before the informer's apply lock
	running, stopped  bool
	controller        toolscache.Controller
	transform         toolscache.TransformFunc
	watchErrorHandler toolscache.WatchErrorHandlerWithContext
	resyncCheckPeriod time.Duration
	defaultResync     time.Duration
	synced            chan struct{} // closed once the initial list is applied
}

// New returns the state of an informer not started, whose handlers resync
// every resync (0: never) unless they ask otherwise.
func New(resync time.Duration) *State {
	return &State{resyncCheckPeriod: resync, defaultResync: resync, synced: make(chan struct{})}
}

// Begin marks the informer running and builds its controller with build,
// given the settings made before Run, with the state's lock held; it
// returns nil, building nothing, if the informer has run before.
func (s *State) Begin(build func(toolscache.TransformFunc, toolscache.WatchErrorHandlerWithContext) toolscache.Controller) toolscache.Controller {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running || s.stopped {
		return nil
	}
	s.running = true
	s.controller = build(s.transform, s.watchErrorHandler)
	return s.controller
}

// ResyncCheckPeriod is how often the informer checks its handlers for
// resyncs (0: never); it changes only before Run.
func (s *State) ResyncCheckPeriod() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resyncCheckPeriod
}

// DefaultResync is the resync period of handlers added without one.
func (s *State) DefaultResync() time.Duration { return s.defaultResync }

// Stop marks the informer stopped: it adds no handlers from then on.
func (s *State) Stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
}

// Stopped reports whether the informer has stopped.
func (s *State) Stopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

// Synced is closed once the initial list is applied (MarkSynced).
func (s *State) Synced() <-chan struct{} { return s.synced }

// MarkSynced records that the initial list is applied; the informer calls
// it once, under its apply lock.
func (s *State) MarkSynced() { close(s.synced) }

// HasSynced reports whether the initial list has been applied.
func (s *State) HasSynced() bool {
	select {
	case <-s.synced:
		return true
	default:
		return false
	}
}

// SyncedChecker is HasSynced as a toolscache.DoneChecker named name.
func (s *State) SyncedChecker(name string) toolscache.DoneChecker {
	return syncedChecker{name, s.synced}
}

type syncedChecker struct {
	name   string
	synced <-chan struct{}
}

func (c syncedChecker) Name() string { return c.name }

func (c syncedChecker) Done() <-chan struct{} { return c.synced }

// LastSyncResourceVersion is the resource version the controller's
// Reflector last received, "" before Run.
func (s *State) LastSyncResourceVersion() string {
	s.mu.Lock()
	c := s.controller
	s.mu.Unlock()
	if c == nil {
		return ""
	}
	return c.LastSyncResourceVersion()
}

// SetTransform sets the transform the controller's queue applies; before
// Run only.
func (s *State) SetTransform(t toolscache.TransformFunc) error {
	return s.beforeStart(func() { s.transform = t })
}

// SetWatchErrorHandler sets the controller's watch error handler; before
// Run only.
func (s *State) SetWatchErrorHandler(h toolscache.WatchErrorHandlerWithContext) error {
	return s.beforeStart(func() { s.watchErrorHandler = h })
}

// beforeStart applies a setting that the informer reads when it starts.
func (s *State) beforeStart(set func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return errors.New("informer has already started")
	}
	set()
	return nil
}

// AddHandler adds a handler to p, with the resync period options ask for
// (the default one otherwise). Added after the informer started, it joins
// under applyMu, the informer's apply lock: it first receives the objects
// cached lists as initial-list adds, and its registration's HasSynced
// turns true once it has handled them all.
func (s *State) AddHandler(p *handlers.Processor, handler toolscache.ResourceEventHandler, options toolscache.HandlerOptions, applyMu sync.Locker, cached func() []any) (*handlers.Listener, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, fmt.Errorf("handler %v was not added to shared informer because it has stopped already", handler)
	}
	logger := ptr.Deref(options.Logger, klog.Background())
	resync := ptr.Deref(options.ResyncPeriod, s.defaultResync)
	if resync > 0 && resync < handlers.MinimumResyncPeriod {
		logger.Info("Warning: resync period is too small; using the minimum", "resyncPeriod", resync, "minimum", handlers.MinimumResyncPeriod)
		resync = handlers.MinimumResyncPeriod
	}
	if resync > 0 && resync < s.resyncCheckPeriod && !s.running {
		s.resyncCheckPeriod = resync
		p.ResyncCheckPeriodChanged(logger, resync)
	}
	l := handlers.NewListener(logger, handler, resync, handlers.EffectiveResync(logger, resync, s.resyncCheckPeriod), p.Clock.Now())
	if !s.running {
		p.AddListener(l)
		return l, nil
	}

	applyMu.Lock()
	defer applyMu.Unlock()
	p.AddListener(l)
	for _, obj := range cached() {
		l.Add(handlers.Notification{Kind: handlers.Add, NewObj: obj, InitialList: true})
	}
	select {
	case <-s.synced: // synced before this handler joined: its initial list is queued
		l.UpstreamHasSynced()
	default: // the informer's sync will tell it
	}
	return l, nil
}
