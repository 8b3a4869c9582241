package fake

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/freshinformer/freshinformer/freshctrl"
	"github.com/freshinformer/freshinformer/stalereads"
)

// startTimeout bounds how long Build waits for the cache to start.
const startTimeout = 30 * time.Second

// ClientBuilder builds a Client. Its With methods are those of
// controller-runtime's fake.ClientBuilder that apply here, plus the
// settings of the cache and of freshctrl.
type ClientBuilder struct {
	scheme        *runtime.Scheme
	mapper        meta.RESTMapper
	objects       []client.Object
	lists         []client.ObjectList
	runtimeObjs   []runtime.Object
	statusObjs    []client.Object
	indexes       []index
	interceptors  *interceptor.Funcs
	options       *freshctrl.Options
	cacheOptions  crcache.Options
	clientOptions client.CacheOptions
	failOn        func(stalereads.Report) // FailOnStaleReads
	built         bool
}

type index struct {
	obj     runtime.Object
	field   string
	extract client.IndexerFunc
}

// NewClientBuilder returns a builder of a fake-backed Client.
func NewClientBuilder() *ClientBuilder { return &ClientBuilder{} }

// WithScheme sets the scheme (default: client-go's scheme.Scheme).
func (b *ClientBuilder) WithScheme(s *runtime.Scheme) *ClientBuilder {
	b.scheme = s
	return b
}

// WithRESTMapper sets the REST mapper of the client and the cache
// (default: every kind of the scheme, namespaced unless Kubernetes has it
// cluster-scoped, from apimachinery's testrestmapper).
func (b *ClientBuilder) WithRESTMapper(m meta.RESTMapper) *ClientBuilder {
	b.mapper = m
	return b
}

// WithObjects seeds the server. Each object gets the resource version and
// UID the server stored it with, so a test can write it back.
func (b *ClientBuilder) WithObjects(objs ...client.Object) *ClientBuilder {
	b.objects = append(b.objects, objs...)
	return b
}

// WithLists seeds the server with the lists' items.
func (b *ClientBuilder) WithLists(lists ...client.ObjectList) *ClientBuilder {
	b.lists = append(b.lists, lists...)
	return b
}

// WithRuntimeObjects seeds the server.
func (b *ClientBuilder) WithRuntimeObjects(objs ...runtime.Object) *ClientBuilder {
	b.runtimeObjs = append(b.runtimeObjs, objs...)
	return b
}

// WithStatusSubresource gives the objects' kinds a status subresource, as
// controller-runtime's fake does: Update and Patch leave the status alone,
// Status().Update and Status().Patch change only it.
func (b *ClientBuilder) WithStatusSubresource(objs ...client.Object) *ClientBuilder {
	b.statusObjs = append(b.statusObjs, objs...)
	return b
}

// WithIndex registers a field index on the cache (cache.IndexField), for
// cached Lists with client.MatchingFields, and on the server, for
// Server().List.
func (b *ClientBuilder) WithIndex(obj runtime.Object, field string, extractValue client.IndexerFunc) *ClientBuilder {
	b.indexes = append(b.indexes, index{obj: obj, field: field, extract: extractValue})
	return b
}

// WithInterceptorFuncs intercepts the server's client (controller-runtime's
// interceptor package): the Client's writes and uncached reads, and
// Server's calls. Cached reads are the cache's and are not intercepted.
func (b *ClientBuilder) WithInterceptorFuncs(funcs interceptor.Funcs) *ClientBuilder {
	b.interceptors = &funcs
	return b
}

// WithOptions sets freshctrl's options (the read timeout, metrics). The
// default is freshctrl.Options{DisableMetrics: true}: a test's caches do
// not report to controller-runtime's metrics registry unless asked.
func (b *ClientBuilder) WithOptions(o freshctrl.Options) *ClientBuilder {
	b.options = &o
	return b
}

// FailOnStaleReads turns the stale-read detector on (package stalereads)
// and fails t with each report: a reconciler's test fails when it reads,
// through the cache, older state than it wrote through the Client (reads
// that do not wait: client.DisableReadYourWritesConsistency, or the
// Cache's own). It keeps the other settings of WithOptions. Reports after
// t ends are dropped.
func (b *ClientBuilder) FailOnStaleReads(t testing.TB) *ClientBuilder {
	var mu sync.Mutex
	ended := false
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		ended = true
	})
	b.failOn = func(r stalereads.Report) {
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			t.Errorf("freshctrl/fake: %s", r)
		}
	}
	return b
}

// WithCacheOptions sets the cache's options, as a manager's Cache field
// would (DefaultNamespaces, ByObject, selectors, transforms...). Scheme,
// Mapper and HTTPClient are the fake's; NewInformer must be nil: the fake
// serves the informers.
func (b *ClientBuilder) WithCacheOptions(o crcache.Options) *ClientBuilder {
	b.cacheOptions = o
	return b
}

// WithClientCacheOptions sets which reads bypass the cache, as a manager's
// Client.Cache field would: DisableFor and Unstructured (Reader is the
// fake's cache).
func (b *ClientBuilder) WithClientCacheOptions(o client.CacheOptions) *ClientBuilder {
	b.clientOptions = o
	return b
}

// Build builds the Client and starts its cache; call Stop when done. Like
// controller-runtime's fake builder it panics on a configuration it
// cannot build, and may be called once.
func (b *ClientBuilder) Build() *Client {
	c, err := b.build()
	if err != nil {
		panic(err)
	}
	return c
}

func (b *ClientBuilder) build() (*Client, error) {
	if b.built {
		return nil, errors.New("freshctrl/fake: Build called twice on one ClientBuilder")
	}
	b.built = true
	if b.cacheOptions.NewInformer != nil {
		return nil, errors.New("freshctrl/fake: cache.Options.NewInformer is not supported: the fake serves the informers")
	}
	s := b.scheme
	if s == nil {
		s = scheme.Scheme
	}
	mapper := b.mapper
	if mapper == nil {
		mapper = testrestmapper.TestOnlyStaticRESTMapper(s)
	}
	o := b.freshctrlOptions()
	srv := newServer(s)
	o.NewListerWatcher = srv.listerWatcher // the informers list and watch the fake server
	server := b.serverClient(s, mapper, srv)

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cc, err := b.newCache(ctx, o, s, mapper)
	if err != nil {
		return nil, err
	}
	reads := &cachedReads{Client: server, cache: cc, uncached: map[schema.GroupVersionKind]bool{}, unstructured: b.clientOptions.Unstructured}
	for _, obj := range b.clientOptions.DisableFor {
		gvk, err := apiutil.GVKForObject(obj, s)
		if err != nil {
			return nil, err
		}
		reads.uncached[gvk] = true
	}
	fc, err := o.WrapClient(reads, cc, b.clientOptions)
	if err != nil {
		return nil, err
	}
	return start(ctx, &Client{Client: fc, cache: cc, server: server, srv: srv, done: make(chan struct{})})
}

// freshctrlOptions are the builder's freshctrl.Options, metrics off unless
// given, with the stale-read failure hook.
func (b *ClientBuilder) freshctrlOptions() freshctrl.Options {
	o := freshctrl.Options{DisableMetrics: true}
	if b.options != nil {
		o = *b.options
	}
	if b.failOn != nil {
		o.DetectStaleReads, o.OnStaleRead = true, b.failOn
	}
	return o
}

// serverClient is controller-runtime's fake client over srv, seeded with
// the builder's objects, indexes and interceptors: the server side, which
// writes and uncached reads reach.
func (b *ClientBuilder) serverClient(s *runtime.Scheme, mapper meta.RESTMapper, srv *server) client.WithWatch {
	fb := crfake.NewClientBuilder().WithScheme(s).WithRESTMapper(mapper).WithObjectTracker(srv).
		WithObjects(b.objects...).WithLists(b.lists...).WithRuntimeObjects(b.runtimeObjs...).
		WithStatusSubresource(b.statusObjs...)
	for _, ix := range b.indexes {
		fb = fb.WithIndex(ix.obj, ix.field, ix.extract)
	}
	if b.interceptors != nil {
		fb = fb.WithInterceptorFuncs(*b.interceptors)
	}
	return fb.Build()
}

// newCache makes the freshctrl cache, offline but for the fake server,
// with the builder's field indexes.
func (b *ClientBuilder) newCache(ctx context.Context, o freshctrl.Options, s *runtime.Scheme, mapper meta.RESTMapper) (*freshctrl.Cache, error) {
	co := b.cacheOptions
	co.Scheme, co.Mapper = s, mapper
	co.HTTPClient = &http.Client{Transport: offline{}}
	cc, err := o.NewCache(&rest.Config{Host: "https://freshctrl-fake.invalid"}, co)
	if err != nil {
		return nil, err
	}
	for _, ix := range b.indexes {
		obj, ok := ix.obj.(client.Object)
		if !ok {
			return nil, fmt.Errorf("freshctrl/fake: index %s: %T is not a client.Object", ix.field, ix.obj)
		}
		if err := cc.IndexField(ctx, obj, ix.field, ix.extract); err != nil {
			return nil, fmt.Errorf("freshctrl/fake: index %s: %w", ix.field, err)
		}
	}
	return cc.(*freshctrl.Cache), nil
}

// start runs c's cache until c.Stop and waits, within ctx, for it to sync.
func start(ctx context.Context, c *Client) (*Client, error) {
	c.runCtx, c.stop = context.WithCancel(context.Background())
	go func() {
		defer close(c.done)
		c.startErr = c.cache.Start(c.runCtx)
	}()
	if !c.cache.WaitForCacheSync(ctx) {
		c.Stop()
		return nil, fmt.Errorf("freshctrl/fake: the cache did not start (%v)", c.startErr)
	}
	return c, nil
}

// offline is the cache's HTTP transport: freshctrl stops its scope probes
// before they reach it, and the informers list and watch the fake server,
// so a request that gets here is a defect; it fails, and leaves nothing.
type offline struct{}

func (offline) RoundTrip(req *http.Request) (*http.Response, error) {
	return nil, fmt.Errorf("freshctrl/fake: unexpected request to %s: the fake serves the cache in process", req.URL)
}

// Client is freshctrl's client on a fake API server, for unit tests: a
// client.Client whose writes go to the server (controller-runtime's fake
// client over a freshtest Tracker: resource versions from one counter,
// UIDs, conflicts, finalizers) and whose reads come from a freshctrl Cache
// of FreshInformers over that server, waiting for the client's own writes
// as NewClient's client does: FailIfNotFresh, WaitTimeout,
// client.DisableReadYourWritesConsistency and freshctrl.Requeuer work as
// with a manager.
//
// Reads that client.New's client would send around the cache (kinds in
// WithClientCacheOptions' DisableFor; unstructured objects unless its
// Unstructured is set) go to the fake server directly.
//
// It is safe for concurrent use. Stop it when done: it runs the cache's
// informers.
type Client struct {
	client.Client
	cache    *freshctrl.Cache
	server   client.WithWatch
	srv      *server
	runCtx   context.Context // ends with Stop
	stop     context.CancelFunc
	done     chan struct{}
	startErr error
	stopOnce sync.Once

	requeueMu   sync.Mutex // guards requeuer, queue and stopped
	requeuer    *freshctrl.Requeuer
	queue       *settleQueue
	stopped     bool
	reconcileMu sync.Mutex // one Reconcile at a time
}

var _ client.WithWatch = (*Client)(nil)

// Watch implements client.WithWatch, as controller-runtime's fake client
// does: a watch of the server (not of the cache), never paused.
func (c *Client) Watch(ctx context.Context, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
	return c.server.Watch(ctx, list, opts...)
}

// Cache returns the client's cache: FreshInformers lists its informers,
// GetInformer gives them to event handlers and controllers.
func (c *Client) Cache() *freshctrl.Cache { return c.cache }

// Server returns a client of the fake API server itself, as another
// actor (another controller, a user with kubectl) has: its reads never
// come from the cache and never wait, its writes are not recorded for the
// Client's read-your-writes. Writes through it reach the Client's cache
// like any other change on the server.
func (c *Client) Server() client.WithWatch { return c.server }

// PauseInformers holds the cache's informers behind the server: from now
// on, no watch event or bookmark reaches them (writes still succeed), so
// reads find the cache behind the Client's writes. A read that waits then
// waits until ResumeInformers or its timeout; a FailIfNotFresh read fails
// at once with a *readyourwrites.NotFreshError. Events held back are delivered,
// in order, by ResumeInformers.
//
// It pauses the watches, not the lists: an informer made (or relisting)
// while paused lists the server's current state. Informers are made on a
// kind's first cached read (as in controller-runtime), so read the kinds a
// test pauses on before PauseInformers.
func (c *Client) PauseInformers() { c.srv.pause() }

// PauseInformersFor is PauseInformers, then ResumeInformers after d
// (unless either is called meanwhile): the cache lags by d.
func (c *Client) PauseInformersFor(d time.Duration) { c.srv.pauseFor(d) }

// ResumeInformers lets the informers catch up with the server.
func (c *Client) ResumeInformers() { c.srv.resume() }

// Stop stops the cache and waits until its informers have ended; use the
// Client's cached reads only before it. It may be called more than once.
func (c *Client) Stop() {
	c.stopOnce.Do(func() {
		c.stop()
		<-c.done
		c.requeueMu.Lock()
		defer c.requeueMu.Unlock()
		c.stopped = true
		if c.queue != nil {
			c.queue.ShutDown()
		}
	})
}

// cachedReads is what freshctrl's client wraps: writes go to the fake
// server; reads come from the cache, except those that client.New's
// client would send to the API server (client.CacheOptions).
type cachedReads struct {
	client.Client // the fake server's client
	cache         client.Reader
	uncached      map[schema.GroupVersionKind]bool
	unstructured  bool
}

func (c *cachedReads) fromServer(obj runtime.Object) bool {
	if _, ok := obj.(runtime.Unstructured); ok && !c.unstructured {
		return true
	}
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return false // the cache reports it
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	return c.uncached[gvk]
}

// Create implements client.Writer.
func (c *cachedReads) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.asTyped(obj, func(o client.Object) error { return c.Client.Create(ctx, o, opts...) })
}

// Update implements client.Writer.
func (c *cachedReads) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.asTyped(obj, func(o client.Object) error { return c.Client.Update(ctx, o, opts...) })
}

// SubResource implements client.SubResourceClientConstructor.
func (c *cachedReads) SubResource(sub string) client.SubResourceClient {
	return &subResourceWrites{SubResourceClient: c.Client.SubResource(sub), c: c}
}

// Status implements client.StatusClient.
func (c *cachedReads) Status() client.SubResourceWriter { return c.SubResource("status") }

type subResourceWrites struct {
	client.SubResourceClient
	c *cachedReads
}

// Update implements client.SubResourceWriter.
func (s *subResourceWrites) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return s.c.asTyped(obj, func(o client.Object) error { return s.SubResourceClient.Update(ctx, o, opts...) })
}

// asTyped writes an unstructured object of a kind the scheme has a Go type
// for as that type, and returns the result as the server stored it:
// controller-runtime's fake would convert it to the type itself and hand
// the tracker the copy, so the resource version and UID the server gives
// it would never reach obj.
func (c *cachedReads) asTyped(obj client.Object, write func(client.Object) error) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return write(obj)
	}
	gvk := u.GroupVersionKind()
	typed, err := c.Scheme().New(gvk)
	if err != nil {
		return write(obj)
	}
	t, ok := typed.(client.Object)
	if _, isUnstructured := typed.(runtime.Unstructured); !ok || isUnstructured {
		return write(obj)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), t); err != nil {
		return err
	}
	if err := write(t); err != nil {
		return err
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(t)
	if err != nil {
		return err
	}
	u.SetUnstructuredContent(content)
	u.SetGroupVersionKind(gvk)
	return nil
}

// Get implements client.Reader.
func (c *cachedReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if c.fromServer(obj) {
		return c.Client.Get(ctx, key, obj, opts...)
	}
	return c.cache.Get(ctx, key, obj, opts...)
}

// List implements client.Reader.
func (c *cachedReads) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if c.fromServer(list) {
		return c.Client.List(ctx, list, opts...)
	}
	return c.cache.List(ctx, list, opts...)
}
