package probe

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/reflector"
)

// ServerResourceVersion reads the server's current resource version with a
// consistent list of limit 1 through lw (same namespace and selectors as
// the informer's own requests; a quorum read).
func ServerResourceVersion(ctx context.Context, lw toolscache.ListerWatcher) (freshness.RV, error) {
	if lw == nil {
		return freshness.RV{}, errors.New("informer has no ListerWatcher")
	}
	obj, err := toolscache.ToListerWatcherWithContext(lw).ListWithContext(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return freshness.RV{}, err
	}
	list, err := meta.ListAccessor(obj)
	if err != nil {
		return freshness.RV{}, err
	}
	rv, err := freshness.ParseRV(list.GetResourceVersion())
	if err != nil {
		return freshness.RV{}, fmt.Errorf("the server's list resource version: %w", err)
	}
	return rv, nil
}

// ObjectResourceVersion reads the server's resource version of one
// object with a consistent list through lw (the informer's namespace and
// list options) narrowed to namespace and name by field selector; found
// is false when the server has no such object.
func ObjectResourceVersion(ctx context.Context, lw toolscache.ListerWatcher, namespace, name string) (rv string, found bool, err error) {
	sel := fields.OneTermEqualSelector("metadata.name", name)
	if namespace != "" {
		sel = fields.AndSelectors(sel, fields.OneTermEqualSelector("metadata.namespace", namespace))
	}
	obj, err := toolscache.ToListerWatcherWithContext(lw).ListWithContext(ctx, metav1.ListOptions{FieldSelector: sel.String()})
	if err != nil {
		return "", false, err
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		return "", false, err
	}
	for _, item := range items {
		m, err := meta.Accessor(item)
		if err != nil {
			return "", false, err
		}
		if m.GetName() == name && (namespace == "" || m.GetNamespace() == namespace) {
			return m.GetResourceVersion(), true, nil
		}
	}
	return "", false, nil
}

// AuxResult says how an auxiliary watch ended.
type AuxResult int

// The ways an auxiliary watch ends.
const (
	// Proved: a bookmark at or past the server's resource version, or an
	// event past it (the informer's own stream delivers that one).
	Proved AuxResult = iota
	// NoBookmark: the watch ended without a bookmark (no watch cache).
	NoBookmark
	// Expired: the start resource version is too old to watch from.
	Expired
	// Failed: anything else; try again later.
	Failed
)

// AuxWatch watches through lw (the informer's namespace and selectors) from
// start, with bookmarks and a timeout of timeoutSeconds, until a bookmark at
// or past server. Each bookmark B after the newest event E it has seen (or
// after start) proves that the informer's stream holds no event in (E, B]:
// AuxWatch reports it with prove(E, B), and the caller may move its applied
// resource version to B once it has applied E.
func AuxWatch(ctx context.Context, lw toolscache.ListerWatcher, start, server freshness.RV, timeoutSeconds int64, prove func(lo, hi freshness.RV), logger klog.Logger) AuxResult {
	w, err := toolscache.ToListerWatcherWithContext(lw).WatchWithContext(ctx, metav1.ListOptions{
		ResourceVersion:     start.String(),
		AllowWatchBookmarks: true,
		TimeoutSeconds:      &timeoutSeconds,
	})
	if err != nil {
		if isExpired(err) {
			return Expired
		}
		logger.V(4).Info("Freshness probe: watch failed", "err", err)
		return Failed
	}
	defer w.Stop()
	last := start // the newest event seen: the gap to prove starts there
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return Failed
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			return NoBookmark
		}
		rv, res, ok := eventRV(ev)
		if !ok {
			return res
		}
		if ev.Type != watch.Bookmark {
			if rv.Compare(last) > 0 {
				last = rv
			}
			if rv.Compare(server) >= 0 { // the informer's own stream delivers it
				return Proved
			}
			continue
		}
		if !reflector.Plausible(rv, server) {
			// A bookmark implausibly far ahead of the server's own
			// consistent read proves nothing (the informer's guard skips
			// such bookmarks on its stream, too).
			return Failed
		}
		if rv.Compare(last) > 0 {
			prove(last, rv)
		}
		if rv.Compare(server) >= 0 {
			return Proved
		}
	}
}

// eventRV returns ev's resource version; if ok is false, ev ends the probe
// with res instead: an error event, or an object whose resource version
// cannot be read.
func eventRV(ev watch.Event) (rv freshness.RV, res AuxResult, ok bool) {
	if ev.Type == watch.Error {
		if isExpired(apierrors.FromObject(ev.Object)) {
			return rv, Expired, false
		}
		return rv, Failed, false
	}
	m, err := meta.Accessor(ev.Object)
	if err != nil {
		return rv, Failed, false
	}
	if rv, err = freshness.ParseRV(m.GetResourceVersion()); err != nil {
		return rv, Failed, false
	}
	return rv, res, true
}

func isExpired(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}
