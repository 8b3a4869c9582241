package freshtest

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// Lag holds watch events back from informers on demand, as a slow or
// partitioned informer would fall behind, so that a test shows
// deterministically which reads a controller makes stale: Hold, write,
// reconcile (its reads find the cache behind its writes), Release.
//
// One Lag can hold the watches of a fake clientset (Fake), of a
// ListerWatcher (ListerWatcher: one informer), and of every client made
// from a rest.Config (WrapConfig: the informers of a factory or of a
// controller-runtime manager on a real API server). Events that arrive
// while it holds are delivered, in order, by Release; those that arrived
// before reach the informers as usual. Lists are not held: an informer
// that relists while held catches up.
//
// A Lag holds every watch event it sees, whoever made the write: the
// events that would trigger a reconcile are held too, so a controller
// driven only by watch events sees the cache behind its own writes only
// when something else makes it read in the meantime (a requeue right
// after its write, a resync, another controller on the same cache).
// docs/where-controllers-read-stale.md has a test recipe for each.
//
// Make one with NewLag (the zero Lag is ready too), wire it before the
// informers start, then Hold and Release, or HoldFor. A Lag is safe for
// concurrent use.
type Lag struct {
	mu    sync.Mutex
	gate  chan struct{} // non-nil while holding; closed by Release
	timer *time.Timer   // HoldFor's
}

// NewLag returns a Lag that holds nothing yet.
func NewLag() *Lag { return &Lag{} }

// Hold holds every event that arrives from now on until Release.
func (l *Lag) Hold() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopTimerLocked()
	if l.gate == nil {
		l.gate = make(chan struct{})
	}
}

// HoldFor holds, for d, every watch event of every watch the Lag wraps
// (all resources, anyone's writes, the triggering events included), then
// releases them in order, unless events are held already: then it changes
// nothing (the hold in force ends as it would). Several goroutines can
// call it around their writes: the cache lags by at most d behind each.
func (l *Lag) HoldFor(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gate != nil {
		return
	}
	l.gate = make(chan struct{})
	l.timer = time.AfterFunc(d, l.Release)
}

// Release delivers the held events, in order, and holds no more.
func (l *Lag) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopTimerLocked()
	if l.gate != nil {
		close(l.gate)
		l.gate = nil
	}
}

func (l *Lag) stopTimerLocked() {
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
}

// wait blocks while l holds, until it releases or done is closed; false
// if done was.
func (l *Lag) wait(done <-chan struct{}) bool {
	l.mu.Lock()
	g := l.gate
	l.mu.Unlock()
	if g == nil {
		return true
	}
	select {
	case <-g:
		return true
	case <-done:
		return false
	}
}

// ListerWatcher returns lw with its watches held by l.
func (l *Lag) ListerWatcher(lw toolscache.ListerWatcher) toolscache.ListerWatcher {
	return &lagLW{ListerWatcherWithContext: toolscache.ToListerWatcherWithContext(lw), inner: lw, lag: l}
}

type lagLW struct {
	toolscache.ListerWatcherWithContext
	inner toolscache.ListerWatcher
	lag   *Lag
}

func (w *lagLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	return w.ListWithContext(context.Background(), opts)
}

func (w *lagLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return w.WatchWithContext(context.Background(), opts)
}

func (w *lagLW) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	inner, err := w.ListerWatcherWithContext.WatchWithContext(ctx, opts)
	if err != nil {
		return nil, err
	}
	return w.lag.watch(inner), nil
}

// IsWatchListSemanticsUnSupported says what the wrapped ListerWatcher
// says (client-go's fakes support no watch-list).
func (w *lagLW) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(w.inner)
}

// Fake holds the watches of a fake clientset (its testing.Fake: &client.Fake)
// that start from now on. Call it before the informers start.
func (l *Lag) Fake(fake *k8stesting.Fake) {
	fake.Lock()
	defer fake.Unlock()
	chain := fake.WatchReactionChain
	fake.WatchReactionChain = []k8stesting.WatchReactor{&k8stesting.SimpleWatchReactor{Resource: "*",
		Reaction: func(action k8stesting.Action) (bool, watch.Interface, error) {
			for _, r := range chain {
				if !r.Handles(action) {
					continue
				}
				handled, w, err := r.React(action)
				if !handled {
					continue
				}
				if err == nil && w != nil {
					w = l.watch(w)
				}
				return true, w, err
			}
			return false, nil, nil
		}}}
}

// heldWatch forwards its inner watch's events, waiting while the Lag
// holds.
type heldWatch struct {
	inner watch.Interface
	out   chan watch.Event
	stop  chan struct{}
	once  sync.Once
}

func (l *Lag) watch(inner watch.Interface) watch.Interface {
	w := &heldWatch{inner: inner, out: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		defer close(w.out)
		for ev := range inner.ResultChan() {
			if !l.wait(w.stop) {
				return
			}
			select {
			case w.out <- ev:
			case <-w.stop:
				return
			}
		}
	}()
	return w
}

func (w *heldWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *heldWatch) Stop() {
	w.once.Do(func() { close(w.stop) })
	w.inner.Stop()
}

// WrapConfig returns a copy of cfg whose clients' watch responses l holds
// (a real API server's, or any other): the informers of a factory or of a
// controller-runtime manager made from it fall behind on demand. Only
// watch streams are held; every other request passes through.
func (l *Lag) WrapConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(next http.RoundTripper) http.RoundTripper { return &lagTransport{next: next, lag: l} })
	return c
}

type lagTransport struct {
	next http.RoundTripper
	lag  *Lag
}

func (t *lagTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Body == nil || req.Method != http.MethodGet || !isWatch(req) {
		return resp, err
	}
	resp.Body = &heldBody{ReadCloser: resp.Body, lag: t.lag, closed: make(chan struct{})}
	return resp, nil
}

// WrappedRoundTripper returns the transport this one wraps, as client-go's
// transports do.
func (t *lagTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

func isWatch(req *http.Request) bool {
	switch req.URL.Query().Get("watch") {
	case "true", "1":
		return true
	}
	return false
}

// heldBody holds a watch stream: what a read returns while the Lag holds
// (an event that arrived after Hold) is handed over once it releases.
type heldBody struct {
	io.ReadCloser
	lag    *Lag
	closed chan struct{}
	once   sync.Once
}

func (b *heldBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if !b.lag.wait(b.closed) {
		return 0, io.ErrClosedPipe
	}
	return n, err
}

func (b *heldBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return b.ReadCloser.Close()
}
