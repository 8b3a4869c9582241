package factory

import (
	"context"
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
)

// informerSet is what both factories share: the informers by key (object
// type or resource), in the order they were made, which are started, and
// the goroutines running them. Entries are Is, except the plain informers
// of types a typed factory's clientset does not serve.
//
// mu guards every field but wg; it is never held while an informer runs
// or is waited for. Any goroutine may call any method.
type informerSet[K comparable, I Informer] struct {
	mu           sync.Mutex
	informers    map[K]toolscache.SharedIndexInformer
	order        []K // creation order: lookups by resource are deterministic
	started      map[K]bool
	shuttingDown bool
	wg           sync.WaitGroup // the goroutines running started informers
}

// getOrMake returns key's informer, made by build under the lock if there
// is none: the first call for a key decides, as in client-go's factories.
func (s *informerSet[K, I]) getOrMake(key K, build func() toolscache.SharedIndexInformer) toolscache.SharedIndexInformer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if inf, ok := s.informers[key]; ok {
		return inf
	}
	if s.informers == nil {
		s.informers, s.started = map[K]toolscache.SharedIndexInformer{}, map[K]bool{}
	}
	inf := build()
	s.informers[key] = inf
	s.order = append(s.order, key)
	return inf
}

// start runs every informer not running yet until ctx ends, unless the set
// is shutting down. starting (if set) is told of each I first, before Start
// returns: a wait right after Start finds it started.
func (s *informerSet[K, I]) start(ctx context.Context, starting func(I)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shuttingDown {
		return
	}
	for _, key := range s.order {
		if !s.started[key] {
			inf := s.informers[key]
			if i, ok := inf.(I); ok && starting != nil {
				starting(i)
			}
			s.wg.Go(func() { inf.RunWithContext(ctx) })
			s.started[key] = true
		}
	}
}

// shutdown makes later starts do nothing and waits for the running
// informers to stop.
func (s *informerSet[K, I]) shutdown() {
	s.mu.Lock()
	s.shuttingDown = true
	s.mu.Unlock()
	s.wg.Wait()
}

// startedInformers returns the informers that have been started.
func (s *informerSet[K, I]) startedInformers() map[K]toolscache.SharedIndexInformer {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[K]toolscache.SharedIndexInformer, len(s.started))
	for key := range s.started {
		out[key] = s.informers[key]
	}
	return out
}

// startedOne returns the started informer of key if it is an I.
func (s *informerSet[K, I]) startedOne(key K) (I, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started[key] {
		var zero I
		return zero, false
	}
	inf, ok := s.informers[key].(I)
	return inf, ok
}

// waitForCacheSync waits, without polling, for every started informer to
// sync, and says which did.
func (s *informerSet[K, I]) waitForCacheSync(ctx context.Context) (map[K]bool, error) {
	infs := s.startedInformers()
	checkers := make([]toolscache.DoneChecker, 0, len(infs))
	for _, inf := range infs {
		checkers = append(checkers, inf.HasSyncedChecker())
	}
	toolscache.WaitFor(ctx, "", checkers...)
	synced := make(map[K]bool, len(infs))
	var err error
	for key, inf := range infs {
		synced[key] = inf.HasSynced()
		if !synced[key] {
			err = context.Cause(ctx)
		}
	}
	return synced, err
}

// matching returns the set's Is that match accepts, in creation order.
func (s *informerSet[K, I]) matching(match func(I) bool) []I {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []I
	for _, key := range s.order {
		if inf, ok := s.informers[key].(I); ok && match(inf) {
			out = append(out, inf)
		}
	}
	return out
}

// startedMatching is matching over the informers hasStarted accepts (nil:
// those the set started).
func (s *informerSet[K, I]) startedMatching(hasStarted func(I) bool) []I {
	if hasStarted != nil {
		return s.matching(hasStarted)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []I
	for _, key := range s.order {
		if inf, ok := s.informers[key].(I); ok && s.started[key] {
			out = append(out, inf)
		}
	}
	return out
}
