package freshctrl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fcache "github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/readyourwrites"
)

// FailIfNotFresh is a Get and List option: instead of waiting, the read
// returns a *readyourwrites.NotFreshError (matching freshness.ErrNotFresh)
// at once when the cache is behind the client's writes. Hand the error to
// a Requeuer to re-queue the request exactly when the cache catches up.
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
// Options.Timeout, and fail with a *readyourwrites.NotFreshError. A write
// no informer can see (outside every namespace and selector) is not waited
// for. Per
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
// The writes are recorded with package readyourwrites, the library's one
// read-your-writes implementation (see the package documentation for how
// writes are routed and deletes proven): each write on behalf of its own
// key, of its namespace and of the whole resource, so that a Get waits for
// the writes to its key, a List for those in its namespace.
//
// Memory: readyourwrites' bounds, per representation (typed, unstructured,
// metadata): records for at most readyourwrites.DefaultMaxOwners keys,
// namespaces and resources written, each evicted after
// readyourwrites.DefaultOwnerIdleTimeout with nothing written to it or
// read of it. What an evicted record's informers have not shown yet is
// folded into one record per kind and informer, which every later read of
// the kind waits for until the informer shows it: a read may then wait for
// more than it needs, never for less (a delete folded so is still waited
// for, until the cache no longer holds the object).
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
	return o.WrapClient(inner, fc, co)
}

// WrapClient is NewClient for a client built elsewhere: it adds
// read-your-writes to c, whose cached reads come from cache with the
// options co (as client.New's do given client.Options{Cache: &co}, co's
// Reader being cache), wrapped or not: interceptors, a test's fake
// (package fake builds its client so). c makes the reads and writes;
// the returned client records the writes and, before a cached read, waits
// for them as NewClient's does.
func (o Options) WrapClient(c client.Client, cache *Cache, co client.CacheOptions) (client.Client, error) {
	if cache == nil {
		return nil, errors.New("freshctrl: WrapClient needs the cache its client reads from")
	}
	return newFreshClient(c, cache, co, o.Timeout)
}

func newFreshClient(inner client.Client, fc *Cache, co client.CacheOptions, timeout time.Duration) (*freshClient, error) {
	return newFreshClientWithBounds(inner, fc, co, timeout, readyourwrites.Options{})
}

// newFreshClientWithBounds is newFreshClient with readyourwrites' bounds
// (MaxOwners, OwnerIdleTimeout, Clock) from bounds (for tests).
func newFreshClientWithBounds(inner client.Client, fc *Cache, co client.CacheOptions, timeout time.Duration, bounds readyourwrites.Options) (*freshClient, error) {
	if timeout <= 0 {
		timeout = fc.reg.timeout
	}
	c := &freshClient{
		Client:            inner,
		cache:             fc,
		timeout:           timeout,
		cacheUnstructured: co.Unstructured,
		uncached:          map[schema.GroupVersionKind]bool{},
		ryw:               map[Representation]*readyourwrites.ReadYourWrites{},
		foreign:           foreignMarks{rv: map[*informerEntry]freshness.RV{}},
	}
	// Every read carries its own deadline (Options.Timeout, WaitTimeout).
	bounds.Timeout = readsHaveTheirOwnDeadline
	for _, rep := range representations() {
		c.ryw[rep] = readyourwrites.NewWithOptions(informersOf{fc.reg, rep}, bounds)
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

// readsHaveTheirOwnDeadline is the ReadYourWrites' own bound, which never
// comes first: every read that waits sets its deadline.
const readsHaveTheirOwnDeadline = 24 * time.Hour

// freshClient is safe for concurrent use: its ReadYourWrites and its
// foreign marks have their own locks, and it holds none while calling them
// or while waiting.
type freshClient struct {
	client.Client
	cache             *Cache
	timeout           time.Duration
	cacheUnstructured bool
	uncached          map[schema.GroupVersionKind]bool
	// ryw records the writes, one per representation: a read waits for
	// the informers it reads from only.
	ryw     map[Representation]*readyourwrites.ReadYourWrites
	foreign foreignMarks
}

// The owners the client records writes on behalf of (a read checks the
// ones it must reflect): the written key, its namespace, and the whole
// resource (a namespace and name of ""). A DeleteAllOf, which names no
// key, is recorded for its namespace's barrier (a name no object can have)
// as well, which reads of keys of that namespace check.
func keyOwner(gk schema.GroupKind, key types.NamespacedName) readyourwrites.Owner {
	return readyourwrites.Owner{GroupKind: gk, NamespacedName: key}
}

func namespaceOwner(gk schema.GroupKind, ns string) readyourwrites.Owner {
	return keyOwner(gk, types.NamespacedName{Namespace: ns})
}

const barrierName = "/deleteallof" // object names never contain "/"

func barrierOwner(gk schema.GroupKind, ns string) readyourwrites.Owner {
	return keyOwner(gk, types.NamespacedName{Namespace: ns, Name: barrierName})
}

// writeOwners are the owners a write of key is recorded for.
func writeOwners(gk schema.GroupKind, key types.NamespacedName) []readyourwrites.Owner {
	owners := []readyourwrites.Owner{keyOwner(gk, key), namespaceOwner(gk, "")}
	if key.Namespace != "" {
		owners = append(owners, namespaceOwner(gk, key.Namespace))
	}
	return owners
}

// readOwners are the owners a read of key (nil: a List of namespace ns,
// "" for all) checks.
func readOwners(gk schema.GroupKind, ns string, key *types.NamespacedName) []readyourwrites.Owner {
	if key != nil {
		owners := []readyourwrites.Owner{keyOwner(gk, *key), barrierOwner(gk, "")}
		if key.Namespace != "" {
			owners = append(owners, barrierOwner(gk, key.Namespace))
		}
		return owners
	}
	owners := []readyourwrites.Owner{namespaceOwner(gk, ns)}
	if ns != "" {
		owners = append(owners, barrierOwner(gk, ""))
	}
	return owners
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
			if err := c.await(ctx, gvk.GroupKind(), representationOf(obj), key.Namespace, &key, ro); err != nil {
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
			if err := c.await(ctx, gvk.GroupKind(), representationOf(list), lo.Namespace, nil, ro); err != nil {
				return err
			}
		}
	}
	return c.Client.List(ctx, list, opts...)
}

// await waits until the informers serving a read of (kind gk in
// representation rep, namespace ns, key or all) have applied the writes
// the read must reflect.
func (c *freshClient) await(ctx context.Context, gk schema.GroupKind, rep Representation, ns string, key *types.NamespacedName, ro readOptions) error {
	if !c.cache.started() {
		// Before Start no informer runs: the read reports
		// ErrCacheNotStarted itself.
		return nil
	}
	if !ro.failFast {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ro.timeout)
		defer cancel()
	}
	ryw := c.ryw[rep]
	for _, owner := range readOwners(gk, ns, key) {
		if err := c.awaitOwner(ctx, ryw, owner, key, ro); err != nil {
			return err
		}
	}
	return c.awaitForeign(ctx, gk, rep, ns, key, ro)
}

// awaitOwner checks (FailIfNotFresh) or waits until the caches hold what
// was recorded for owner, and says which informer is behind if they do
// not.
func (c *freshClient) awaitOwner(ctx context.Context, ryw *readyourwrites.ReadYourWrites, owner readyourwrites.Owner, key *types.NamespacedName, ro readOptions) error {
	if ro.failFast {
		return c.notFresh(ryw.CheckFresh(owner), key, 0, nil)
	}
	start := time.Now()
	err := ryw.EnsureFresh(ctx, owner)
	if err == nil {
		return nil
	}
	waited := time.Since(start)
	var cause *freshness.WaitError
	if errors.As(err, &cause) {
		err = cause // the wait's own words: target, current, waited
	}
	// Which informer is behind, for the error; nil if none is any more.
	return c.notFresh(ryw.CheckFresh(owner), key, waited, err)
}

// notFresh completes readyourwrites' *NotFreshError for a read: the
// informer's name, the key read, the wait. It returns nil for an informer
// not started yet (the read reports what the cache says), anything else
// as it is.
func (c *freshClient) notFresh(err error, key *types.NamespacedName, waited time.Duration, cause error) error {
	var nf *readyourwrites.NotFreshError
	switch {
	case err == nil || errors.Is(err, fcache.ErrNoInformer):
		return nil
	case !errors.As(err, &nf):
		return err
	}
	nf.Name, nf.Waited, nf.Err = c.cache.reg.nameOf(nf.Informer), waited, cause
	if !nf.Deleted && key != nil {
		nf.Key = *key
	}
	return nf
}
