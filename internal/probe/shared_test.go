package probe

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/freshinformer/freshinformer/freshness"
)

// gatedReads is a read function whose reads the test lets answer one by
// one: the n-th read sent answers n.
type gatedReads struct {
	t       *testing.T
	mu      sync.Mutex
	sent    int
	started chan int      // each read's number, as it is sent
	release chan struct{} // one per read to answer
}

func newGatedReads(t *testing.T) *gatedReads {
	return &gatedReads{t: t, started: make(chan int, 100), release: make(chan struct{}, 100)}
}

func (r *gatedReads) read(ctx context.Context) (freshness.RV, time.Time, error) {
	r.mu.Lock()
	r.sent++
	n := r.sent
	r.mu.Unlock()
	r.started <- n
	select {
	case <-r.release:
	case <-ctx.Done():
		return freshness.RV{}, time.Time{}, ctx.Err()
	}
	return rv(r.t, uint64(n)), time.Now(), nil
}

func (r *gatedReads) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent
}

// Callers that ask while a read is in flight are answered by the next
// read, sent once that one ends, never by the one sent before they asked:
// a burst costs two reads, however many callers it has.
func TestReadGroupAnswersWithAReadSentAfterTheCall(t *testing.T) {
	var g ReadGroup
	reads := newGatedReads(t)
	first := make(chan freshness.RV, 1)
	go func() {
		rv, _, _ := g.Read(context.Background(), reads.read)
		first <- rv
	}()
	if n := <-reads.started; n != 1 {
		t.Fatalf("read %d sent first", n)
	}
	const callers = 20
	answers := make(chan freshness.RV, callers)
	for range callers {
		go func() {
			rv, _, err := g.Read(context.Background(), reads.read)
			if err != nil {
				t.Error(err)
			}
			answers <- rv
		}()
	}
	waitWaiting(t, &g, callers)
	reads.release <- struct{}{}
	if got := <-first; got.Compare(rv(t, 1)) != 0 {
		t.Fatalf("the first caller got %v, want read 1's answer", got)
	}
	if n := <-reads.started; n != 2 {
		t.Fatalf("read %d sent second", n)
	}
	reads.release <- struct{}{}
	for range callers {
		if got := <-answers; got.Compare(rv(t, 2)) != 0 {
			t.Fatalf("a caller that asked during read 1 got %v, want read 2's answer", got)
		}
	}
	if n := reads.count(); n != 2 {
		t.Fatalf("%d reads sent for %d callers, want 2", n, callers+1)
	}
}

// A read whose sender stopped (its context ended) answers nobody else:
// they send one of their own.
func TestReadGroupResendsAReadWhoseSenderStopped(t *testing.T) {
	var g ReadGroup
	reads := newGatedReads(t)
	ctx, cancel := context.WithCancel(context.Background())
	senderDone := make(chan error, 1)
	go func() {
		_, _, err := g.Read(ctx, reads.read)
		senderDone <- err
	}()
	<-reads.started
	other := make(chan error, 1)
	go func() {
		_, _, err := g.Read(context.Background(), reads.read)
		other <- err
	}()
	waitWaiting(t, &g, 1)
	cancel()
	if err := <-senderDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the stopped sender got %v, want context.Canceled", err)
	}
	if n := <-reads.started; n != 2 {
		t.Fatalf("read %d sent after the sender stopped", n)
	}
	reads.release <- struct{}{}
	if err := <-other; err != nil {
		t.Fatalf("the other caller got %v, want read 2's answer", err)
	}
}

// A caller whose own context ends stops waiting at once.
func TestReadGroupCallerStopsWaiting(t *testing.T) {
	var g ReadGroup
	reads := newGatedReads(t)
	go func() { _, _, _ = g.Read(context.Background(), reads.read) }()
	<-reads.started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := g.Read(ctx, reads.read); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	reads.release <- struct{}{}
}

// Informers of one resource share a group; of another resource, or with
// no resource named, they do not.
func TestSharedReadsGroupsByResource(t *testing.T) {
	var s SharedReads
	cms := schema.GroupResource{Resource: "configmaps"}
	if s.For(cms) != s.For(cms) {
		t.Fatal("two informers of configmaps do not share a group")
	}
	if s.For(cms) == s.For(schema.GroupResource{Resource: "secrets"}) {
		t.Fatal("configmaps and secrets share a group")
	}
	if s.For(schema.GroupResource{}) == s.For(schema.GroupResource{}) {
		t.Fatal("informers of unknown resources share a group")
	}
}

// waitWaiting returns once n callers wait for g's read in flight.
func waitWaiting(t *testing.T, g *ReadGroup, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if g.Waiting() == n {
			return
		}
	}
	t.Fatalf("%d callers never came to wait for the read in flight", n)
}
