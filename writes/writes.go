// Package writes records a reconciler's writes for read-your-writes without
// touching its write calls. Wrap the rest.Config the controller's clients
// are made from, and give each reconcile a context that names its owner:
//
//	cfg = writes.WrapConfig(cfg, ryw) // ryw is a *readyourwrites.ReadYourWrites
//	client := kubernetes.NewForConfig(cfg) // or dynamic, or a REST client
//	...
//	func (c *Controller) reconcile(ctx context.Context, key string) error {
//		parent, err := c.lister.Get(...)
//		ctx = writes.WithOwner(ctx, readyourwrites.OwnerOf(parent)) // the one line
//		...
//		_, err = c.client.CoreV1().ConfigMaps(ns).Update(ctx, child, opts) // recorded
//
// The transport sees every request of every client made from the config.
// It records a write only when all of these hold: it is a create, update,
// patch (server-side apply included) or delete made with an owner in its
// context; it succeeded (2xx) and is not a dry run; its path names an API
// resource (/api/v1/... or /apis/GROUP/VERSION/..., namespaced or
// cluster-scoped) and either the object itself or one of the subresources
// that answer with the object: status, scale, ephemeralcontainers, resize,
// finalize (of a namespace) and approval (of a certificate signing
// request); and the response is JSON or Kubernetes protobuf. It then
// decodes only the response's metadata, takes the resource from the URL,
// and calls Record or RecordDelete. The response body stays fully readable
// by the client, byte for byte.
//
// Never recorded, and passed through untouched (never buffered, so a
// streamed answer reaches the client as it comes): reads, lists, watches,
// failed writes, dry runs, requests without an owner, deletecollections;
// the proxy subresources of pods, services and nodes and the deprecated
// top-level proxy (their answers are a backend's, which could name any
// object and resource version); exec, attach, portforward and log; every
// other subresource, an aggregated API server's actions included; and
// pods' eviction and binding, which answer with a Status that carries
// neither the pod's UID nor a resource version (to read an evicted pod
// gone, record its delete with ReadYourWrites.Deleted).
//
// Nor does a response make its owner wait for a resource version
// implausibly far ahead (see reflector.Plausible) of the newest one known
// for its resource: the recorder's, when it implements NewestKnower, and
// the newest this transport recorded for the resource on the same host
// (with none known yet, any is plausible, as for an informer before its
// first list). Such a write is reported as ErrImplausibleResourceVersion
// instead.
//
// What it cannot see: client-go's fake clientsets do not go through HTTP
// (in unit tests on fakes, record with ReadYourWrites.Record or Wrote);
// a scale subresource answers with a Scale, whose metadata carries the
// object's name and resource version but not its labels, so an informer
// filtered by labels reports it as not watched (cache.ErrNotWatched); CBOR
// and other responses the transport does not decode are passed through
// unread and reported as ErrUnsupportedContentType. Writes that could not be recorded go to the
// error handler (WithErrorHandler; by default a log line at verbosity 4
// for writes no informer watches, 2 otherwise).
//
// With the stale-write detector on (WithStaleWriteDetection, or
// FRESHINFORMER_DEBUG=stalereads=1: see package stalereads), the transport
// also reads a copy of each update's and patch's body (GetBody, never the
// body the server gets) for its resourceVersion precondition, and reports
// one older than the newest resource version it recorded for the object.
package writes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/apipath"
	"github.com/freshinformer/freshinformer/internal/detector"
	"github.com/freshinformer/freshinformer/readyourwrites"
	"github.com/freshinformer/freshinformer/reflector"
	"github.com/freshinformer/freshinformer/stalereads"
)

// Recorder receives the writes. *readyourwrites.ReadYourWrites implements it.
type Recorder interface {
	// Record notes an object as a create, update, patch or subresource
	// write returned it.
	Record(owner readyourwrites.Owner, gr schema.GroupResource, written metav1.Object) error
	// RecordDelete notes a deleted object (from the DELETE response: the
	// object, or only its name and UID when the server returned a Status).
	RecordDelete(owner readyourwrites.Owner, gr schema.GroupResource, deleted metav1.Object) error
}

// NewestKnower is implemented by a Recorder that knows the newest resource
// version the server has reached for a resource (from its informers, say).
// The transport then records no write whose resource version is
// implausibly far ahead of it.
type NewestKnower interface {
	// NewestKnownResourceVersion returns the newest resource version known
	// for gr, or "" if none is.
	NewestKnownResourceVersion(gr schema.GroupResource) string
}

var (
	_ Recorder     = (*readyourwrites.ReadYourWrites)(nil)
	_ NewestKnower = (*readyourwrites.ReadYourWrites)(nil)
)

type ownerKey struct{}

// WithOwner returns a context under which every successful write made
// through a wrapped transport is recorded on behalf of owner.
func WithOwner(ctx context.Context, owner readyourwrites.Owner) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// OwnerFrom returns the owner WithOwner put in ctx.
func OwnerFrom(ctx context.Context) (readyourwrites.Owner, bool) {
	o, ok := ctx.Value(ownerKey{}).(readyourwrites.Owner)
	return o, ok
}

// RecordError says why a successful write could not be recorded. It
// unwraps to the cause: cache.ErrNotWatched or cache.ErrNoInformer (no
// informer could see the object: nothing to wait for),
// freshness.ErrIncomparable, ErrUnsupportedContentType,
// ErrImplausibleResourceVersion, or a decoding error.
type RecordError struct {
	Method, Path string
	Err          error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("recording %s %s: %v", e.Method, e.Path, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// ErrImplausibleResourceVersion is matched by the error reported for a
// write response whose resource version is implausibly far ahead of the
// newest known for its resource (see reflector.Plausible): waiting for it
// would time out on every reconcile, so that write is not recorded.
var ErrImplausibleResourceVersion = errors.New("writes: implausible resource version, far ahead of the newest known for the resource")

// Option configures the transport.
type Option func(*roundTripper)

// WithErrorHandler has the transport call h for each write it could not
// record (a *RecordError) instead of logging it. h runs on the request's
// goroutine before the client sees the response: it must be quick.
func WithErrorHandler(h func(ctx context.Context, err error)) Option {
	return func(rt *roundTripper) { rt.onError = h }
}

// WithMaxBodyBytes bounds the response bodies the transport decodes
// (default 16 MiB, far above what etcd stores per object; math.MaxInt64
// for no bound); a larger write response passes through unrecorded, with
// a RecordError. The buffer grows as the body arrives, whatever its
// Content-Length says.
func WithMaxBodyBytes(n int64) Option {
	return func(rt *roundTripper) { rt.maxBody = max(n, 0) }
}

// WithStaleWriteDetection turns the stale-write detector on (package
// stalereads; the environment variable stalereads.EnvVar turns it on
// too): an update or patch whose resourceVersion precondition is older
// than the newest this transport recorded for the object (on the same
// host) is counted (WithStaleWriteCounter), handed to onReport if not nil
// and logged otherwise (WithStaleWriteLogging logs it too), and sent on
// unchanged. With reports logged, the transport logs one line at its
// first write saying the detector is on. The transport then remembers the
// resource versions of the MaxStaleWriteKeys objects it recorded last.
// onReport runs on the request's goroutine before the request is sent: it
// must be quick.
func WithStaleWriteDetection(onReport func(stalereads.Report)) Option {
	return func(rt *roundTripper) { rt.detect, rt.onStale = true, onReport }
}

// WithStaleWriteLogging logs the stale-write detector's reports even when
// onReport (WithStaleWriteDetection) receives them. It does not turn the
// detector on.
func WithStaleWriteLogging() Option {
	return func(rt *roundTripper) { rt.logStale = true }
}

// StaleWriteCounter counts the stale writes a transport's detector finds.
// *metrics.Provider implements it (freshinformer_stale_writes_total).
type StaleWriteCounter interface {
	// AddStaleWrites adds n stale writes of gr. The transport calls it
	// with 0 at each write it records, so that the count of a resource is
	// there, at 0, before its first stale write (what Prometheus'
	// increase needs to see the first one). It must be quick.
	AddStaleWrites(gr schema.GroupResource, n int)
}

// WithStaleWriteCounter has the stale-write detector count its reports on
// c; without it, they are not counted. The counts are c's: give each
// transport the metrics.Provider of the informers it writes for. It does
// not turn the detector on.
func WithStaleWriteCounter(c StaleWriteCounter) Option {
	return func(rt *roundTripper) { rt.staleCounter = c }
}

// MaxStaleWriteKeys bounds the objects whose last written resource
// version the stale-write detector remembers.
const MaxStaleWriteKeys = detector.MaxEntries

// WrapConfig returns a copy of cfg whose clients record writes on rec.
// Clients made from cfg itself are not affected.
func WrapConfig(cfg *rest.Config, rec Recorder, opts ...Option) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(next http.RoundTripper) http.RoundTripper { return NewRoundTripper(next, rec, opts...) })
	return c
}

// NewRoundTripper returns a transport that records on rec the writes it
// carries to next, for clients not made from a rest.Config.
func NewRoundTripper(next http.RoundTripper, rec Recorder, opts ...Option) http.RoundTripper {
	rt := &roundTripper{next: next, rec: rec, maxBody: 16 << 20, onError: logError, floors: map[floorKey]freshness.RV{}}
	rt.knower, _ = rec.(NewestKnower)
	for _, o := range opts {
		o(rt)
	}
	if mode := detector.FromEnv(); rt.detect || mode != detector.Off {
		cfg := detector.WritesConfig{OnReport: rt.onStale, LogReports: rt.logStale, Halt: mode == detector.Halt}
		if rt.staleCounter != nil {
			cfg.Count = rt.staleCounter.AddStaleWrites
		}
		rt.stale = detector.NewWrites(cfg)
	}
	return rt
}

type roundTripper struct {
	next    http.RoundTripper
	rec     Recorder
	knower  NewestKnower // rec, if it is one
	maxBody int64
	onError func(context.Context, error)

	mu     sync.Mutex                // guards floors; a leaf
	floors map[floorKey]freshness.RV // the newest plausible resource version recorded

	detect       bool                    // WithStaleWriteDetection
	onStale      func(stalereads.Report) // WithStaleWriteDetection
	logStale     bool                    // WithStaleWriteLogging
	staleCounter StaleWriteCounter       // WithStaleWriteCounter
	stale        *detector.Writes        // nil: the stale-write detector is off
}

// floorKey scopes what the transport knows of resource versions: one
// resource on one server (an aggregated API server counts its own, and a
// transport shared by clients of several clusters sees several).
type floorKey struct {
	host string
	gr   schema.GroupResource
}

func logError(ctx context.Context, err error) {
	if errors.Is(err, cache.ErrNotWatched) || errors.Is(err, cache.ErrNoInformer) {
		klog.FromContext(ctx).V(4).Info("Write not recorded for read-your-writes", "err", err)
		return
	}
	klog.FromContext(ctx).V(2).Info("Write not recorded for read-your-writes", "err", err)
}

// WrappedRoundTripper returns the transport this one wraps, as client-go's
// transports do.
func (rt *roundTripper) WrappedRoundTripper() http.RoundTripper { return rt.next }

// RoundTrip implements http.RoundTripper.
func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return rt.next.RoundTrip(req)
	}
	if rt.stale != nil {
		rt.stale.Started(klog.FromContext(req.Context())) // says, once, that it is on
		if req.Method == http.MethodPut || req.Method == http.MethodPatch {
			rt.checkStale(req)
		}
	}
	owner, ok := OwnerFrom(req.Context())
	if !ok {
		return rt.next.RoundTrip(req)
	}
	resp, err := rt.next.RoundTrip(req)
	if err != nil || resp.StatusCode < 200 || resp.StatusCode > 299 || resp.Body == nil {
		return resp, err
	}
	if req.URL.RawQuery != "" && req.URL.Query().Has("dryRun") {
		return resp, nil
	}
	t, ok := objectWrite(req)
	if !ok {
		return resp, nil
	}
	if err := rt.record(req, resp, owner, t); err != nil {
		rt.onError(req.Context(), &RecordError{Method: req.Method, Path: req.URL.Path, Err: err})
	}
	return resp, nil
}

// objectWrite reads the target of a write from its path, and reports
// whether the API server answers it with the written object: a write of
// the object itself or of a subresource that returns it. Anything else (a
// proxy, a stream, an action, a deletecollection) is not the server's own
// state of an object.
func objectWrite(req *http.Request) (apipath.Target, bool) {
	t, ok := apipath.Parse(req.URL.Path)
	if !ok {
		return t, false // the top-level proxy, discovery, ...
	}
	switch t.Subresource {
	case "":
		// A deletecollection answers with a list.
		return t, t.Name != "" || req.Method != http.MethodDelete
	case "status", "scale", "ephemeralcontainers", "resize", "finalize", "approval":
		return t, true
	}
	// proxy/..., exec, attach, portforward, log, eviction, binding, token,
	// an aggregated server's action: not the object.
	return t, false
}

// record reads the body (handing the client the same bytes back) and
// records the write it reports.
func (rt *roundTripper) record(req *http.Request, resp *http.Response, owner readyourwrites.Owner, t apipath.Target) error {
	if enc := resp.Header.Get("Content-Encoding"); enc != "" && enc != "identity" {
		return fmt.Errorf("%w: encoded with %q", ErrUnsupportedContentType, enc)
	}
	mediaType, err := decodable(resp.Header.Get("Content-Type"))
	if err != nil {
		return err // before reading: the body is not ours to buffer
	}
	if resp.ContentLength > rt.maxBody {
		return fmt.Errorf("response of %d bytes is over the %d bytes decoded", resp.ContentLength, rt.maxBody)
	}
	body, readErr := readUpTo(resp.Body, rt.maxBody, resp.ContentLength)
	replay := &replayBody{buf: body, rest: resp.Body, readErr: readErr}
	resp.Body = replay
	if readErr != nil {
		return readErr // the client gets the same error after the same bytes
	}
	if int64(len(body)) > rt.maxBody {
		replay.tail = true
		return fmt.Errorf("response is over the %d bytes decoded", rt.maxBody)
	}
	d, err := decodeMeta(mediaType, body)
	if err != nil {
		return err
	}
	switch {
	case d.status && req.Method == http.MethodDelete:
		name := d.name
		if name == "" {
			name = t.Name
		}
		return rt.rec.RecordDelete(owner, t.Resource, &metav1.ObjectMeta{Namespace: t.Namespace, Name: name, UID: types.UID(d.uid)})
	case d.status: // nothing the response can tell
	case d.meta.ResourceVersion == "": // not persisted (a review, a token request)
	default:
		if err := rt.plausible(req.URL.Host, t.Resource, d.meta.ResourceVersion); err != nil {
			return err
		}
		if rt.stale != nil {
			rt.stale.Wrote(detector.WriteKey{Host: req.URL.Host, Resource: t.Resource, Namespace: t.Namespace, Name: d.meta.Name}, d.meta.ResourceVersion)
		}
		if req.Method == http.MethodDelete && resp.StatusCode == http.StatusOK { // gone, at the deletion's resource version
			return rt.rec.RecordDelete(owner, t.Resource, &d.meta)
		}
		// Written; a 202 delete left it in place, marked for deletion.
		return rt.rec.Record(owner, t.Resource, &d.meta)
	}
	return nil
}

// checkStale reports an update or patch of an object that carries a
// resource version older than the newest this transport recorded for it.
// It reads a copy of the body (GetBody), never the body itself.
func (rt *roundTripper) checkStale(req *http.Request) {
	t, ok := objectWrite(req)
	if !ok || t.Name == "" || req.GetBody == nil {
		return
	}
	body, err := req.GetBody()
	if err != nil {
		return
	}
	data, err := readUpTo(body, rt.maxBody, req.ContentLength)
	_ = body.Close()
	if err != nil || int64(len(data)) > rt.maxBody {
		return
	}
	op := "update"
	if req.Method == http.MethodPatch {
		op = "patch"
	}
	rv := sentResourceVersion(req.Header.Get("Content-Type"), data)
	rt.stale.Check(klog.FromContext(req.Context()), detector.WriteKey{Host: req.URL.Host, Resource: t.Resource, Namespace: t.Namespace, Name: t.Name}, op, rv)
}

// plausible returns an error matching ErrImplausibleResourceVersion if rvs
// is implausibly far ahead of the newest resource version known for gr on
// host (reflector.Plausible's rule, the one the informers' streams are
// held to), and otherwise makes it the newest known if it is. A malformed
// rvs is left to the Recorder to report.
func (rt *roundTripper) plausible(host string, gr schema.GroupResource, rvs string) error {
	rv, err := freshness.ParseRV(rvs)
	if err != nil {
		return nil
	}
	var known freshness.RV
	if rt.knower != nil {
		known, _ = freshness.ParseRV(rt.knower.NewestKnownResourceVersion(gr))
	}
	k := floorKey{host, gr}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	floor := rt.floors[k]
	if known.Compare(floor) > 0 {
		floor = known
	}
	if !reflector.Plausible(rv, floor) {
		return fmt.Errorf("%w: %s, newest known %s", ErrImplausibleResourceVersion, truncate(rvs), floor.String())
	}
	if rv.Compare(rt.floors[k]) > 0 {
		rt.floors[k] = rv
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// maxPrealloc bounds the buffer allocated for a body before any of it
// arrived: a Content-Length is only what the server declares.
const maxPrealloc = 64 << 10

// readUpTo reads r until EOF or until it has read more than limit bytes
// (one more, to tell a body over the bound), growing its buffer as bytes
// arrive from a capacity that fits a body of declared bytes (-1: unknown)
// up to maxPrealloc.
func readUpTo(r io.Reader, limit, declared int64) ([]byte, error) {
	if limit < math.MaxInt64 {
		limit++
	}
	size := int64(4096)
	if declared >= 0 {
		size = min(declared, maxPrealloc) + 1 // +1: the read that meets EOF needs no growth
	}
	buf := make([]byte, 0, min(size, limit))
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) >= limit {
				return buf, nil
			}
			buf = slices.Grow(buf, int(min(int64(cap(buf)), limit-int64(len(buf))))) // doubling, up to limit
		}
		n, err := r.Read(buf[len(buf):int(min(int64(cap(buf)), limit))])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// replayBody gives the client the bytes the transport read, then whatever
// followed: the rest of the original body (past the decoding bound) or the
// read error it met.
type replayBody struct {
	buf     []byte
	rest    io.ReadCloser
	readErr error
	tail    bool // continue with rest once buf is drained
}

func (b *replayBody) Read(p []byte) (int, error) {
	if len(b.buf) > 0 {
		n := copy(p, b.buf)
		b.buf = b.buf[n:]
		if len(b.buf) == 0 {
			b.buf = nil // let the copy go
		}
		return n, nil
	}
	switch {
	case b.readErr != nil:
		return 0, b.readErr
	case b.tail:
		return b.rest.Read(p)
	}
	return 0, io.EOF
}

func (b *replayBody) Close() error { return b.rest.Close() }
