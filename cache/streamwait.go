package cache

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/probe"
	"github.com/freshinformer/freshinformer/internal/rvwait"
)

// WaitForStream is WaitForFreshness for a resource version the informer's
// own stream is bound to deliver: one that a write of an object its
// selector admits returned (a controller waiting for its own writes, as
// package consistency does). It sends no request for it: the quiet-resource
// probe (see the package documentation, "Quiet resources") is for resource
// versions the stream may never carry, and for these it would only ask the
// server, a list or a watch at a time, what the stream is about to tell,
// which under watch lag is most of the time. Everything else is
// WaitForFreshness's: the same errors (but never
// freshness.ErrTooLargeResourceVersion, which only a probe's consistent
// read shows), the same metrics, held back as WaitForFreshness is (an
// outage, a restore check, a regression being declared). A resource
// version the stream never carries (an object the selector does not
// admit, a write an etcd restore lost) waits until a later event or
// bookmark passes it, or ctx ends: bound ctx, and use WaitForFreshness
// where that may happen.
func (f *FreshInformer) WaitForStream(ctx context.Context, rv string) error {
	target, err := freshness.ParseRV(rv)
	if err == nil && f.trust.Reached(target) { // one atomic load
		if f.metrics != nil {
			f.metrics.ObserveWait(WaitFresh, 0)
		}
		return nil
	}
	if err != nil {
		if f.metrics != nil {
			f.metrics.ObserveWait(WaitIncomparable, 0)
		}
		return err
	}
	if f.metrics == nil {
		return f.trust.Wait(ctx, target)
	}
	start := time.Now()
	err = f.trust.Wait(ctx, target)
	f.metrics.ObserveWait(outcomeOf(err), time.Since(start))
	return err
}

// AfterStream is AfterFreshness for a resource version the informer's own
// stream is bound to deliver, as WaitForStream is WaitForFreshness: it
// sends no probe for it, and a resource version the stream never carries
// runs fn only once a later event or bookmark passes it (or the informer
// stops).
func (f *FreshInformer) AfterStream(rv string, fn func(error)) (stop func() bool) {
	target, err := freshness.ParseRV(rv)
	if err != nil {
		fn(err)
		return func() bool { return false }
	}
	c := &afterFreshCall{f: f, fn: fn} // not joined: no probe
	var due rvwait.Due
	c.stopWait, due = f.trust.AfterFunc(target, c.fire)
	due.Run()
	return c.stop
}

// AdmitsNamespace reports whether the informer holds every object of its
// resource in its namespace (every namespace, for a cluster-wide one): no
// label or field selector narrows it, so every write of such an object
// comes back on its stream, and WaitForStream and AfterStream may wait
// for it.
func (f *FreshInformer) AdmitsNamespace() bool {
	s := f.Selector()
	return (s.Labels == nil || s.Labels.Empty()) && (s.Fields == nil || s.Fields.Empty())
}

// ServerResourceVersionOf asks the server for the resource version of one
// object the informer holds: a consistent list through the informer's
// ListerWatcher (its namespace and list options) narrowed to namespace and
// name by field selector. found is false when the server has no such
// object. It is a read of one object, for a caller that must know whether
// the cached copy is the server's current one (package consistency reads
// an owner created while its controller runs, before its first sync); use
// it sparingly. Only an informer without a field selector of its own
// (AdmitsNamespace) can be asked: others fail.
func (f *FreshInformer) ServerResourceVersionOf(ctx context.Context, namespace, name string) (rv string, found bool, err error) {
	if f.cfg.lw == nil {
		return "", false, errors.New("freshinformer: informer has no ListerWatcher")
	}
	if s := f.Selector(); s.Fields != nil && !s.Fields.Empty() {
		return "", false, fmt.Errorf("freshinformer: informer of %s has a field selector of its own (%s)", f.cfg.resource, s.Fields)
	}
	return probe.ObjectResourceVersion(ctx, f.cfg.lw, namespace, name)
}
