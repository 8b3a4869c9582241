package main

import (
	"context"
	"errors"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// teeLW gives two informers one list and one watch stream: the first
// List is made against the server and every caller gets a copy of it; the
// first Watch opens the server's watch and every caller (at most outputs)
// gets the same events, in the same order, handed to them alternately
// first and second. The two informers then differ only in what they do with
// an event, not in when the server sent it or how long decoding took, so a
// write's handler delivery and WaitForFreshness return can be compared per
// write. A second watch (a restart) is refused: the measurement fails
// rather than compare two streams again. Objects are shared between the
// informers (neither has a transform or mutates them).
type teeLW struct {
	inner   toolscache.ListerWatcherWithContext
	outputs int

	done chan struct{} // closed once every output has stopped

	mu      sync.Mutex
	list    runtime.Object
	outs    []*teeWatch
	watched int
	stopped int
}

func newTeeLW(lw toolscache.ListerWatcher, outputs int) *teeLW {
	return &teeLW{inner: toolscache.ToListerWatcherWithContext(lw), outputs: outputs, done: make(chan struct{})}
}

// IsWatchListSemanticsUnSupported: list then watch, so the stream both
// informers share starts at the one list's resource version.
func (*teeLW) IsWatchListSemanticsUnSupported() bool { return true }

func (t *teeLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	return t.ListWithContext(context.Background(), opts)
}

func (t *teeLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return t.WatchWithContext(context.Background(), opts)
}

func (t *teeLW) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.list == nil {
		l, err := t.inner.ListWithContext(ctx, opts)
		if err != nil {
			return nil, err
		}
		t.list = l
	}
	return t.list.DeepCopyObject(), nil
}

func (t *teeLW) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.watched == t.outputs {
		return nil, errors.New("tee: a watch restarted; the shared stream is gone")
	}
	if t.watched == 0 {
		// Both informers watch from the one list's resource version; the
		// first caller's options stand for both.
		w, err := t.inner.WatchWithContext(ctx, opts)
		if err != nil {
			return nil, err
		}
		for range t.outputs {
			t.outs = append(t.outs, &teeWatch{tee: t, out: make(chan watch.Event, 4096), stop: make(chan struct{})})
		}
		go t.broadcast(w)
	}
	out := t.outs[t.watched]
	t.watched++
	return out, nil
}

// broadcast hands every upstream event to each output that is not
// stopped, alternating which gets it first; it stops the upstream watch
// once every output has stopped.
func (t *teeLW) broadcast(w watch.Interface) {
	defer w.Stop()
	defer func() {
		for _, o := range t.outs {
			close(o.out)
		}
	}()
	for i := 0; ; i++ {
		var ev watch.Event
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				return
			}
			ev = e
		case <-t.done:
			return
		}
		for j := range t.outs {
			o := t.outs[(i+j)%len(t.outs)]
			select {
			case o.out <- ev:
			case <-o.stop:
			}
		}
	}
}

type teeWatch struct {
	tee  *teeLW
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

func (w *teeWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *teeWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		t := w.tee
		t.mu.Lock()
		t.stopped++
		if t.stopped == t.outputs {
			close(t.done)
		}
		t.mu.Unlock()
	})
}
