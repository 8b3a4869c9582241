package freshness

import "container/heap"

// afterFunc is one AfterFunc callback registered on a pending target.
type afterFunc struct {
	f func(error)
	w *waitTarget // nil once stopped, or when f never had to wait
}

// AfterFuncCancelable is AfterFunc with a way to call f off, as
// context.AfterFunc has: stop unregisters f if it has not been released
// yet and reports whether it did. It returns false once f has run, is
// about to run, or was stopped before; f then runs (or ran) exactly once.
// A target left with no waiter and no callback is removed, so a caller
// that gives up (a bound passed, a key was dropped) leaves nothing behind.
// stop is safe to call from any goroutine, more than once, and from f.
func (t *Tracker) AfterFuncCancelable(rv RV, f func(error)) (stop func() bool) {
	t.mu.Lock()
	var err error
	switch {
	case t.incomparable != nil:
		err = t.incomparable
	case t.reachedLocked(rv):
	case t.stopped:
		err = ErrStopped
	default:
		w := t.target(rv)
		a := &afterFunc{f: f, w: w}
		w.funcs = append(w.funcs, a)
		t.mu.Unlock()
		return func() bool { return t.stopAfterFunc(a) }
	}
	if t.holds > 0 { // the caller may hold the owner's lock: run f with the held ones
		t.due = append(t.due, dueFunc{f, err})
		t.mu.Unlock()
	} else {
		t.mu.Unlock()
		f(err)
	}
	return func() bool { return false }
}

// stopAfterFunc unregisters a unless it was released already.
func (t *Tracker) stopAfterFunc(a *afterFunc) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := a.w
	if w == nil || w.index < 0 { // stopped before, or released
		return false
	}
	a.w = nil
	for i, b := range w.funcs {
		if b == a {
			w.funcs = append(w.funcs[:i], w.funcs[i+1:]...)
			break
		}
	}
	if w.waiters == 0 && len(w.funcs) == 0 {
		heap.Remove(&t.targets, w.index)
		delete(t.byRV, w.rv.s)
	}
	return true
}
