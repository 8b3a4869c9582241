package writes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// failureBound only bounds a test that fails; no test measures it.
const failureBound = 10 * time.Second

// errorCollector is a WithErrorHandler that keeps what it is given.
type errorCollector struct {
	mu   sync.Mutex
	errs []error
}

func (c *errorCollector) handle(_ context.Context, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, err)
}

func (c *errorCollector) take() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.errs
	c.errs = nil
	return e
}

// objectJSON is a ConfigMap as a proxied backend (or a server) could
// answer: any namespace, name and resource version it likes.
func objectJSON(rv string) string {
	return `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"namespace":"victim","name":"x","uid":"u","resourceVersion":"` + rv + `"}}`
}

// streamingServer answers every request with body in two chunks: the first
// is flushed, the second waits until the test closes release (or the
// failure bound passes, which closes gaveUp). A transport that buffers the
// body before RoundTrip returns cannot get the first chunk to the client
// before the second is sent.
func streamingServer(t *testing.T, contentType, body string) (srv *httptest.Server, release func(), gaveUp <-chan struct{}) {
	rel, gu := make(chan struct{}), make(chan struct{})
	half := len(body) / 2
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		} else {
			w.Header()["Content-Type"] = nil // no sniffing
		}
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, body[:half])
		w.(http.Flusher).Flush()
		select {
		case <-rel:
		case <-time.After(failureBound):
			close(gu)
		}
		_, _ = io.WriteString(w, body[half:])
	}))
	var once sync.Once
	release = func() { once.Do(func() { close(rel) }) }
	t.Cleanup(srv.Close)
	t.Cleanup(release) // before srv.Close: the handler must not hold it
	return srv, release, gu
}

// streamThrough sends method path through a recording transport to a
// streaming server and checks that the client reads the first chunk while
// the server still holds the second, and then the whole body.
func streamThrough(t *testing.T, rec Recorder, errs *errorCollector, contentType, method, path string) {
	t.Helper()
	body := objectJSON("42")
	srv, release, gaveUp := streamingServer(t, contentType, body)
	client := &http.Client{Transport: NewRoundTripper(srv.Client().Transport, rec, WithErrorHandler(errs.handle))}
	req, err := http.NewRequestWithContext(WithOwner(context.Background(), theOwner), method, srv.URL+path, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, len(body)/2)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	select {
	case <-gaveUp:
		t.Fatalf("%s %s: the client got the first chunk only after the server ended the body: the transport buffered it", method, path)
	default:
	}
	release()
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(first)+string(rest) != body {
		t.Fatalf("%s %s: the client read %q, %v; want %q", method, path, string(first)+string(rest), err, body)
	}
}

// notAPIWrites are writes whose responses are not an API server object:
// proxied backends, streams, and subresources that do not return the
// object.
var notAPIWrites = []struct{ method, path string }{
	{http.MethodPost, "/api/v1/namespaces/ns/pods/p/proxy/events"},
	{http.MethodPut, "/api/v1/namespaces/ns/pods/p:8080/proxy/"},
	{http.MethodPost, "/api/v1/namespaces/ns/services/svc/proxy"},
	{http.MethodPatch, "/api/v1/namespaces/ns/services/https:svc:443/proxy/api/v1/namespaces/victim/configmaps/x"},
	{http.MethodDelete, "/api/v1/nodes/n1/proxy/logs/x"},
	{http.MethodPost, "/api/v1/nodes/n1/proxy"},
	{http.MethodPost, "/api/v1/proxy/namespaces/ns/pods/p"}, // the deprecated top-level proxy
	{http.MethodPost, "/api/v1/namespaces/ns/pods/p/exec"},
	{http.MethodPost, "/api/v1/namespaces/ns/pods/p/attach"},
	{http.MethodPost, "/api/v1/namespaces/ns/pods/p/portforward"},
	{http.MethodPost, "/api/v1/namespaces/ns/pods/p/log"},
	{http.MethodPost, "/api/v1/namespaces/ns/pods/p/eviction"},
	{http.MethodPost, "/api/v1/namespaces/ns/pods/p/binding"},
	{http.MethodPut, "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachines/vm/start"}, // an aggregated server's action
	{http.MethodPut, "/prefix/api/v1/namespaces/ns/services/svc/proxy/api/v1/namespaces/victim/configmaps/x"},
	{http.MethodPost, "/healthz"},
}

// TestNotAPIWritesStreamUnrecorded: a write whose response is not the API
// server's object is neither recorded (a proxied backend would otherwise
// choose what its owner waits for) nor buffered (a streamed answer reaches
// the client as it comes).
func TestNotAPIWritesStreamUnrecorded(t *testing.T) {
	for _, c := range notAPIWrites {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			rec, errs := &fakeRecorder{}, &errorCollector{}
			streamThrough(t, rec, errs, "application/json", c.method, c.path)
			if got := rec.take(); len(got) != 0 {
				t.Errorf("recorded %+v", got)
			}
			if got := errs.take(); len(got) != 0 {
				t.Errorf("reported %v", got)
			}
		})
	}
}

// TestObjectWritesStillRecorded: the object's own writes and the
// subresources that return the object are recorded.
func TestObjectWritesStillRecorded(t *testing.T) {
	for _, c := range []struct{ method, path string }{
		{http.MethodPost, "/api/v1/namespaces/ns/configmaps"},
		{http.MethodPut, "/api/v1/namespaces/ns/configmaps/x"},
		{http.MethodPatch, "/apis/apps/v1/namespaces/ns/deployments/d/status"},
		{http.MethodPut, "/apis/apps/v1/namespaces/ns/deployments/d/scale"},
		{http.MethodPatch, "/api/v1/namespaces/ns/pods/p/ephemeralcontainers"},
		{http.MethodPatch, "/api/v1/namespaces/ns/pods/p/resize"},
		{http.MethodPut, "/api/v1/namespaces/ns/finalize"},
		{http.MethodPut, "/api/v1/namespaces/ns/status"},
		{http.MethodPut, "/api/v1/nodes/n1/status"},
		{http.MethodPut, "/apis/certificates.k8s.io/v1/certificatesigningrequests/c/approval"},
		{http.MethodPut, "/apis/example.com/v1/widgets/w"},
		{http.MethodPut, "/prefix/to/cluster/api/v1/namespaces/ns/configmaps/x"},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			rec := &fakeRecorder{}
			body := objectJSON("42")
			rt := NewRoundTripper(roundTripFunc(func(*http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 200, ContentLength: int64(len(body)), Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body))}, nil
			}), rec, WithErrorHandler(func(_ context.Context, err error) { t.Error(err) }))
			resp, err := rt.RoundTrip(httptest.NewRequestWithContext(WithOwner(context.Background(), theOwner), c.method, "http://x"+c.path, nil))
			if err != nil {
				t.Fatal(err)
			}
			if b, err := io.ReadAll(resp.Body); err != nil || string(b) != body {
				t.Fatalf("client read %q, %v", b, err)
			}
			if got := rec.take(); len(got) != 1 || got[0].rv != "42" {
				t.Fatalf("recorded %+v", got)
			}
		})
	}
}

// TestContentTypeCheckedBeforeBuffering: a write response in a type the
// transport does not decode is passed through as it is (the very body, not
// a copy, streamed), and reported.
func TestContentTypeCheckedBeforeBuffering(t *testing.T) {
	for _, ct := range []string{"text/event-stream", "application/octet-stream", "application/cbor", "application/vnd.kubernetes.cbor", "application/yaml", "text/plain; charset=utf-8", "", "not a media type;;"} {
		t.Run(ct, func(t *testing.T) {
			rec, errs := &fakeRecorder{}, &errorCollector{}
			streamThrough(t, rec, errs, ct, http.MethodPut, "/api/v1/namespaces/ns/configmaps/x")
			if got := rec.take(); len(got) != 0 {
				t.Errorf("recorded %+v", got)
			}
			if got := errs.take(); len(got) != 1 || !errors.Is(got[0], ErrUnsupportedContentType) {
				t.Errorf("reported %v, want one ErrUnsupportedContentType", got)
			}

			orig := io.NopCloser(strings.NewReader(objectJSON("42")))
			rt := NewRoundTripper(roundTripFunc(func(*http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 200, ContentLength: -1, Header: http.Header{"Content-Type": {ct}}, Body: orig}, nil
			}), rec, WithErrorHandler(errs.handle))
			resp, err := rt.RoundTrip(httptest.NewRequestWithContext(WithOwner(context.Background(), theOwner), http.MethodPut, "http://x/api/v1/namespaces/ns/configmaps/x", nil))
			if err != nil || resp.Body != orig {
				t.Fatalf("the client got %v, %v; want the original body", resp.Body, err)
			}
		})
	}
}

// knowingRecorder is a Recorder that knows how far each resource's
// resource versions have got.
type knowingRecorder struct {
	fakeRecorder
	newest map[schema.GroupResource]string
}

func (r *knowingRecorder) NewestKnownResourceVersion(gr schema.GroupResource) string {
	return r.newest[gr]
}

// jsonTransport answers every request with the ConfigMap objectJSON(rv)
// makes for the rv the request's "rv" header names, and method DELETE
// with a 200 (the object gone at that rv).
func jsonTransport() http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		body := objectJSON(req.Header.Get("rv"))
		return &http.Response{StatusCode: 200, ContentLength: int64(len(body)), Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body))}, nil
	})
}

func writeAt(t *testing.T, rt http.RoundTripper, method, path, rv string) {
	t.Helper()
	req := httptest.NewRequestWithContext(WithOwner(context.Background(), theOwner), method, "http://x"+path, nil)
	req.Header.Set("rv", rv)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(resp.Body); err != nil || string(b) != objectJSON(rv) {
		t.Fatalf("client read %q, %v", b, err)
	}
}

const farAhead = "12345678901234567890123456" // 26 digits

// TestImplausibleResourceVersionNotRecorded: a write response whose
// resource version is implausibly far ahead of the newest the recorder
// knows for the resource (or of the newest this transport recorded for it)
// would make the owner wait for a revision the server will not reach for
// ages: it is not recorded, and reported.
func TestImplausibleResourceVersionNotRecorded(t *testing.T) {
	cm := "/api/v1/namespaces/ns/configmaps/x"
	wantRecorded := func(t *testing.T, rec *fakeRecorder, errs *errorCollector, rvs ...string) {
		t.Helper()
		got := rec.take()
		var gotRVs []string
		for _, c := range got {
			gotRVs = append(gotRVs, c.rv)
		}
		if fmt.Sprint(gotRVs) != fmt.Sprint(rvs) {
			t.Errorf("recorded %v, want %v", gotRVs, rvs)
		}
		for _, err := range errs.take() {
			var re *RecordError
			if !errors.Is(err, ErrImplausibleResourceVersion) || !errors.As(err, &re) {
				t.Errorf("reported %v, want an ErrImplausibleResourceVersion", err)
			}
		}
	}

	t.Run("against the recorder's newest", func(t *testing.T) {
		rec, errs := &knowingRecorder{newest: map[schema.GroupResource]string{cmGR: "1000"}}, &errorCollector{}
		rt := NewRoundTripper(jsonTransport(), rec, WithErrorHandler(errs.handle))
		for _, method := range []string{http.MethodPut, http.MethodDelete} {
			writeAt(t, rt, method, cm, farAhead)
			writeAt(t, rt, method, cm, "99999999999") // 10^11: more than ten times 1000 plus 2^32
		}
		if n := len(errs.errs); n != 4 {
			t.Errorf("reported %d errors, want 4", n)
		}
		wantRecorded(t, &rec.fakeRecorder, errs)
		writeAt(t, rt, http.MethodPut, cm, "5000")
		writeAt(t, rt, http.MethodPut, cm, "900")
		wantRecorded(t, &rec.fakeRecorder, errs, "5000", "900")
	})

	t.Run("against this transport's newest", func(t *testing.T) {
		rec, errs := &fakeRecorder{}, &errorCollector{}
		rt := NewRoundTripper(jsonTransport(), rec, WithErrorHandler(errs.handle))
		writeAt(t, rt, http.MethodPut, cm, "100")
		writeAt(t, rt, http.MethodPut, cm, farAhead)
		writeAt(t, rt, http.MethodDelete, cm, farAhead)
		if n := len(errs.errs); n != 2 {
			t.Errorf("reported %d errors, want 2", n)
		}
		writeAt(t, rt, http.MethodPut, cm, "101")
		// Another resource may be served by another server (an aggregated
		// API) whose resource versions are of another size.
		writeAt(t, rt, http.MethodPut, "/apis/metrics.example.com/v1/namespaces/ns/samples/s", "1700000000000000000")
		wantRecorded(t, rec, errs, "100", "101", "1700000000000000000")
	})

	t.Run("logged at a verbosity level by default", func(t *testing.T) {
		sink := &captureSink{}
		ctx := klog.NewContext(WithOwner(context.Background(), theOwner), logr.New(sink))
		rec := &knowingRecorder{newest: map[schema.GroupResource]string{cmGR: "1000"}}
		rt := NewRoundTripper(jsonTransport(), rec)
		req := httptest.NewRequestWithContext(ctx, http.MethodPut, "http://x"+cm, nil)
		req.Header.Set("rv", farAhead)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if got := rec.take(); len(got) != 0 {
			t.Errorf("recorded %+v", got)
		}
		lines := sink.take()
		if len(lines) != 1 || lines[0].level < 1 || !strings.Contains(lines[0].text, "implausible") {
			t.Errorf("logged %+v, want one line at a verbosity level above 0 saying the resource version is implausible", lines)
		}
	})
}

type logLine struct {
	level int
	text  string
}

// captureSink keeps the lines logged through it, with their levels.
type captureSink struct {
	mu    sync.Mutex
	lines []logLine
}

func (s *captureSink) Init(logr.RuntimeInfo) {}
func (s *captureSink) Enabled(int) bool      { return true }
func (s *captureSink) Info(level int, msg string, kv ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, logLine{level, fmt.Sprint(msg, kv)})
}
func (s *captureSink) Error(err error, msg string, kv ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, logLine{-1, fmt.Sprint(msg, err, kv)})
}
func (s *captureSink) WithValues(...any) logr.LogSink { return s }
func (s *captureSink) WithName(string) logr.LogSink   { return s }
func (s *captureSink) take() []logLine {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lines
	s.lines = nil
	return l
}

// TestNoBodyLimit: WithMaxBodyBytes(math.MaxInt64), "no limit", decodes
// and delivers bodies like any other bound.
func TestNoBodyLimit(t *testing.T) {
	srv := apiServer(t)
	rec := &fakeRecorder{}
	cs := kubernetes.NewForConfigOrDie(WrapConfig(&rest.Config{Host: srv.URL}, rec, WithMaxBodyBytes(math.MaxInt64),
		WithErrorHandler(func(_ context.Context, err error) { t.Error(err) })))
	cm, err := cs.CoreV1().ConfigMaps("ns").Update(WithOwner(context.Background(), theOwner), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.UpdateOptions{})
	if err != nil || len(cm.Data["k"]) != 2000 {
		t.Fatalf("client got %v, %v", cm, err)
	}
	if got := rec.take(); len(got) != 1 || got[0].rv != "42" {
		t.Fatalf("recorded %+v", got)
	}
}

// TestDeclaredLengthNotPreallocated: a Content-Length is what the server
// says, not what arrives: the transport neither panics on 2^63-1 nor
// allocates a declared gigabyte before a byte of it came.
func TestDeclaredLengthNotPreallocated(t *testing.T) {
	for _, declared := range []int64{math.MaxInt64, math.MaxInt64 - 1, 1 << 30} {
		t.Run(fmt.Sprint(declared), func(t *testing.T) {
			body := objectJSON("42")
			rec := &fakeRecorder{}
			rt := NewRoundTripper(roundTripFunc(func(*http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 200, ContentLength: declared, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body))}, nil
			}), rec, WithMaxBodyBytes(math.MaxInt64), WithErrorHandler(func(_ context.Context, err error) { t.Error(err) }))
			req := httptest.NewRequestWithContext(WithOwner(context.Background(), theOwner), http.MethodPut, "http://x/api/v1/namespaces/ns/configmaps/x", nil)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			resp := func() (resp *http.Response) {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("RoundTrip panicked: %v", p)
					}
				}()
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				return resp
			}()
			runtime.ReadMemStats(&after)
			if b, err := io.ReadAll(resp.Body); err != nil || string(b) != body {
				t.Fatalf("client read %q, %v", b, err)
			}
			if got := rec.take(); len(got) != 1 || got[0].rv != "42" {
				t.Fatalf("recorded %+v", got)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
				t.Fatalf("RoundTrip allocated %d bytes for a body of %d", n, len(body))
			}
		})
	}
}

// TestBodyBound: without a Content-Length, a body at the bound is decoded
// and one byte more is not; the client reads both whole.
func TestBodyBound(t *testing.T) {
	body := objectJSON("42")
	for _, c := range []struct {
		bound    int64
		recorded bool
	}{{int64(len(body)), true}, {int64(len(body)) - 1, false}, {1, false}, {0, false}} {
		t.Run(fmt.Sprint(c.bound), func(t *testing.T) {
			rec, errs := &fakeRecorder{}, &errorCollector{}
			rt := NewRoundTripper(roundTripFunc(func(*http.Request) (*http.Response, error) {
				// One byte at a time: the buffer grows as bytes arrive.
				return &http.Response{StatusCode: 200, ContentLength: -1, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(oneByteReader{strings.NewReader(body)})}, nil
			}), rec, WithMaxBodyBytes(c.bound), WithErrorHandler(errs.handle))
			resp, err := rt.RoundTrip(httptest.NewRequestWithContext(WithOwner(context.Background(), theOwner), http.MethodPut, "http://x/api/v1/namespaces/ns/configmaps/x", nil))
			if err != nil {
				t.Fatal(err)
			}
			if b, err := io.ReadAll(resp.Body); err != nil || string(b) != body {
				t.Fatalf("client read %q, %v", b, err)
			}
			if got, reported := len(rec.take()) == 1, len(errs.take()) == 1; got != c.recorded || reported == c.recorded {
				t.Fatalf("recorded %v, reported %v; want recorded %v", got, reported, c.recorded)
			}
		})
	}
}

type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}
