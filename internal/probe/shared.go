package probe

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/freshinformer/freshinformer/freshness"
)

// SharedReads coalesces the consistent reads of the server's resource
// version that informers of one cluster send to confirm a resumed watch:
// one read answers every informer of its resource that asked before it was
// sent. After an apiserver of several behind a load balancer shuts down,
// every watch it served ends at once; one read per resource then confirms
// them all, where one per informer would double a rollout's requests.
//
// Only informers of one resource share a read: a resource may be stored in
// an etcd of its own (kube-apiserver's --etcd-servers-overrides), whose
// revisions say nothing of the others'. The zero SharedReads is ready for
// use.
type SharedReads struct {
	// mu guards groups; nothing is called under it.
	mu     sync.Mutex
	groups map[schema.GroupResource]*ReadGroup
}

// For returns the ReadGroup of gr's informers (a new one, shared with
// nobody, for the empty GroupResource).
func (s *SharedReads) For(gr schema.GroupResource) *ReadGroup {
	if gr.Empty() {
		return new(ReadGroup)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groups == nil {
		s.groups = map[schema.GroupResource]*ReadGroup{}
	}
	g := s.groups[gr]
	if g == nil {
		g = new(ReadGroup)
		s.groups[gr] = g
	}
	return g
}

// ReadGroup runs one read at a time for the callers of Read, each given
// the answer of a read sent after it called. The zero ReadGroup is ready
// for use.
type ReadGroup struct {
	// mu guards the fields below; nothing is called under it.
	mu      sync.Mutex
	started uint64        // reads started
	running chan struct{} // closed when the read in flight ends; nil: none is
	waiting int           // callers waiting for it to end
	last    readResult    // the last read that ended
}

type readResult struct {
	n    uint64 // its place among the reads started
	rv   freshness.RV
	sent time.Time
	err  error
}

// Read returns what a read sent after the call answered (rv, and when it
// was sent, as read reports it): the one in flight if it started after the call, else the
// next, which the caller sends itself with read if nobody else has begun
// it. A read that failed because its sender's context ended is sent again.
func (g *ReadGroup) Read(ctx context.Context, read func(context.Context) (rv freshness.RV, sent time.Time, err error)) (freshness.RV, time.Time, error) {
	g.mu.Lock()
	want := g.started + 1 // the first read started from now on
	for {
		if r := g.last; r.n >= want && !(r.err != nil && ctx.Err() == nil && isContextErr(r.err)) {
			g.mu.Unlock()
			return r.rv, r.sent, r.err
		} else if r.n >= want {
			want = g.started + 1 // its sender stopped: ask again
		}
		if g.running == nil {
			g.started++
			r := readResult{n: g.started}
			done := make(chan struct{})
			g.running = done
			g.mu.Unlock()
			r.rv, r.sent, r.err = read(ctx)
			g.mu.Lock()
			g.last, g.running = r, nil
			close(done)
			continue
		}
		running := g.running
		g.waiting++
		g.mu.Unlock()
		var err error
		select {
		case <-running:
		case <-ctx.Done():
			err = ctx.Err()
		}
		g.mu.Lock()
		g.waiting--
		if err != nil {
			g.mu.Unlock()
			return freshness.RV{}, time.Time{}, err
		}
	}
}

// Waiting reports how many callers wait for the read in flight.
func (g *ReadGroup) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
