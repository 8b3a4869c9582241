package e2e

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// holdingLW is a ListWatch whose watch events can be held back in the
// client (an informer falling behind: a slow handler, a paused process),
// while the server moves on.
type holdingLW struct {
	*toolscache.ListWatch
	mu      sync.Mutex
	gate    chan struct{} // non-nil while holding; closed on release
	watches map[*heldWatch]struct{}
}

// disconnect ends the open watches and keeps new ones from starting until
// release: the informer has no watch while the server moves on (as between
// an apiserver restart and the Reflector's next attempt).
func (l *holdingLW) disconnect() {
	l.hold()
	l.mu.Lock()
	defer l.mu.Unlock()
	for w := range l.watches {
		w.Stop()
	}
}

func (l *holdingLW) hold() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gate == nil {
		l.gate = make(chan struct{})
	}
}

func (l *holdingLW) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gate != nil {
		close(l.gate)
		l.gate = nil
	}
}

func (l *holdingLW) current() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gate
}

type heldWatch struct {
	watch.Interface
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

func (w *heldWatch) ResultChan() <-chan watch.Event { return w.out }
func (w *heldWatch) Stop() {
	w.once.Do(func() { close(w.stop) })
	w.Interface.Stop()
}

func (l *holdingLW) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	l.mu.Lock()
	disconnected := l.gate != nil && l.watches != nil
	g := l.gate
	l.mu.Unlock()
	if disconnected {
		select {
		case <-g:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	inner, err := l.ListWatch.WatchWithContext(ctx, opts)
	if err != nil {
		return nil, err
	}
	w := &heldWatch{Interface: inner, out: make(chan watch.Event), stop: make(chan struct{})}
	l.mu.Lock()
	if l.watches == nil {
		l.watches = map[*heldWatch]struct{}{}
	}
	l.watches[w] = struct{}{}
	l.mu.Unlock()
	go func() {
		defer func() {
			l.mu.Lock()
			delete(l.watches, w)
			l.mu.Unlock()
		}()
		defer close(w.out)
		for ev := range inner.ResultChan() {
			if g := l.current(); g != nil {
				select {
				case <-g:
				case <-w.stop:
					return
				}
			}
			select {
			case w.out <- ev:
			case <-w.stop:
				return
			}
		}
	}()
	return w, nil
}
