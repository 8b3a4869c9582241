// Package writes records a reconciler's writes for read-your-writes without
// touching its write calls. Wrap the rest.Config the controller's clients
// are made from, and give each reconcile a context that names its owner:
//
//	cfg = writes.WrapConfig(cfg, ryw) // ryw is a *cache.ReadYourWrites
//	client := kubernetes.NewForConfig(cfg) // or dynamic, or a REST client
//	...
//	func (c *Controller) reconcile(ctx context.Context, key string) error {
//		parent, err := c.lister.Get(...)
//		ctx = writes.WithOwner(ctx, cache.OwnerOf(parent)) // the one line
//		...
//		_, err = c.client.CoreV1().ConfigMaps(ns).Update(ctx, child, opts) // recorded
//
// The transport sees every request of every client made from the config.
// For a successful (2xx) create, update, patch (server-side apply
// included), subresource write (status, scale, ...) or delete made with
// an owner in its context, it decodes only the response's metadata (JSON
// or Kubernetes protobuf), takes the resource from the URL, and calls
// Record or RecordDelete. Everything else (reads, lists, watches, failed
// writes, dry runs, requests without an owner) passes through untouched.
// The response body stays fully readable by the client, byte for byte.
//
// What it cannot see: client-go's fake clientsets do not go through HTTP
// (in unit tests on fakes, record with ReadYourWrites.Record or Wrote);
// a scale subresource answers with a Scale, whose metadata carries the
// object's name and resource version but not its labels, so an informer
// filtered by labels reports it as not watched (cache.ErrNotWatched); CBOR
// responses are reported as ErrUnsupportedContentType. Writes that could
// not be recorded go to the error handler (WithErrorHandler; by default a
// log line at verbosity 4 for writes no informer watches, 2 otherwise).
package writes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/internal/apipath"
)

// Recorder receives the writes. *cache.ReadYourWrites implements it.
type Recorder interface {
	// Record notes an object as a create, update, patch or subresource
	// write returned it.
	Record(owner cache.Owner, gr schema.GroupResource, written metav1.Object) error
	// RecordDelete notes a deleted object (from the DELETE response: the
	// object, or only its name and UID when the server returned a Status).
	RecordDelete(owner cache.Owner, gr schema.GroupResource, deleted metav1.Object) error
}

var _ Recorder = (*cache.ReadYourWrites)(nil)

type ownerKey struct{}

// WithOwner returns a context under which every successful write made
// through a wrapped transport is recorded on behalf of owner.
func WithOwner(ctx context.Context, owner cache.Owner) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// OwnerFrom returns the owner WithOwner put in ctx.
func OwnerFrom(ctx context.Context) (cache.Owner, bool) {
	o, ok := ctx.Value(ownerKey{}).(cache.Owner)
	return o, ok
}

// RecordError says why a successful write could not be recorded. It
// unwraps to the cause: cache.ErrNotWatched or cache.ErrNoInformer (no
// informer could see the object: nothing to wait for),
// freshness.ErrIncomparable, ErrUnsupportedContentType, or a decoding
// error.
type RecordError struct {
	Method, Path string
	Err          error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("recording %s %s: %v", e.Method, e.Path, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// Option configures the transport.
type Option func(*roundTripper)

// WithErrorHandler has the transport call h for each write it could not
// record (a *RecordError) instead of logging it. h runs on the request's
// goroutine before the client sees the response: it must be quick.
func WithErrorHandler(h func(ctx context.Context, err error)) Option {
	return func(rt *roundTripper) { rt.onError = h }
}

// WithMaxBodyBytes bounds the response bodies the transport decodes
// (default 16 MiB, far above what etcd stores per object); a larger write
// response passes through unrecorded, with a RecordError.
func WithMaxBodyBytes(n int64) Option {
	return func(rt *roundTripper) { rt.maxBody = n }
}

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
	rt := &roundTripper{next: next, rec: rec, maxBody: 16 << 20, onError: logError}
	for _, o := range opts {
		o(rt)
	}
	return rt
}

type roundTripper struct {
	next    http.RoundTripper
	rec     Recorder
	maxBody int64
	onError func(context.Context, error)
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
	owner, ok := OwnerFrom(req.Context())
	if !ok {
		return rt.next.RoundTrip(req)
	}
	resp, err := rt.next.RoundTrip(req)
	if err != nil || resp.StatusCode < 200 || resp.StatusCode > 299 || resp.Body == nil {
		return resp, err
	}
	if req.URL.Query().Has("dryRun") {
		return resp, nil
	}
	t, ok := apipath.Parse(req.URL.Path)
	if !ok || t.Name == "" && req.Method == http.MethodDelete { // a deletecollection returns a list
		return resp, nil
	}
	if err := rt.record(req, resp, owner, t); err != nil {
		rt.onError(req.Context(), &RecordError{Method: req.Method, Path: req.URL.Path, Err: err})
	}
	return resp, nil
}

// record reads the body (handing the client the same bytes back) and
// records the write it reports.
func (rt *roundTripper) record(req *http.Request, resp *http.Response, owner cache.Owner, t apipath.Target) error {
	if enc := resp.Header.Get("Content-Encoding"); enc != "" && enc != "identity" {
		return fmt.Errorf("%w: encoded with %q", ErrUnsupportedContentType, enc)
	}
	if resp.ContentLength > rt.maxBody {
		return fmt.Errorf("response of %d bytes is over the %d bytes decoded", resp.ContentLength, rt.maxBody)
	}
	size := resp.ContentLength
	if size < 0 {
		size = 4096
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+1)) // +1: ReadFrom stops without growing
	_, readErr := buf.ReadFrom(io.LimitReader(resp.Body, rt.maxBody+1))
	body := buf.Bytes()
	resp.Body = &replayBody{r: bytes.NewReader(body), rest: resp.Body, readErr: readErr}
	if readErr != nil {
		return readErr // the client gets the same error after the same bytes
	}
	if int64(len(body)) > rt.maxBody {
		resp.Body.(*replayBody).tail = true
		return fmt.Errorf("response is over the %d bytes decoded", rt.maxBody)
	}
	d, err := decodeMeta(resp.Header.Get("Content-Type"), body)
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
	case d.status: // an eviction, a binding: nothing the response can tell
	case d.meta.ResourceVersion == "": // not persisted (a review, a token request)
	case req.Method == http.MethodDelete && resp.StatusCode == http.StatusOK: // gone, at the deletion's resource version
		return rt.rec.RecordDelete(owner, t.Resource, &d.meta)
	default: // written; a 202 delete left it in place, marked for deletion
		return rt.rec.Record(owner, t.Resource, &d.meta)
	}
	return nil
}

// replayBody gives the client the bytes the transport read, then whatever
// followed: the rest of the original body (past the decoding bound) or the
// read error it met.
type replayBody struct {
	r       *bytes.Reader
	rest    io.ReadCloser
	readErr error
	tail    bool // continue with rest once r is drained
}

func (b *replayBody) Read(p []byte) (int, error) {
	if b.r.Len() > 0 {
		return b.r.Read(p)
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
