package freshctrl

import (
	"container/list"
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fcache "github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/readyourwrites"
)

// ErrNotFresh is matched (errors.Is) by every *NotFreshError: a read found
// the cache behind a write this client made. It is the core library's
// readyourwrites.ErrNotFresh.
var ErrNotFresh = readyourwrites.ErrNotFresh

// NotFreshError says which informer is behind which write: the resource,
// the informer (named after its scope), the written key, the resource
// version the read needed (Target) and the one the cache had reached.
// Err is the cause (a *freshness.WaitError wrapping
// context.DeadlineExceeded on a timeout); it is nil when the read asked
// not to wait (FailIfNotFresh).
type NotFreshError struct {
	Resource schema.GroupResource
	Informer string
	// Key is the written (or deleted) object the read needed; empty for a
	// List waiting for several writes.
	Key types.NamespacedName
	// Target is "" when the read waits for a delete (Deleted is then set).
	Target, Reached string
	Deleted         bool
	Waited          time.Duration
	Err             error

	informer *fcache.FreshInformer
}

func (e *NotFreshError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "freshctrl: %s cache (informer %q) ", e.Resource, e.Informer)
	switch {
	case e.Deleted:
		fmt.Fprintf(&b, "at resource version %s still holds %s, deleted through this client", e.Reached, e.Key)
	case e.Key.Name != "":
		fmt.Fprintf(&b, "reached resource version %s, not %s written to %s", e.Reached, e.Target, e.Key)
	default:
		fmt.Fprintf(&b, "reached resource version %s, not %s written through this client", e.Reached, e.Target)
	}
	if e.Waited > 0 {
		fmt.Fprintf(&b, ", after waiting %v", e.Waited.Round(time.Millisecond))
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *NotFreshError) Unwrap() error { return e.Err }

// Is reports whether target is ErrNotFresh.
func (e *NotFreshError) Is(target error) bool { return target == ErrNotFresh }

// FailIfNotFresh is a Get and List option: instead of waiting, the read
// returns a *NotFreshError at once when the cache is behind the client's
// writes. Hand the error to a Requeuer to re-queue the request exactly
// when the cache catches up.
const FailIfNotFresh = failIfNotFresh(true)

type failIfNotFresh bool

// ApplyToGet implements client.GetOption; the read itself is unchanged.
func (failIfNotFresh) ApplyToGet(*client.GetOptions) {}

// ApplyToList implements client.ListOption; the read itself is unchanged.
func (failIfNotFresh) ApplyToList(*client.ListOptions) {}

// WaitTimeout is a Get and List option that bounds this read's wait for
// the cache instead of Options.Timeout.
type WaitTimeout time.Duration

// ApplyToGet implements client.GetOption; the read itself is unchanged.
func (WaitTimeout) ApplyToGet(*client.GetOptions) {}

// ApplyToList implements client.ListOption; the read itself is unchanged.
func (WaitTimeout) ApplyToList(*client.ListOptions) {}

// NewClient is a controller-runtime client.NewClientFunc: client.New's
// client whose cached reads reflect the writes made through it before the
// read started. Get waits until the informers that can hold the key have
// applied the newest write to it; List waits for every write to the
// resource in the listed namespace; a delete counts once the cache no
// longer holds that UID, or holds it terminating. Waits use the informers'
// applied resource version, which bookmarks advance too, are bounded by
// Options.Timeout, and fail with a *NotFreshError. A write no informer can
// see (outside every namespace and selector) is not waited for. Per
// request, client.DisableReadYourWritesConsistency turns it off, as it does
// for controller-runtime's own option (controller-runtime v0.25 and later;
// v0.24 has no such option).
//
// Read-your-writes needs the cache reader to be NewCache's cache (set
// both manager fields). With any other reader NewClient returns
// client.New's client unchanged, cached reads, ErrResourceNotCached and
// DisableFor included, and says once in the log (Options.Logger) that
// read-your-writes is off. With no cache
// reader the client reads from the server and NewClient returns
// client.New's client. With NewCache's cache,
// CacheOptions.EnableReadYourWritesConsistency (v0.25) is turned off: this
// client replaces it.
//
// Memory: the client keeps the writes reads may still wait for, at most
// 1024 per kind written, each for at most a minute on its own; older or
// further ones the cache has not reached yet are folded into one resource
// version per kind that every read of the kind waits for until the cache
// reaches it (a read may then wait for more than it needs, never for less;
// a delete folded so is no longer waited for).
func NewClient(config *rest.Config, options client.Options) (client.Client, error) {
	return Options{}.NewClient(config, options)
}

// NewClient is the package-level NewClient with o's settings.
func (o Options) NewClient(config *rest.Config, options client.Options) (client.Client, error) {
	if options.Cache == nil || options.Cache.Reader == nil {
		return client.New(config, options)
	}
	fc, ok := options.Cache.Reader.(*Cache)
	if !ok {
		o.logger().Info("the client's cache reader is not freshctrl's cache: read-your-writes is off, cached reads are controller-runtime's own (use freshctrl.NewCache for the cache to turn it on)",
			"reader", fmt.Sprintf("%T", options.Cache.Reader))
		return client.New(config, options)
	}
	co := *options.Cache
	turnOffUpstreamReadYourWrites(&co)
	options.Cache = &co
	inner, err := client.New(config, options)
	if err != nil {
		return nil, err
	}
	return newFreshClient(inner, fc, co, o.Timeout)
}

func newFreshClient(inner client.Client, fc *Cache, co client.CacheOptions, timeout time.Duration) (*freshClient, error) {
	if timeout <= 0 {
		timeout = fc.reg.timeout
	}
	c := &freshClient{
		Client:            inner,
		cache:             fc,
		timeout:           timeout,
		cacheUnstructured: co.Unstructured,
		uncached:          map[schema.GroupVersionKind]bool{},
	}
	c.log = writeLog{
		gks:        map[schema.GroupKind]*kindLog{},
		maxEntries: maxLoggedWrites,
		maxAge:     maxWriteAge,
		clock:      clock.RealClock{},
		settled:    c.settledOne,
	}
	for _, obj := range co.DisableFor {
		gvk, err := inner.GroupVersionKindFor(obj)
		if err != nil {
			return nil, err
		}
		c.uncached[gvk] = true
	}
	return c, nil
}

// freshClient is safe for concurrent use: the write log has its own lock.
type freshClient struct {
	client.Client
	cache             *Cache
	timeout           time.Duration
	cacheUnstructured bool
	uncached          map[schema.GroupVersionKind]bool
	log               writeLog
}

// entry is the newest write through the client to one key.
type entry struct {
	key     types.NamespacedName
	rv      freshness.RV // zero for a delete
	labels  map[string]string
	uid     types.UID
	deleted bool
	barrier bool // DeleteAllOf: every key of key.Namespace ("" all)
}

// Bounds of the write log, per group-kind (see writeLog).
const (
	maxLoggedWrites = 1024
	maxWriteAge     = time.Minute
)

// writeLog holds, per group-kind, the writes reads may still wait for.
//
// Bounds: per group-kind at most maxEntries keyed entries (one per object
// written, or per namespace of a DeleteAllOf) plus one floor, and a keyed
// entry lives at most maxAge; group-kinds are the kinds written through the
// client. Each write checks the floor and the oldest entries only: those
// every informer has reached are dropped (up to two per write, so the log
// drains while the informers keep up); past a bound the oldest are taken
// out anyway, and an unreached one is folded into the group-kind's floor,
// the highest resource version folded, which every informer of the
// group-kind must reach before a read of the kind returns. A read never
// returns before a write it must reflect; past the bounds it may wait for
// more than it needs. An unreached delete has no resource version to fold:
// past a bound it is dropped, and a read may show the deleted object until
// the cache catches up, as a plain controller-runtime client would.
// Inserts are O(1) amortized; a List scans its group-kind's entries.
//
// settled runs on the writing goroutine with mu held: it reads informer
// indexers and the registry and must not call back into the log.
type writeLog struct {
	mu         sync.Mutex
	gks        map[schema.GroupKind]*kindLog
	maxEntries int
	maxAge     time.Duration
	clock      clock.PassiveClock
	settled    func(schema.GroupKind, entry) bool
}

// kindLog is one group-kind's writes, oldest first.
type kindLog struct {
	byKey map[types.NamespacedName]*list.Element // of *loggedWrite
	order list.List
	floor freshness.RV // zero for none
}

type loggedWrite struct {
	entry
	at time.Time
}

// floorKey is where the floor sits among a read's pending entries: a
// barrier of every namespace (a DeleteAllOf of all namespaces raises it).
var floorKey types.NamespacedName

func (l *writeLog) add(gk schema.GroupKind, e entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	kl := l.gks[gk]
	if kl == nil {
		kl = &kindLog{byKey: map[types.NamespacedName]*list.Element{}}
		l.gks[gk] = kl
	}
	now := l.clock.Now()
	switch el := kl.byKey[e.key]; {
	case e.key == floorKey:
		if e.rv.Compare(kl.floor) > 0 {
			kl.floor = e.rv
		}
	case el == nil:
		kl.byKey[e.key] = kl.order.PushBack(&loggedWrite{entry: e, at: now})
	default:
		w := el.Value.(*loggedWrite)
		// Writes to one key racing on several goroutines may be recorded
		// out of order: the higher resource version stands.
		if !(w.deleted || e.deleted) && w.rv.Compare(e.rv) > 0 {
			e = w.entry
		}
		w.entry, w.at = e, now
		kl.order.MoveToBack(el)
	}
	l.trimLocked(gk, kl, now)
}

// trimLocked drops reached entries from the front and enforces the
// bounds. l.mu is held.
func (l *writeLog) trimLocked(gk schema.GroupKind, kl *kindLog, now time.Time) {
	for checked := 0; ; {
		front := kl.order.Front()
		if front == nil {
			break
		}
		w := front.Value.(*loggedWrite)
		over := kl.order.Len() > l.maxEntries || now.Sub(w.at) >= l.maxAge
		if !over && checked >= 2 {
			break
		}
		checked++
		reached := l.settled(gk, w.entry)
		if !over && !reached {
			break
		}
		kl.order.Remove(front)
		delete(kl.byKey, w.key)
		if !reached && !w.deleted && w.rv.Compare(kl.floor) > 0 {
			kl.floor = w.rv
		}
	}
	if !kl.floor.IsZero() && l.settled(gk, entry{key: floorKey, rv: kl.floor, barrier: true}) {
		kl.floor = freshness.RV{}
	}
	if kl.order.Len() == 0 && kl.floor.IsZero() {
		delete(l.gks, gk)
	}
}

// size returns how many entries a group-kind holds, the floor included.
func (l *writeLog) size(gk schema.GroupKind) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	kl := l.gks[gk]
	if kl == nil {
		return 0
	}
	n := kl.order.Len()
	if !kl.floor.IsZero() {
		n++
	}
	return n
}

// pending returns the entries a read of key (nil: a List of namespace ns,
// "" for all) must wait for.
func (l *writeLog) pending(gk schema.GroupKind, ns string, key *types.NamespacedName) []entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	kl := l.gks[gk]
	if kl == nil {
		return nil
	}
	var out []entry
	if !kl.floor.IsZero() {
		out = append(out, entry{key: floorKey, rv: kl.floor, barrier: true})
	}
	if key != nil {
		for _, k := range []types.NamespacedName{*key, {Namespace: key.Namespace}} {
			if el := kl.byKey[k]; el != nil {
				out = append(out, el.Value.(*loggedWrite).entry)
			}
		}
		return out
	}
	for el := kl.order.Front(); el != nil; el = el.Next() {
		if e := el.Value.(*loggedWrite).entry; ns == "" || e.key.Namespace == ns {
			out = append(out, e)
		}
	}
	return out
}

// remove drops entries unless a newer write to their key came meanwhile.
func (l *writeLog) remove(gk schema.GroupKind, done []entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	kl := l.gks[gk]
	if kl == nil {
		return
	}
	for _, d := range done {
		if d.key == floorKey {
			if kl.floor.Compare(d.rv) == 0 {
				kl.floor = freshness.RV{}
			}
			continue
		}
		el := kl.byKey[d.key]
		if el == nil {
			continue
		}
		if cur := el.Value.(*loggedWrite); cur.rv == d.rv && cur.deleted == d.deleted && cur.uid == d.uid {
			kl.order.Remove(el)
			delete(kl.byKey, d.key)
		}
	}
	if kl.order.Len() == 0 && kl.floor.IsZero() {
		delete(l.gks, gk)
	}
}

// bypass reports whether controller-runtime's client reads obj from the
// server rather than the cache.
func (c *freshClient) bypass(obj runtime.Object, gvk schema.GroupVersionKind) bool {
	if c.uncached[gvk] {
		return true
	}
	_, isUnstructured := obj.(runtime.Unstructured)
	return isUnstructured && !c.cacheUnstructured
}

type readOptions struct {
	optOut, failFast bool
	timeout          time.Duration
}

func (c *freshClient) readOptions(opts []any, optOut bool) readOptions {
	ro := readOptions{optOut: optOut, timeout: c.timeout}
	for _, o := range opts {
		switch o := o.(type) {
		case failIfNotFresh:
			ro.failFast = bool(o)
		case WaitTimeout:
			ro.timeout = time.Duration(o)
		}
	}
	return ro
}

// Get implements client.Reader: it waits for the cache to reflect the
// client's writes to key, then reads from the cache.
func (c *freshClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	all := make([]any, len(opts))
	for i, o := range opts {
		all[i] = o
	}
	ro := c.readOptions(all, optedOut((&client.GetOptions{}).ApplyOptions(opts)))
	if !ro.optOut {
		gvk, err := c.GroupVersionKindFor(obj)
		if err != nil {
			return err
		}
		if !c.bypass(obj, gvk) {
			if err := c.await(ctx, gvk, obj, key.Namespace, &key, ro); err != nil {
				return err
			}
		}
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// List implements client.Reader: it waits for the cache to reflect the
// client's writes to the resource in the listed namespace, then lists from
// the cache.
func (c *freshClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	all := make([]any, len(opts))
	for i, o := range opts {
		all[i] = o
	}
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	ro := c.readOptions(all, optedOut(lo))
	if !ro.optOut {
		gvk, err := c.GroupVersionKindFor(list)
		if err != nil {
			return err
		}
		gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
		if !c.bypass(list, gvk) {
			example, err := c.exampleOf(list, gvk)
			if err != nil {
				return err
			}
			if err := c.await(ctx, gvk, example, lo.Namespace, nil, ro); err != nil {
				return err
			}
		}
	}
	return c.Client.List(ctx, list, opts...)
}

// exampleOf returns an object of a list's item kind and representation.
func (c *freshClient) exampleOf(list client.ObjectList, gvk schema.GroupVersionKind) (client.Object, error) {
	switch representationOf(list) {
	case Unstructured:
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return u, nil
	case Metadata:
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		return m, nil
	}
	raw, err := c.Scheme().New(gvk)
	if err != nil {
		return nil, err
	}
	obj, ok := raw.(client.Object)
	if !ok {
		return nil, fmt.Errorf("freshctrl: %T is not a client.Object", raw)
	}
	return obj, nil
}

// await waits until the informers serving a read of (obj's kind and
// representation, namespace ns, key or all) have applied the writes the
// read must reflect.
func (c *freshClient) await(ctx context.Context, gvk schema.GroupVersionKind, obj client.Object, ns string, key *types.NamespacedName, ro readOptions) error {
	gk := gvk.GroupKind()
	entries := c.log.pending(gk, ns, key)
	if len(entries) == 0 || !c.cache.started() {
		// Before Start no informer runs: the read reports
		// ErrCacheNotStarted itself.
		return nil
	}
	rep := representationOf(obj)
	infs := c.cache.reg.lookup(gk, rep)
	if len(infs) == 0 && !c.cache.failOnMissing {
		// The read would make the informer; make it now (it syncs first)
		// so the wait below covers it.
		if _, err := c.cache.GetInformer(ctx, obj); err != nil {
			return nil // the read reports it
		}
		infs = c.cache.reg.lookup(gk, rep)
	}
	if !ro.failFast {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ro.timeout)
		defer cancel()
	}
	for _, inf := range infs {
		if !inf.Scope.covers(ns) {
			continue
		}
		target, deletes := needs(inf, entries)
		if !target.IsZero() {
			if err := c.waitRV(ctx, inf, target, key, ro); err != nil {
				return err
			}
		}
		for _, d := range deletes {
			if err := c.waitDeleted(ctx, inf, d, ro); err != nil {
				return err
			}
		}
	}
	c.log.remove(gk, c.settled(gk, entries))
	return nil
}

// needs returns the newest write inf must reach and the deletes it still
// shows. A write counts for an informer whose scope admits the written
// object or which holds its key (a write can move an object out of a
// selector: the informer sees that as a delete at the write's version).
func needs(inf *informerEntry, entries []entry) (freshness.RV, []entry) {
	var target freshness.RV
	var deletes []entry
	for _, e := range entries {
		if e.barrier {
			if inf.Scope.covers(e.key.Namespace) && e.rv.Compare(target) > 0 {
				target = e.rv
			}
			continue
		}
		held := cached(inf, e.key)
		if e.deleted {
			// A foreign informer cannot be probed for the server's resource
			// version past the delete: its deletes are not waited for.
			if inf.Informer != nil && held != nil && (e.uid == "" || held.GetUID() == e.uid) && held.GetDeletionTimestamp() == nil {
				deletes = append(deletes, e)
			}
			continue
		}
		if (held != nil || inf.Scope.Admits(e.key.Namespace, e.key.Name, e.labels)) && e.rv.Compare(target) > 0 {
			target = e.rv
		}
	}
	return target, deletes
}

// settled returns the entries no informer of gk is behind any more.
func (c *freshClient) settled(gk schema.GroupKind, entries []entry) []entry {
	var done []entry
	for _, e := range entries {
		if c.settledOne(gk, e) {
			done = append(done, e)
		}
	}
	return done
}

// settledOne reports whether no informer of gk is behind e. It is the
// write log's check, run on the writing or reading goroutine.
func (c *freshClient) settledOne(gk schema.GroupKind, e entry) bool {
	for _, inf := range c.cache.reg.all(gk) {
		if !inf.Scope.covers(e.key.Namespace) {
			continue
		}
		target, deletes := needs(inf, []entry{e})
		if len(deletes) > 0 || (!target.IsZero() && !reached(inf, target)) {
			return false
		}
	}
	return true
}

func cached(inf *informerEntry, key types.NamespacedName) metav1.Object {
	k := key.Name
	if key.Namespace != "" {
		k = key.Namespace + "/" + k
	}
	obj, ok, _ := inf.indexer().GetByKey(k)
	if !ok {
		return nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	return m
}

// reached reports whether inf has applied target; an informer that cannot
// say (a foreign one not wrapped) counts as there: nothing can be waited
// for on it.
func reached(inf *informerEntry, target freshness.RV) bool {
	f := inf.freshness()
	if f == nil {
		return true
	}
	cur, err := freshness.ParseRV(f.LastObservedResourceVersion())
	return err == nil && cur.AtLeast(target)
}

func (c *freshClient) waitRV(ctx context.Context, inf *informerEntry, target freshness.RV, key *types.NamespacedName, ro readOptions) error {
	if reached(inf, target) {
		return nil
	}
	f := inf.freshness()
	e := &NotFreshError{Resource: inf.Resource, Informer: inf.name, Target: target.String(), informer: inf.Informer}
	if key != nil {
		e.Key = *key
	}
	if ro.failFast {
		e.Reached = f.LastObservedResourceVersion()
		return e
	}
	start := time.Now()
	err := f.WaitForFreshness(ctx, target.String())
	if err == nil {
		return nil
	}
	e.Waited, e.Err, e.Reached = time.Since(start), err, f.LastObservedResourceVersion()
	return e
}

// waitDeleted waits until inf no longer shows d live. The delete event has
// usually arrived already; otherwise the server's current resource
// version, which is past the delete, is the target (one limit=1 list).
func (c *freshClient) waitDeleted(ctx context.Context, inf *informerEntry, d entry, ro readOptions) error {
	e := &NotFreshError{Resource: inf.Resource, Informer: inf.name, Key: d.key, Deleted: true, informer: inf.Informer}
	if ro.failFast {
		e.Reached = inf.Informer.LastObservedResourceVersion()
		return e
	}
	start := time.Now()
	rv, err := inf.Informer.ProbeResourceVersion(ctx)
	if err == nil {
		e.Target = rv
		err = inf.Informer.WaitForFreshness(ctx, rv)
	}
	if err != nil {
		e.Waited, e.Err, e.Reached = time.Since(start), err, inf.Informer.LastObservedResourceVersion()
		return e
	}
	return nil
}

// record notes a successful write of obj (as the server returned it).
func (c *freshClient) record(obj client.Object) {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return
	}
	rv, err := freshness.ParseRV(obj.GetResourceVersion())
	if err != nil || rv.IsZero() {
		return // an RV that cannot be ordered cannot be waited for
	}
	c.recordEntry(gvk.GroupKind(), entry{key: client.ObjectKeyFromObject(obj), rv: rv, labels: obj.GetLabels(), uid: obj.GetUID()})
}

func (c *freshClient) recordEntry(gk schema.GroupKind, e entry) {
	if !e.rv.IsZero() {
		// Lag and write-to-visible metrics; the key lets a relist that lost
		// the write (etcd restored) be declared.
		written := &metav1.ObjectMeta{Namespace: e.key.Namespace, Name: e.key.Name, ResourceVersion: e.rv.String()}
		for _, inf := range c.cache.reg.all(gk) {
			if inf.Informer != nil {
				_ = inf.Informer.RecordWrittenObject(written)
			}
		}
	}
	c.log.add(gk, e)
}

// Create implements client.Writer.
func (c *freshClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := c.Client.Create(ctx, obj, opts...); err != nil {
		return err
	}
	if !optedOut((&client.CreateOptions{}).ApplyOptions(opts)) {
		c.record(obj)
	}
	return nil
}

// Update implements client.Writer.
func (c *freshClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := c.Client.Update(ctx, obj, opts...); err != nil {
		return err
	}
	if !optedOut((&client.UpdateOptions{}).ApplyOptions(opts)) {
		c.record(obj)
	}
	return nil
}

// Patch implements client.Writer.
func (c *freshClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := c.Client.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	if !optedOut((&client.PatchOptions{}).ApplyOptions(opts)) {
		c.record(obj)
	}
	return nil
}

// Apply implements client.Writer. The written object is read back from the
// apply configuration, which controller-runtime fills with the response.
func (c *freshClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if err := c.Client.Apply(ctx, obj, opts...); err != nil {
		return err
	}
	if !optedOut((&client.ApplyOptions{}).ApplyOptions(opts)) {
		c.recordApplied(obj)
	}
	return nil
}

// recordApplied records an apply configuration's response: unstructured
// ones carry an object; typed ones have the generated metadata fields.
func (c *freshClient) recordApplied(obj runtime.ApplyConfiguration) {
	if u, ok := obj.(interface {
		GetObjectKind() schema.ObjectKind
		client.Object
	}); ok {
		c.record(u)
		return
	}
	v := reflect.ValueOf(obj)
	for v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return
	}
	str := func(name string) string {
		f := v.FieldByName(name)
		if !f.IsValid() || f.Kind() != reflect.Pointer || f.IsNil() || f.Elem().Kind() != reflect.String {
			return ""
		}
		return f.Elem().String()
	}
	gv, err := schema.ParseGroupVersion(str("APIVersion"))
	if err != nil || str("Kind") == "" {
		return
	}
	rv, err := freshness.ParseRV(str("ResourceVersion"))
	if err != nil || rv.IsZero() {
		return
	}
	var lbls map[string]string
	if f := v.FieldByName("Labels"); f.IsValid() {
		lbls, _ = f.Interface().(map[string]string)
	}
	c.recordEntry(gv.WithKind(str("Kind")).GroupKind(), entry{
		key: types.NamespacedName{Namespace: str("Namespace"), Name: str("Name")}, rv: rv, labels: lbls, uid: types.UID(str("UID")),
	})
}

// Delete implements client.Writer. A later read waits until the cache no
// longer holds the deleted object's UID (or holds it terminating).
func (c *freshClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	do := (&client.DeleteOptions{}).ApplyOptions(opts)
	uid := obj.GetUID()
	if do.Preconditions != nil && ptr.Deref(do.Preconditions.UID, "") != "" {
		uid = *do.Preconditions.UID
	}
	if err := c.Client.Delete(ctx, obj, opts...); err != nil {
		return err
	}
	if optedOut(do) {
		return nil
	}
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return nil
	}
	c.log.add(gvk.GroupKind(), entry{key: client.ObjectKeyFromObject(obj), uid: uid, deleted: true})
	return nil
}

// DeleteAllOf implements client.Writer. The response carries no resource
// version, so the client asks the server for its current one afterwards
// (one limit=1 list through an informer of the resource, bounded by
// Options.Timeout) and later reads of the namespace wait for it.
func (c *freshClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	if err := c.Client.DeleteAllOf(ctx, obj, opts...); err != nil {
		return err
	}
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return nil
	}
	ns := (&client.DeleteAllOfOptions{}).ApplyOptions(opts).Namespace
	for _, inf := range c.cache.reg.all(gvk.GroupKind()) {
		if !inf.Scope.covers(ns) || inf.Informer == nil {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, c.timeout)
		s, err := inf.Informer.ProbeResourceVersion(pctx)
		cancel()
		if err != nil {
			return fmt.Errorf("freshctrl: DeleteAllOf succeeded, but asking the server for its resource version failed: %w", err)
		}
		if rv, err := freshness.ParseRV(s); err == nil && !rv.IsZero() {
			c.recordEntry(gvk.GroupKind(), entry{key: types.NamespacedName{Namespace: ns}, rv: rv, barrier: true})
		}
		break
	}
	return nil
}

// Status implements client.StatusClient.
func (c *freshClient) Status() client.SubResourceWriter { return c.SubResource("status") }

// SubResource implements client.SubResourceClientConstructor: updates,
// patches and applies of a subresource (status, scale) are recorded like
// writes of the object.
func (c *freshClient) SubResource(sub string) client.SubResourceClient {
	return &subResourceClient{SubResourceClient: c.Client.SubResource(sub), c: c}
}

type subResourceClient struct {
	client.SubResourceClient
	c *freshClient
}

// Update implements client.SubResourceWriter.
func (s *subResourceClient) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if err := s.SubResourceClient.Update(ctx, obj, opts...); err != nil {
		return err
	}
	if !optedOut((&client.SubResourceUpdateOptions{}).ApplyOptions(opts)) {
		s.c.record(obj)
	}
	return nil
}

// Patch implements client.SubResourceWriter.
func (s *subResourceClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := s.SubResourceClient.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	if !optedOut((&client.SubResourcePatchOptions{}).ApplyOptions(opts)) {
		s.c.record(obj)
	}
	return nil
}

// Apply implements client.SubResourceWriter.
func (s *subResourceClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	if err := s.SubResourceClient.Apply(ctx, obj, opts...); err != nil {
		return err
	}
	if !optedOut((&client.SubResourceApplyOptions{}).ApplyOpts(opts)) {
		s.c.recordApplied(obj)
	}
	return nil
}
