package fake

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/watch"
	clientgoapplyconfigurations "k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/freshinformer/freshinformer/freshctrl"
	"github.com/freshinformer/freshinformer/freshtest"
)

// server is the fake API server: a k8s.io/client-go/testing.ObjectTracker
// for controller-runtime's fake client (its writes) over a freshtest
// Tracker (resource versions from one counter, UIDs, conflicts, finalizers,
// watch history), plus the ListerWatchers the cache's informers use.
//
// On top of freshtest it adds what a server's watch cache gives an
// informer: watch bookmarks, so an informer whose resource nobody writes
// still reaches the server's newest resource version, and the pause that
// lets a test hold the informers behind the server.
//
// Every write goes through server.write, under mu: bookmarks rely on
// knowing, per resource, the resource version of its newest event.
type server struct {
	scheme  *runtime.Scheme
	tracker *freshtest.Tracker

	mu sync.Mutex // guards the fields below; taken before the freshtest tracker's
	// lastEvent is, per resource, the resource version of the newest
	// watch event the tracker published.
	lastEvent map[schema.GroupVersionResource]uint64
	// changed is closed (and replaced) when the tracker's resource version
	// moves: watches look for a bookmark to send.
	changed chan struct{}
	// resumed is non-nil while the informers are paused; Resume closes it.
	resumed     chan struct{}
	resumeTimer *time.Timer // PauseInformersFor's
}

var _ k8stesting.ObjectTracker = (*server)(nil)

func newServer(s *runtime.Scheme) *server {
	// As controller-runtime's fake builds its own tracker: server-side
	// apply tracks managed fields, typed where client-go knows the type.
	clientGoScheme := runtime.NewScheme()
	if err := scheme.AddToScheme(clientGoScheme); err != nil {
		panic(fmt.Sprintf("freshctrl/fake: client-go's scheme: %v", err))
	}
	inner := k8stesting.NewFieldManagedObjectTracker(s, serializer.NewCodecFactory(s).UniversalDecoder(),
		typeConverters{clientgoapplyconfigurations.NewTypeConverter(clientGoScheme), managedfields.NewDeducedTypeConverter()})
	// freshtest.Stamp wants a Fake to install its reactors on; nothing
	// sends actions to this one: controller-runtime's fake client calls the
	// server's methods directly.
	return &server{
		scheme:    s,
		tracker:   freshtest.Stamp(&k8stesting.Fake{}, inner),
		lastEvent: map[schema.GroupVersionResource]uint64{},
		changed:   make(chan struct{}),
	}
}

// typeConverters uses the first converter that can convert an object.
type typeConverters []managedfields.TypeConverter

func (c typeConverters) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	var errs []error
	for _, tc := range c {
		v, err := tc.ObjectToTyped(obj, opts...)
		if err == nil {
			return v, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func (c typeConverters) TypedToObject(v *typed.TypedValue) (runtime.Object, error) {
	var errs []error
	for _, tc := range c {
		obj, err := tc.TypedToObject(v)
		if err == nil {
			return obj, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func (s *server) currentRV() uint64 {
	n, _ := strconv.ParseUint(s.tracker.ResourceVersion(), 10, 64)
	return n
}

// write runs one write of gvr against the tracker. A successful write that
// took a resource version published exactly one event of gvr at it (see
// freshtest.Tracker), unless it is a seed (Add, which publishes none); a
// failed one published none.
func (s *server) write(gvr schema.GroupVersionResource, seed bool, op func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.currentRV()
	err := op()
	after := s.currentRV()
	if after != before {
		if err == nil && !seed {
			s.lastEvent[gvr] = after
		}
		close(s.changed)
		s.changed = make(chan struct{})
	}
	return err
}

// pause holds every watch's events and bookmarks until resume.
func (s *server) pause() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopResumeTimerLocked()
	if s.resumed == nil {
		s.resumed = make(chan struct{})
	}
}

// pauseFor pauses, and resumes after d unless pause or resume comes first.
func (s *server) pauseFor(d time.Duration) {
	s.pause()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resumeTimer = time.AfterFunc(d, s.resume)
}

func (s *server) resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopResumeTimerLocked()
	if s.resumed != nil {
		close(s.resumed)
		s.resumed = nil
	}
}

func (s *server) stopResumeTimerLocked() {
	if s.resumeTimer != nil {
		s.resumeTimer.Stop()
		s.resumeTimer = nil
	}
}

// paused returns the channel Resume closes, or nil when not paused.
func (s *server) paused() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resumed
}

// bookmark returns the resource version a watch of gvr whose newest event
// is at last may announce in a bookmark (0 for none): the server's, once
// no event of gvr after last exists, and never while paused. changed is
// closed when that may change.
func (s *server) bookmark(gvr schema.GroupVersionResource, last uint64) (rv uint64, changed <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resumed != nil || s.lastEvent[gvr] > last {
		return 0, s.changed
	}
	return s.currentRV(), s.changed
}

// The ObjectTracker methods controller-runtime's fake client calls.
// It checks resource versions (conflicts) itself and sets its own on the
// objects it passes; the tracker's replace them, and the written object
// carries the tracker's back to the caller.

// Add seeds obj (or a list's items), before any informer runs.
func (s *server) Add(obj runtime.Object) error {
	if meta.IsListType(obj) {
		items, err := meta.ExtractList(obj)
		if err != nil {
			return err
		}
		for _, item := range items {
			if err := s.Add(item); err != nil {
				return err
			}
		}
		return nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	gvks, _, err := s.scheme.ObjectKinds(obj)
	if err != nil {
		return err
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gvks[0])
	return s.write(gvr, true, func() error {
		m.SetResourceVersion("")
		if err := s.tracker.Add(obj); err != nil {
			return err
		}
		return s.copyBack(gvr, m.GetNamespace(), m)
	})
}

// copyBack sets the stored object's resource version and UID on m.
func (s *server) copyBack(gvr schema.GroupVersionResource, ns string, m metav1.Object) error {
	stored, err := s.tracker.Get(gvr, ns, m.GetName())
	if err != nil {
		return err
	}
	sm, err := meta.Accessor(stored)
	if err != nil {
		return err
	}
	m.SetResourceVersion(sm.GetResourceVersion())
	m.SetUID(sm.GetUID())
	return nil
}

// Get returns the stored object.
func (s *server) Get(gvr schema.GroupVersionResource, ns, name string, opts ...metav1.GetOptions) (runtime.Object, error) {
	return s.tracker.Get(gvr, ns, name, opts...)
}

// List returns the stored objects of ns ("" all), at the server's
// resource version.
func (s *server) List(gvr schema.GroupVersionResource, gvk schema.GroupVersionKind, ns string, opts ...metav1.ListOptions) (runtime.Object, error) {
	return s.tracker.List(gvr, gvk, ns, opts...)
}

// Create stores obj, which gets the stored resource version and UID.
func (s *server) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.CreateOptions) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	return s.write(gvr, false, func() error {
		m.SetResourceVersion("")
		if err := s.tracker.Create(gvr, obj, ns, opts...); err != nil {
			return err
		}
		if ns == "" {
			ns = m.GetNamespace()
		}
		return s.copyBack(gvr, ns, m)
	})
}

// Update stores obj (controller-runtime's fake checked its resource
// version); freshtest sets the new one on obj.
func (s *server) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.UpdateOptions) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	return s.write(gvr, false, func() error {
		m.SetResourceVersion("")
		return s.tracker.Update(gvr, obj, ns, opts...)
	})
}

// Patch stores the patched obj; freshtest sets the new resource version on
// it.
func (s *server) Patch(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	return s.write(gvr, false, func() error {
		m.SetResourceVersion("")
		return s.tracker.Patch(gvr, obj, ns, opts...)
	})
}

// Apply applies a server-side apply configuration.
func (s *server) Apply(gvr schema.GroupVersionResource, applyConfiguration runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	if m, err := meta.Accessor(applyConfiguration); err == nil {
		m.SetResourceVersion("") // controller-runtime's, checked already
	}
	return s.write(gvr, false, func() error { return s.tracker.Apply(gvr, applyConfiguration, ns, opts...) })
}

// Delete deletes the object. controller-runtime's fake marks objects with
// finalizers terminating itself, through Update; it calls Delete on a
// terminating object once an update removed its last finalizer, an update
// it does not store: the tracker is given that update, which deletes the
// object.
func (s *server) Delete(gvr schema.GroupVersionResource, ns, name string, opts ...metav1.DeleteOptions) error {
	return s.write(gvr, false, func() error {
		current, err := s.tracker.Get(gvr, ns, name)
		if err != nil {
			return err
		}
		m, err := meta.Accessor(current)
		if err != nil {
			return err
		}
		if m.GetDeletionTimestamp() != nil && len(m.GetFinalizers()) > 0 {
			m.SetFinalizers(nil)
			m.SetResourceVersion("")
			return s.tracker.Update(gvr, current, ns)
		}
		return s.tracker.Delete(gvr, ns, name, opts...)
	})
}

// Watch is controller-runtime's fake client's own Watch: freshtest's.
func (s *server) Watch(gvr schema.GroupVersionResource, ns string, opts ...metav1.ListOptions) (watch.Interface, error) {
	return s.tracker.Watch(gvr, ns, opts...)
}

// listerWatcher returns the ListerWatcher of one informer of the cache.
func (s *server) listerWatcher(inf freshctrl.ScopedInformer) toolscache.ListerWatcher {
	lw := &listerWatcher{s: s, inf: inf}
	lw.gvr, _ = meta.UnsafeGuessKindToResource(inf.GroupVersionKind) // as controller-runtime's fake stores it
	if inf.Scope.Fields != nil {
		lw.fields = inf.Scope.Fields
		for _, r := range inf.Scope.Fields.Requirements() {
			if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
				lw.fields = nil // filter only what every object has, as freshtest does
				break
			}
		}
	}
	return lw
}

// listerWatcher serves one informer: its scope (namespace, label and
// metadata field selectors) and its representation (typed, unstructured,
// metadata only), from the tracker.
type listerWatcher struct {
	s      *server
	inf    freshctrl.ScopedInformer
	gvr    schema.GroupVersionResource
	fields fields.Selector // nil: everything
}

var _ toolscache.ListerWatcherWithContext = (*listerWatcher)(nil)

// IsWatchListSemanticsUnSupported has client-go's Reflector list, then
// watch: the tracker does not stream initial events.
func (lw *listerWatcher) IsWatchListSemanticsUnSupported() bool { return true }

// List implements toolscache.ListerWatcher.
func (lw *listerWatcher) List(opts metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), opts)
}

// Watch implements toolscache.ListerWatcher.
func (lw *listerWatcher) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), opts)
}

// ListWithContext lists the informer's scope at the server's current
// resource version, whatever opts ask (no paging).
func (lw *listerWatcher) ListWithContext(_ context.Context, _ metav1.ListOptions) (runtime.Object, error) {
	ns := lw.inf.Scope.Namespace
	if lw.inf.Scope.Unknown {
		ns = ""
	}
	list, err := lw.s.tracker.List(lw.gvr, lw.inf.GroupVersionKind, ns)
	if err != nil {
		return nil, err
	}
	la, err := meta.ListAccessor(list)
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	var kept []runtime.Object
	for _, item := range items {
		if lw.admits(item) {
			out, err := lw.represent(item)
			if err != nil {
				return nil, err
			}
			kept = append(kept, out)
		}
	}
	rv := la.GetResourceVersion()
	switch lw.inf.Representation {
	case freshctrl.Unstructured:
		ul := &unstructured.UnstructuredList{}
		ul.SetGroupVersionKind(lw.inf.GroupVersionKind.GroupVersion().WithKind(lw.inf.GroupVersionKind.Kind + "List"))
		ul.SetResourceVersion(rv)
		for _, o := range kept {
			ul.Items = append(ul.Items, *o.(*unstructured.Unstructured))
		}
		return ul, nil
	case freshctrl.Metadata:
		ml := &metav1.PartialObjectMetadataList{}
		ml.SetGroupVersionKind(lw.inf.GroupVersionKind.GroupVersion().WithKind(lw.inf.GroupVersionKind.Kind + "List"))
		ml.SetResourceVersion(rv)
		for _, o := range kept {
			ml.Items = append(ml.Items, *o.(*metav1.PartialObjectMetadata))
		}
		return ml, nil
	}
	if err := meta.SetList(list, kept); err != nil {
		return nil, err
	}
	return list, nil
}

// WatchWithContext watches the informer's scope from opts.ResourceVersion
// (now if "" or "0"), with bookmarks if asked, until Stop or ctx ends.
func (lw *listerWatcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	s := lw.s
	// Under s.mu no write runs: the watch's starting point and the
	// tracker's history agree.
	s.mu.Lock()
	up, err := s.tracker.Watch(lw.gvr, "", metav1.ListOptions{ResourceVersion: opts.ResourceVersion})
	start := s.currentRV()
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
		start, _ = strconv.ParseUint(opts.ResourceVersion, 10, 64) // freshtest parsed it
	}
	w := &watcher{
		lw: lw, up: up, ctx: ctx, bookmarks: opts.AllowWatchBookmarks, last: start,
		out: make(chan watch.Event), stop: make(chan struct{}),
	}
	go w.run()
	return w, nil
}

// admits reports whether obj is in the informer's scope.
func (lw *listerWatcher) admits(obj runtime.Object) bool {
	if lw.inf.Scope.Unknown {
		return true
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	if lw.inf.Scope.Namespace != "" && m.GetNamespace() != lw.inf.Scope.Namespace {
		return false
	}
	if lw.inf.Scope.Labels != nil && !lw.inf.Scope.Labels.Matches(labels.Set(m.GetLabels())) {
		return false
	}
	return lw.fields == nil || lw.fields.Matches(fields.Set{"metadata.name": m.GetName(), "metadata.namespace": m.GetNamespace()})
}

// represent returns obj as the informer caches it.
func (lw *listerWatcher) represent(obj runtime.Object) (runtime.Object, error) {
	switch lw.inf.Representation {
	case freshctrl.Unstructured:
		if u, ok := obj.(*unstructured.Unstructured); ok {
			return u, nil
		}
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{Object: content}
		u.SetGroupVersionKind(lw.inf.GroupVersionKind)
		return u, nil
	case freshctrl.Metadata:
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, err
		}
		p := meta.AsPartialObjectMetadata(m)
		p.SetGroupVersionKind(lw.inf.GroupVersionKind) // as controller-runtime's metadata informers have it
		return p, nil
	}
	return obj, nil
}

// bookmarkObject is a bookmark event's object: the informer's type with
// only a resource version.
func (lw *listerWatcher) bookmarkObject(rv uint64) (runtime.Object, error) {
	var obj runtime.Object
	switch lw.inf.Representation {
	case freshctrl.Unstructured:
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(lw.inf.GroupVersionKind)
		obj = u
	case freshctrl.Metadata:
		p := &metav1.PartialObjectMetadata{}
		p.SetGroupVersionKind(lw.inf.GroupVersionKind)
		obj = p
	default:
		var err error
		if obj, err = lw.s.scheme.New(lw.inf.GroupVersionKind); err != nil {
			return nil, err
		}
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	m.SetResourceVersion(strconv.FormatUint(rv, 10))
	return obj, nil
}

// watcher is one informer watch. It reads every event of the resource
// from the tracker (one freshtest watch of all namespaces, no selector),
// so it knows when it has seen all of them up to the server's resource
// version and may send a bookmark there; it passes on the events in the
// informer's scope, as the informer represents them. While the server is
// paused it passes nothing on.
//
// One goroutine (run) per watch, ending with Stop or the watch's context.
type watcher struct {
	lw        *listerWatcher
	up        watch.Interface
	ctx       context.Context
	bookmarks bool
	last      uint64 // the newest event read from the tracker, or the start
	sent      uint64 // the newest resource version passed on

	out      chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
}

// Stop ends the watch.
func (w *watcher) Stop() { w.stopOnce.Do(func() { close(w.stop) }) }

// ResultChan returns the informer's events.
func (w *watcher) ResultChan() <-chan watch.Event { return w.out }

func (w *watcher) run() {
	defer close(w.out)
	defer w.up.Stop()
	var held *watch.Event // read, to pass on once not paused
	for {
		if resumed := w.lw.s.paused(); resumed != nil {
			select {
			case <-resumed:
				continue
			case <-w.stop:
				return
			case <-w.ctx.Done():
				return
			}
		}
		if held != nil {
			if !w.send(*held) {
				return
			}
			held = nil
			continue
		}
		rv, changed := w.lw.s.bookmark(w.lw.gvr, w.last)
		if w.bookmarks && rv > w.last && rv > w.sent {
			obj, err := w.lw.bookmarkObject(rv)
			if err == nil {
				if !w.send(watch.Event{Type: watch.Bookmark, Object: obj}) {
					return
				}
				w.sent = rv
				continue
			}
		}
		select {
		case ev, ok := <-w.up.ResultChan():
			if !ok {
				return
			}
			held = w.received(ev)
		case <-changed:
		case <-w.stop:
			return
		case <-w.ctx.Done():
			return
		}
	}
}

// received notes ev, read from the tracker, as seen, and returns it as the
// informer represents it, or nil if it is outside the informer's scope.
func (w *watcher) received(ev watch.Event) *watch.Event {
	m, err := meta.Accessor(ev.Object)
	if err != nil {
		return nil
	}
	if rv, err := strconv.ParseUint(m.GetResourceVersion(), 10, 64); err == nil && rv > w.last {
		w.last = rv
	}
	if !w.lw.admits(ev.Object) {
		return nil
	}
	obj, err := w.lw.represent(ev.Object)
	if err != nil {
		return nil
	}
	return &watch.Event{Type: ev.Type, Object: obj}
}

// send passes ev on; false if the watch ended meanwhile.
func (w *watcher) send(ev watch.Event) bool {
	select {
	case w.out <- ev:
		if m, err := meta.Accessor(ev.Object); err == nil {
			if rv, err := strconv.ParseUint(m.GetResourceVersion(), 10, 64); err == nil && rv > w.sent {
				w.sent = rv
			}
		}
		return true
	case <-w.stop:
		return false
	case <-w.ctx.Done():
		return false
	}
}
