package guard

import (
	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
)

// Queue is client-go's RealFIFO with the Guard's checks on Replace (the one
// call through which a list, plain or watch-list, reaches the cache) and on
// watch events and bookmarks (their resource versions raise the floor).
type Queue struct {
	*toolscache.RealFIFO
	guard *Guard
}

// NewQueue returns a Queue over a RealFIFO made with opts, forcing atomic
// events and bookmark deltas on: the informer then sees every list as one
// ReplacedAll and every bookmark in stream order, whatever client-go's
// AtomicFIFO feature gate says.
func (g *Guard) NewQueue(opts toolscache.RealFIFOOptions) *Queue {
	opts.AtomicEvents = true
	opts.EmitDeltaTypeBookmark = true
	opts.KnownObjects = nil // atomic events keep no known-objects view
	q := &Queue{RealFIFO: toolscache.NewRealFIFOWithOptions(opts), guard: g}
	g.mu.Lock()
	g.queue = q
	g.mu.Unlock()
	return q
}

// Replace refuses a list older than the floor (the Reflector backs off and
// relists) and otherwise queues it. When it refuses a watch-list's initial
// events it stops that watch: client-go's Reflector falls back to a plain
// list without stopping it.
func (q *Queue) Replace(list []interface{}, resourceVersion string) error {
	g := q.guard
	g.mu.Lock()
	g.relisting = false
	w := g.pendingWatch
	g.pendingWatch = nil
	consistent := g.listConsistent
	fallback := g.fallback && w == nil
	g.fallback = false
	g.mu.Unlock()
	undo, err := g.admitList(resourceVersion, consistent, fallback)
	if err != nil {
		if w != nil {
			w.stopByGuard()
			g.watchesStopped.Add(1)
			g.mu.Lock()
			g.fallback = true
			g.mu.Unlock()
		}
		return err
	}
	queued := false
	defer func() {
		if !queued { // an error, or a panicking transform client-go recovers from
			undo()
		}
	}()
	if err := q.RealFIFO.Replace(list, resourceVersion); err != nil {
		return err
	}
	queued = true
	return nil
}

// Add queues a watch event's object unless its resource version is
// malformed or implausible (see Plausible) in a comparable stream.
func (q *Queue) Add(obj any) error { return q.event(obj, q.RealFIFO.Add) }

// Update is Add for a modified object.
func (q *Queue) Update(obj any) error { return q.event(obj, q.RealFIFO.Update) }

// Delete is Add for a deleted object.
func (q *Queue) Delete(obj any) error { return q.event(obj, q.RealFIFO.Delete) }

func (q *Queue) event(obj any, queue func(any) error) error {
	if !q.guard.admitEvent(resourceVersionOf(obj), "event") {
		return nil
	}
	return queue(obj)
}

// Bookmark queues a bookmark unless its resource version is malformed or
// implausible in a comparable stream.
func (q *Queue) Bookmark(resourceVersion string) error {
	if !q.guard.admitEvent(resourceVersion, "bookmark") {
		return nil
	}
	return q.RealFIFO.Bookmark(resourceVersion)
}

func resourceVersionOf(obj interface{}) string {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if m, err := meta.Accessor(obj); err == nil {
		return m.GetResourceVersion()
	}
	return ""
}
