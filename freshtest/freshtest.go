// Package freshtest makes client-go's fake clientsets (k8s.io/client-go/
// kubernetes/fake and k8s.io/client-go/dynamic/fake) stamp resource
// versions the way an API server does, so that controllers using
// freshinformer (ReadYourWrites, WaitForFreshness) run unchanged in their
// existing unit tests.
//
// client-go's fakes store objects as given: no resource versions, no UIDs,
// lists without a resource version. A FreshInformer over such a fake
// works as a plain informer, and ReadYourWrites cannot record a write that
// has no resource version. A fake made by this package behaves like a
// server instead:
//
//   - every create, update, patch, apply and delete takes the next value of
//     one counter shared by every resource (etcd's revision), returned on
//     the written object and carried by its watch event;
//   - lists carry the counter's current value;
//   - creates get a UID; updates with a stale resource version fail with
//     409 Conflict, as on a server;
//   - deleting an object with finalizers sets its deletionTimestamp, and
//     removing the last finalizer of a terminating object deletes it;
//   - watches from a resource version replay the events after it (a watch
//     cache of the last HistorySize events; older ones answer 410 Gone),
//     so an informer misses nothing between its list and its watch; label
//     selectors and metadata.name/metadata.namespace field selectors filter
//     events.
//
// Use NewClientset and NewSimpleDynamicClient as the fakes' constructors,
// or Stamp on a fake made elsewhere.
//
// For the stale-read detector (package stalereads): FailOnStaleReads fails
// a test on each read older than the test's own recorded write, and a Lag
// holds informers' watch events back on demand (a fake's, one
// ListerWatcher's, or those of clients made from a rest.Config on a real
// API server), so a test shows deterministically which reads a controller
// makes stale.
package freshtest

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// HistorySize is how many events a Tracker keeps for watches that start
// at a resource version.
const HistorySize = 10000

// NewClientset returns client-go's fake clientset (fake.NewClientset)
// stamping resource versions; objects are added first, in order.
func NewClientset(objects ...runtime.Object) *fake.Clientset {
	c := fake.NewClientset()
	t := Stamp(&c.Fake, c.Tracker())
	mustAdd(t, objects)
	return c
}

// NewSimpleDynamicClient returns client-go's fake dynamic client
// (dynamicfake.NewSimpleDynamicClient) stamping resource versions. As
// there, objects may be typed (scheme names their kind) or unstructured,
// and the client lists every kind of scheme and of the objects.
func NewSimpleDynamicClient(scheme *runtime.Scheme, objects ...runtime.Object) *dynamicfake.FakeDynamicClient {
	seeds := make([]runtime.Object, 0, len(objects))
	for _, obj := range objects {
		u, err := toUnstructured(scheme, obj)
		if err != nil {
			panic(fmt.Sprintf("freshtest: %v", err))
		}
		seeds = append(seeds, u)
	}
	c := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(unstructuredScheme(scheme, seeds), nil)
	t := Stamp(&c.Fake, c.Tracker())
	mustAdd(t, seeds)
	return c
}

// unstructuredScheme registers every kind of scheme and of the objects as
// unstructured (kinds ending in List as lists), as client-go's dynamic
// fake does.
func unstructuredScheme(scheme *runtime.Scheme, objects []runtime.Object) *runtime.Scheme {
	s := runtime.NewScheme()
	register := func(gvk schema.GroupVersionKind) {
		if s.Recognizes(gvk) {
			return
		}
		if strings.HasSuffix(gvk.Kind, "List") {
			s.AddKnownTypeWithName(gvk, &unstructured.UnstructuredList{})
			return
		}
		s.AddKnownTypeWithName(gvk, &unstructured.Unstructured{})
	}
	for gvk := range scheme.AllKnownTypes() {
		register(gvk)
	}
	for _, obj := range objects {
		gvk := obj.GetObjectKind().GroupVersionKind()
		register(gvk)
		register(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	}
	return s
}

// toUnstructured converts obj as client-go's dynamic fake does: its
// content, with the kind it carries or else scheme's.
func toUnstructured(scheme *runtime.Scheme, obj runtime.Object) (*unstructured.Unstructured, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %T to unstructured: %w", obj, err)
	}
	u := &unstructured.Unstructured{Object: content}
	if gvk := u.GroupVersionKind(); gvk.Kind == "" || gvk.Version == "" {
		gvks, _, err := scheme.ObjectKinds(obj)
		if err != nil {
			return nil, fmt.Errorf("the kind of %T: %w", obj, err)
		}
		u.SetGroupVersionKind(gvks[0])
	}
	return u, nil
}

// NewSimpleDynamicClientWithCustomListKinds is
// dynamicfake.NewSimpleDynamicClientWithCustomListKinds stamping resource
// versions.
func NewSimpleDynamicClientWithCustomListKinds(scheme *runtime.Scheme, gvrToListKind map[schema.GroupVersionResource]string, objects ...runtime.Object) *dynamicfake.FakeDynamicClient {
	c := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, gvrToListKind)
	t := Stamp(&c.Fake, c.Tracker())
	mustAdd(t, objects)
	return c
}

func mustAdd(t *Tracker, objects []runtime.Object) {
	for _, obj := range objects {
		if err := t.Add(obj); err != nil {
			panic(fmt.Sprintf("freshtest: adding %T: %v", obj, err))
		}
	}
}

// Stamp makes fake (the testing.Fake inside a fake clientset) serve its
// requests through a stamping Tracker over tracker (the clientset's
// Tracker()), and returns it. Call it before the first request. Reactors
// prepended later still come first, as with any fake. Objects already in
// tracker keep the resource versions they have: seed through the returned
// Tracker.
func Stamp(fake *k8stesting.Fake, tracker k8stesting.ObjectTracker) *Tracker {
	t := &Tracker{inner: tracker, rv: 1, watchers: map[*watcher]struct{}{}}
	react := k8stesting.ObjectReaction(t)
	fake.PrependReactor("*", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		handled, obj, err := react(action)
		if u, ok := action.(k8stesting.UpdateActionImpl); ok && apierrors.IsNotFound(err) {
			// The update removed the last finalizer of a terminating
			// object, which is gone now: a server answers with its final
			// state.
			if final := t.takeRemoved(u.GetResource(), u.GetNamespace(), accessor(u.GetObject()).GetName()); final != nil {
				return true, final, nil
			}
		}
		return handled, obj, err
	})
	fake.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if w, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = w.ListOptions
		}
		w, err := t.Watch(action.GetResource(), action.GetNamespace(), opts)
		return true, w, err
	})
	return t
}

// Tracker is a k8s.io/client-go/testing.ObjectTracker that stamps
// resource versions as a server does (see the package documentation). It
// stores objects in the tracker it wraps and serves watches itself.
//
// A Tracker is safe for concurrent use: one mutex orders every write, so
// resource versions grow in the order events are delivered.
type Tracker struct {
	inner k8stesting.ObjectTracker

	mu       sync.Mutex // guards the fields below; taken before each watcher's
	rv       uint64     // the last resource version handed out
	history  []record
	watchers map[*watcher]struct{}
	removed  *removal // the object the last update removed
}

type removal struct {
	gvr      schema.GroupVersionResource
	ns, name string
	final    runtime.Object
}

// takeRemoved returns (once) the final state of an object the last update
// removed.
func (t *Tracker) takeRemoved(gvr schema.GroupVersionResource, ns, name string) runtime.Object {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.removed
	if r == nil || r.gvr != gvr || r.name != name || (ns != "" && r.ns != ns) {
		return nil
	}
	t.removed = nil
	return r.final
}

var _ k8stesting.ObjectTracker = &Tracker{}

type record struct {
	gvr   schema.GroupVersionResource
	rv    uint64
	event watch.Event
}

// ResourceVersion returns the newest resource version handed out.
func (t *Tracker) ResourceVersion() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strconv.FormatUint(t.rv, 10)
}

// next returns the next resource version. t.mu is held.
func (t *Tracker) next() string {
	t.rv++
	return strconv.FormatUint(t.rv, 10)
}

func accessor(obj runtime.Object) metav1.Object {
	m, err := meta.Accessor(obj)
	if err != nil {
		panic(fmt.Sprintf("freshtest: %T has no object metadata: %v", obj, err))
	}
	return m
}

// stamp sets a fresh resource version on a copy of obj, and a UID if it
// has none.
func (t *Tracker) stamp(obj runtime.Object) (runtime.Object, metav1.Object, error) {
	if _, err := meta.Accessor(obj); err != nil {
		return nil, nil, err
	}
	obj = obj.DeepCopyObject()
	m := accessor(obj)
	m.SetResourceVersion(t.next())
	if m.GetUID() == "" {
		m.SetUID(types.UID("freshtest-uid-" + m.GetResourceVersion()))
	}
	return obj, m, nil
}

// Add adds obj (or a list's items) with a fresh resource version, without
// a watch event: it seeds the fake before informers start.
func (t *Tracker) Add(obj runtime.Object) error {
	if meta.IsListType(obj) {
		items, err := meta.ExtractList(obj)
		if err != nil {
			return err
		}
		for _, item := range items {
			if err := t.Add(item); err != nil {
				return err
			}
		}
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	stamped, _, err := t.stamp(obj)
	if err != nil {
		return err
	}
	return t.inner.Add(stamped)
}

// Get returns the stored object.
func (t *Tracker) Get(gvr schema.GroupVersionResource, ns, name string, opts ...metav1.GetOptions) (runtime.Object, error) {
	return t.inner.Get(gvr, ns, name, opts...)
}

// List returns the stored objects, the list stamped with the current
// resource version.
func (t *Tracker) List(gvr schema.GroupVersionResource, gvk schema.GroupVersionKind, ns string, opts ...metav1.ListOptions) (runtime.Object, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	list, err := t.inner.List(gvr, gvk, ns, opts...)
	if err != nil {
		return nil, err
	}
	if la, err := meta.ListAccessor(list); err == nil {
		la.SetResourceVersion(strconv.FormatUint(t.rv, 10))
	}
	return list, nil
}

// Create stores obj with a fresh resource version and a UID.
func (t *Tracker) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.CreateOptions) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	rv := t.rv
	stamped, m, err := t.stamp(obj)
	if err != nil {
		return err
	}
	if err := t.inner.Create(gvr, stamped, ns, opts...); err != nil {
		t.rv = rv
		return err
	}
	return t.emit(gvr, ns, m.GetName(), watch.Added)
}

// Update stores obj with a fresh resource version. It fails with a
// Conflict if obj carries a resource version other than the stored one;
// removing the last finalizer of a terminating object deletes it.
func (t *Tracker) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.UpdateOptions) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.update(gvr, obj, ns, func(o runtime.Object) error { return t.inner.Update(gvr, o, ns, opts...) }, true)
}

// Patch stores the patched obj with a fresh resource version.
func (t *Tracker) Patch(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.update(gvr, obj, ns, func(o runtime.Object) error { return t.inner.Patch(gvr, o, ns, opts...) }, false)
}

// update writes obj over the stored object. t.mu is held.
func (t *Tracker) update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, write func(runtime.Object) error, checkRV bool) error {
	in, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	if ns == "" {
		ns = in.GetNamespace()
	}
	current, err := t.inner.Get(gvr, ns, in.GetName())
	if err != nil {
		return err
	}
	cur := accessor(current)
	if checkRV && in.GetResourceVersion() != "" && in.GetResourceVersion() != cur.GetResourceVersion() {
		return apierrors.NewConflict(gvr.GroupResource(), in.GetName(),
			fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	rv := t.rv
	stamped, m, err := t.stamp(obj)
	if err != nil {
		return err
	}
	m.SetUID(cur.GetUID())
	in.SetResourceVersion(m.GetResourceVersion()) // the patch reaction returns its own object
	in.SetUID(m.GetUID())
	if cur.GetDeletionTimestamp() != nil {
		m.SetDeletionTimestamp(cur.GetDeletionTimestamp())
		if len(m.GetFinalizers()) == 0 { // the last finalizer is gone: the object goes
			if err := t.remove(gvr, ns, stamped); err != nil {
				return err
			}
			t.removed = &removal{gvr: gvr, ns: ns, name: m.GetName(), final: stamped.DeepCopyObject()}
			return nil
		}
	}
	if err := write(stamped); err != nil {
		t.rv = rv
		return err
	}
	return t.emit(gvr, ns, m.GetName(), watch.Modified)
}

// Apply applies a server-side apply configuration, stamping the result.
func (t *Tracker) Apply(gvr schema.GroupVersionResource, applyConfiguration runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	name := accessor(applyConfiguration).GetName()
	_, getErr := t.inner.Get(gvr, ns, name)
	if err := t.inner.Apply(gvr, applyConfiguration, ns, opts...); err != nil {
		return err
	}
	applied, err := t.inner.Get(gvr, ns, name)
	if err != nil {
		return err
	}
	stamped, _, err := t.stamp(applied)
	if err != nil {
		return err
	}
	if err := t.inner.Update(gvr, stamped, ns); err != nil {
		return err
	}
	kind := watch.Modified
	if apierrors.IsNotFound(getErr) {
		kind = watch.Added
	}
	return t.emit(gvr, ns, name, kind)
}

// Delete deletes the object, its watch event carrying the deletion's
// resource version; an object with finalizers is only marked terminating
// (deletionTimestamp set), as on a server.
func (t *Tracker) Delete(gvr schema.GroupVersionResource, ns, name string, opts ...metav1.DeleteOptions) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	current, err := t.inner.Get(gvr, ns, name)
	if err != nil {
		return err
	}
	cur := accessor(current)
	if len(cur.GetFinalizers()) > 0 {
		if cur.GetDeletionTimestamp() != nil {
			return nil // already terminating: nothing changes
		}
		stamped, m, err := t.stamp(current)
		if err != nil {
			return err
		}
		now := metav1.NewTime(time.Now())
		m.SetDeletionTimestamp(&now)
		if err := t.inner.Update(gvr, stamped, ns); err != nil {
			return err
		}
		return t.emit(gvr, ns, name, watch.Modified)
	}
	stamped, _, err := t.stamp(current)
	if err != nil {
		return err
	}
	return t.remove(gvr, ns, stamped)
}

// remove deletes the stored object; final is its last state, stamped with
// the deletion's resource version. t.mu is held.
func (t *Tracker) remove(gvr schema.GroupVersionResource, ns string, final runtime.Object) error {
	m := accessor(final)
	if err := t.inner.Delete(gvr, ns, m.GetName()); err != nil {
		return err
	}
	t.publish(gvr, watch.Event{Type: watch.Deleted, Object: final})
	return nil
}

// emit publishes the stored state of ns/name. t.mu is held.
func (t *Tracker) emit(gvr schema.GroupVersionResource, ns, name string, kind watch.EventType) error {
	stored, err := t.inner.Get(gvr, ns, name)
	if err != nil {
		return err
	}
	t.publish(gvr, watch.Event{Type: kind, Object: stored})
	return nil
}

// publish records an event and hands it to the watchers. t.mu is held.
func (t *Tracker) publish(gvr schema.GroupVersionResource, ev watch.Event) {
	t.history = append(t.history, record{gvr: gvr, rv: t.rv, event: ev})
	if len(t.history) > HistorySize {
		t.history = t.history[len(t.history)-HistorySize:]
	}
	for w := range t.watchers {
		w.send(gvr, ev)
	}
}

// Watch watches gvr in ns (all if ""). With opts.ResourceVersion set, it
// first replays the events after it; a resource version older than the
// history answers 410 Gone, as a server's watch cache does.
func (t *Tracker) Watch(gvr schema.GroupVersionResource, ns string, opts ...metav1.ListOptions) (watch.Interface, error) {
	var o metav1.ListOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	w := &watcher{t: t, gvr: gvr, ns: ns, wake: make(chan struct{}, 1), stopped: make(chan struct{}), result: make(chan watch.Event)}
	var err error
	if w.labels, err = labels.Parse(o.LabelSelector); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if w.fields, err = fields.ParseSelector(o.FieldSelector); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	for _, r := range w.fields.Requirements() {
		if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
			w.fields = fields.Everything() // as the fakes' lists, filter only what every object has
			break
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if o.ResourceVersion != "" && o.ResourceVersion != "0" {
		from, err := strconv.ParseUint(o.ResourceVersion, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q", o.ResourceVersion))
		}
		if len(t.history) > 0 && from+1 < t.history[0].rv {
			return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, t.history[0].rv-1))
		}
		for _, r := range t.history {
			if r.rv > from {
				w.send(r.gvr, r.event)
			}
		}
	}
	t.watchers[w] = struct{}{}
	go w.pump()
	return w, nil
}

// watcher is one watch: an unbounded queue, so a slow consumer never
// blocks a write, pumped to its result channel by one goroutine that ends
// with Stop.
type watcher struct {
	t      *Tracker
	gvr    schema.GroupVersionResource
	ns     string
	labels labels.Selector
	fields fields.Selector

	mu    sync.Mutex // guards queue; a leaf, taken under Tracker.mu
	queue []watch.Event

	wake     chan struct{}
	stopped  chan struct{}
	stopOnce sync.Once
	result   chan watch.Event
}

// send queues ev if the watch selects it.
func (w *watcher) send(gvr schema.GroupVersionResource, ev watch.Event) {
	if gvr != w.gvr {
		return
	}
	m := accessor(ev.Object)
	if (w.ns != "" && m.GetNamespace() != w.ns) || !w.labels.Matches(labels.Set(m.GetLabels())) ||
		!w.fields.Matches(fields.Set{"metadata.name": m.GetName(), "metadata.namespace": m.GetNamespace()}) {
		return
	}
	ev.Object = ev.Object.DeepCopyObject()
	w.mu.Lock()
	w.queue = append(w.queue, ev)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *watcher) pump() {
	defer close(w.result)
	for {
		w.mu.Lock()
		if len(w.queue) == 0 {
			w.mu.Unlock()
			select {
			case <-w.wake:
				continue
			case <-w.stopped:
				return
			}
		}
		ev := w.queue[0]
		w.queue = w.queue[1:]
		w.mu.Unlock()
		select {
		case w.result <- ev:
		case <-w.stopped:
			return
		}
	}
}

// Stop ends the watch.
func (w *watcher) Stop() {
	w.stopOnce.Do(func() {
		w.t.mu.Lock()
		delete(w.t.watchers, w)
		w.t.mu.Unlock()
		close(w.stopped)
	})
}

// ResultChan returns the watch's events.
func (w *watcher) ResultChan() <-chan watch.Event { return w.result }
