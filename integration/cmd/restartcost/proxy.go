package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http2"
	"k8s.io/client-go/rest"
)

// countingProxy is one side's way to the apiserver: a reverse proxy
// (net/http/httputil) on a loopback port of its own, which the side's
// clientset talks plain HTTP/1.1 to, and which forwards every request with
// the admin credentials over a transport of its own (so the two sides share
// no connection). It counts every byte of its client connections as it
// flows (requests sent, responses received: headers, bodies, chunk framing,
// watch streams as they stream) and logs every request.
//
// It mirrors the apiserver's port: down (listener and every client
// connection closed) while the apiserver is down, up again on the same port
// as soon as the apiserver's port accepts connections. Without that, a
// client would get 502 Bad Gateway from the proxy during the outage where,
// talking to the apiserver directly, it gets "connection refused", and
// client-go treats the two differently (a refused watch is retried from
// the same resource version; any other watch error makes the Reflector
// relist). Requests refused while it is down never reach it and are not
// counted, as they would never reach the apiserver.
type countingProxy struct {
	side   string
	addr   string // host:port, kept across down/up
	rp     *httputil.ReverseProxy
	upRT   http.RoundTripper
	logger *requestLog

	sent, received atomic.Uint64 // client connection bytes: requests in, responses out
	requests       atomic.Uint64
	lastActive     atomic.Int64 // unix nanos of the last byte or request
	upAt           atomic.Int64 // unix nanos of the last time it started listening

	mu   sync.Mutex
	srv  *http.Server
	ln   net.Listener
	isUp bool
}

// newCountingProxy returns side's proxy to cfg's server, through rt.
func newCountingProxy(side string, cfg *rest.Config, rt http.RoundTripper, logger *requestLog) (*countingProxy, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	p := &countingProxy{side: side, upRT: rt, logger: logger}
	p.rp = &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:     rt,
		FlushInterval: -1, // watch events go out as they come
		ModifyResponse: func(resp *http.Response) error {
			if rec, ok := resp.Request.Context().Value(recordKey{}).(*request); ok {
				rec.headers.Store(time.Now().UnixNano())
				rec.status.Store(int32(resp.StatusCode))
				rec.mu.Lock()
				rec.encoding, rec.contentType = resp.Header.Get("Content-Encoding"), resp.Header.Get("Content-Type")
				rec.mu.Unlock()
				body := &recordingBody{ReadCloser: resp.Body, rec: rec}
				if rec.watchList() {
					body.scan = newMarkerScan(rec, resp.Header.Get("Content-Encoding") == "gzip")
				}
				resp.Body = body
			}
			return nil
		},
		ErrorHandler: p.upstreamFailed,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	return p, nil
}

// URL is what the side's rest.Config points at.
func (p *countingProxy) URL() string { return "http://" + p.addr }

func (p *countingProxy) serve(ln net.Listener) {
	srv := &http.Server{
		Handler:  http.HandlerFunc(p.handle),
		ErrorLog: nil,
	}
	p.mu.Lock()
	p.srv, p.ln, p.isUp = srv, &countingListener{Listener: ln, p: p}, true
	cl := p.ln
	p.mu.Unlock()
	p.upAt.Store(time.Now().UnixNano())
	go func() { _ = srv.Serve(cl) }()
}

// down closes the listener and every client connection: the side's
// clients see their streams end and their next connections refused, as
// with the apiserver itself gone.
func (p *countingProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.isUp {
		return
	}
	p.isUp = false
	_ = p.srv.Close()
}

// up listens again on the same port.
func (p *countingProxy) up() error {
	p.mu.Lock()
	if p.isUp {
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()
	var ln net.Listener
	var err error
	for range 100 { // the port may be in a brief transition; Go listeners set SO_REUSEADDR
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	p.serve(ln)
	return nil
}

// close ends the proxy for good.
func (p *countingProxy) close() {
	p.down()
	if tr, ok := p.upRT.(interface{ CloseIdleConnections() }); ok {
		tr.CloseIdleConnections()
	}
}

// upSince is when the proxy last started listening.
func (p *countingProxy) upSince() time.Time { return time.Unix(0, p.upAt.Load()) }

func (p *countingProxy) touch() { p.lastActive.Store(time.Now().UnixNano()) }

// quietFor is how long no byte and no request went through.
func (p *countingProxy) quietFor() time.Duration {
	return time.Since(time.Unix(0, p.lastActive.Load()))
}

func (p *countingProxy) snapshot() totals {
	return totals{requests: p.requests.Load(), sent: p.sent.Load(), received: p.received.Load()}
}

type recordKey struct{}

func (p *countingProxy) handle(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	p.touch()
	rec := p.logger.start(p.side, r)
	defer rec.finish()
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), recordKey{}, rec)))
}

// upstreamFailed is the proxy's answer when the apiserver could not be
// reached or broke off: in the short window between the apiserver going
// away and the proxy following it (or back), the client gets a reset
// connection, as it would from the apiserver itself, not a 502.
func (p *countingProxy) upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	rec, _ := r.Context().Value(recordKey{}).(*request)
	if r.Context().Err() != nil {
		if rec != nil {
			rec.mu.Lock()
			rec.canceled = true
			rec.mu.Unlock()
		}
		return // the client gave up on the request
	}
	if rec != nil {
		rec.mu.Lock()
		rec.failed = err.Error()
		rec.mu.Unlock()
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	conn, _, herr := hj.Hijack()
	if herr != nil {
		return
	}
	if cc, ok := conn.(*countingConn); ok {
		if tc, ok := cc.Conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST, as from a process gone
		}
	}
	_ = conn.Close()
}

type countingListener struct {
	net.Listener
	p *countingProxy
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.p.touch()
	return &countingConn{Conn: c, p: l.p}, nil
}

type countingConn struct {
	net.Conn
	p *countingProxy
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.p.sent.Add(uint64(n))
		c.p.touch()
	}
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.p.received.Add(uint64(n))
		c.p.touch()
	}
	return n, err
}

// mirrorAPIServer makes the proxies follow the apiserver's port, polled
// every 5 ms: down when it refuses connections, and up again on the first
// connection it accepts after that, where it stops (it does not keep
// knocking on the apiserver). startDown says the proxies were already
// brought down, with the apiserver.
func mirrorAPIServer(ctx context.Context, apiserver string, startDown bool, proxies ...*countingProxy) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	wasDown := startDown
	for {
		c, err := net.DialTimeout("tcp", apiserver, 100*time.Millisecond)
		switch {
		case err == nil:
			_ = c.Close()
			if wasDown {
				for _, p := range proxies {
					if uerr := p.up(); uerr != nil {
						logf("proxy %s: up: %v", p.side, uerr)
					}
				}
				return
			}
		case isRefused(err):
			wasDown = true
			for _, p := range proxies {
				p.down()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// totals is a proxy's counters at one moment.
type totals struct {
	requests, sent, received uint64
}

func (t totals) sub(o totals) totals {
	return totals{requests: t.requests - o.requests, sent: t.sent - o.sent, received: t.received - o.received}
}

func (t totals) bytes() uint64 { return t.sent + t.received }

// request is one logged request.
type request struct {
	side    string
	started time.Time
	method  string
	path    string
	query   url.Values
	status  atomic.Int32
	body    atomic.Uint64 // response body bytes as forwarded (gzip'd if the server compressed)
	ended   atomic.Int64
	headers atomic.Int64 // unix nanos: the response's headers came from the apiserver
	// initialEnd is when a watch-list's initial events ended (the bookmark
	// annotated k8s.io/initial-events-end went through), unix nanos.
	initialEnd atomic.Int64

	mu          sync.Mutex
	encoding    string
	contentType string
	failed      string // the proxy could not forward it
	canceled    bool   // the client gave up before the response came
	head        []byte // the first bytes of the body: a watch's first event
}

var initialEventsEnd = []byte("k8s.io/initial-events-end")

// info returns what the proxy learnt of the response.
func (r *request) info() (contentType, encoding, failed string, canceled bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.contentType, r.encoding, r.failed, r.canceled
}

func (r *request) watchList() bool {
	return r.query.Get("sendInitialEvents") == "true"
}

func (r *request) finish() { r.ended.Store(time.Now().UnixNano()) }

// watchError reports whether a watch's first event is an ERROR (a 410
// "too old resource version" is sent that way on an open stream).
func (r *request) watchError() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Contains(r.head, []byte(`"type":"ERROR"`)) || (len(r.head) > 0 && bytes.Contains(r.head[:min(len(r.head), 64)], []byte("ERROR")))
}

type recordingBody struct {
	io.ReadCloser
	rec  *request
	scan *io.PipeWriter // a watch-list's bytes, to the scan for its initial events' end; nil otherwise
}

func (b *recordingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.rec.body.Add(uint64(n))
		b.rec.mu.Lock()
		if len(b.rec.head) < 128 {
			b.rec.head = append(b.rec.head, p[:min(n, 128-len(b.rec.head))]...)
		}
		b.rec.mu.Unlock()
		if b.scan != nil {
			_, _ = b.scan.Write(p[:n]) // the scan drains its pipe to the end
		}
	}
	if err != nil && b.scan != nil {
		b.scan.Close()
	}
	return n, err
}

func (b *recordingBody) Close() error {
	if b.scan != nil {
		b.scan.Close()
	}
	return b.ReadCloser.Close()
}

// newMarkerScan returns the writer end of a pipe whose reader looks for
// the bookmark annotated k8s.io/initial-events-end in a watch-list's body,
// decompressed first when the apiserver gzipped the stream (it flushes
// each event, so each can be read as it comes), and stores when it came
// in rec.initialEnd. The reader drains the pipe to its end either way, so
// writes never block for long.
func newMarkerScan(rec *request, gzipped bool) *io.PipeWriter {
	pr, pw := io.Pipe()
	go func() {
		defer io.Copy(io.Discard, pr) //nolint:errcheck // drain whatever the scan left
		var r io.Reader = pr
		if gzipped {
			zr, err := gzip.NewReader(pr)
			if err != nil {
				return
			}
			r = zr
		}
		buf := make([]byte, 32<<10)
		var tail []byte // the marker may straddle two reads
		for {
			n, err := r.Read(buf)
			chunk := append(tail, buf[:n]...)
			if bytes.Contains(chunk, initialEventsEnd) {
				rec.initialEnd.Store(time.Now().UnixNano())
				return
			}
			tail = append(tail[:0], chunk[max(0, len(chunk)-len(initialEventsEnd)):]...)
			if err != nil {
				return
			}
		}
	}()
	return pw
}

// requestLog holds every request of a measurement window, both sides.
type requestLog struct {
	mu   sync.Mutex
	reqs []*request
	on   bool
}

func (l *requestLog) start(side string, r *http.Request) *request {
	rec := &request{side: side, started: time.Now(), method: r.Method, path: r.URL.Path, query: r.URL.Query()}
	l.mu.Lock()
	if l.on {
		l.reqs = append(l.reqs, rec)
	}
	l.mu.Unlock()
	return rec
}

// begin clears the log and starts recording.
func (l *requestLog) begin() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs, l.on = nil, true
}

// end stops recording and returns what was recorded.
func (l *requestLog) end() []*request {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.on = false
	return l.reqs
}

// shape is what a request asks, from its URL alone, with resource
// versions reduced to "" (unset: a consistent read), "0" (any) or N (a
// number): "list rv=N match=NotOlderThan limit=500".
func (r *request) shape() string {
	q := r.query
	rv := func() string {
		switch v, ok := q["resourceVersion"]; {
		case !ok:
			return `rv=""`
		case v[0] == "":
			return `rv=""`
		case v[0] == "0":
			return "rv=0"
		default:
			return "rv=N"
		}
	}
	var s string
	if w := q.Get("watch"); w == "true" || w == "1" {
		s = "watch"
		if q.Get("sendInitialEvents") == "true" {
			s = "watch-list"
		}
		s += " " + rv()
		if t, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && t <= 30 {
			s += " timeout=" + strconv.Itoa(t) + "s"
		}
		if m := q.Get("resourceVersionMatch"); m != "" {
			s += " match=" + m
		}
	} else {
		s = r.method
		if r.method == http.MethodGet {
			s = "list"
		}
		s += " " + rv()
		if m := q.Get("resourceVersionMatch"); m != "" {
			s += " match=" + m
		}
		if l := q.Get("limit"); l != "" {
			s += " limit=" + l
		}
		if q.Get("continue") != "" {
			s += " continue"
		}
	}
	return s
}

// outcome is the response status, with a watch whose first event is an
// ERROR marked so, "canceled" for a request its client gave up on before
// the response came, and "reset" for one the proxy could not forward.
func (r *request) outcome() string {
	st := r.status.Load()
	_, _, failed, canceled := r.info()
	switch {
	case st == 0 && canceled:
		return "canceled"
	case st == 0 && failed != "":
		return "reset"
	case st == 0:
		return "none"
	}
	s := strconv.Itoa(int(st))
	if w := r.query.Get("watch"); (w == "true" || w == "1") && st == 200 && r.watchError() {
		s += " ERROR event"
	}
	return s
}

// oneConnection returns a round tripper to cfg's server that sends every
// request on one HTTP/2 connection at a time (oneConnPool): shared by both
// sides' proxies, it puts them on one replica behind a load balancer, and
// moves them together when that replica goes away. client-go's cached
// transport alone does not: its pool may hold several connections (one
// dialed when a shutting-down replica refuses new streams, while the old
// one still carries watches), and the sides then sit on different
// replicas, so that a rollout's restarts hit them unequally.
func oneConnection(cfg *rest.Config) (http.RoundTripper, error) {
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, err
	}
	tlsConfig = tlsConfig.Clone()
	tlsConfig.NextProtos = []string{"h2"}
	t := &http2.Transport{TLSClientConfig: tlsConfig}
	t.ConnPool = &oneConnPool{t: t, tlsConfig: tlsConfig}
	return rest.HTTPWrappersForConfig(cfg, t)
}

// oneConnPool is an http2.ClientConnPool with one connection at a time: a
// new one only once the last can take no new request (closed, or told to
// go away, or full: kube-apiserver allows 100 streams on a connection
// unless told otherwise, and the HA plane raises it to 1000).
type oneConnPool struct {
	t         *http2.Transport
	tlsConfig *tls.Config

	mu sync.Mutex // guards cc; held while dialing, so that nobody dials another
	cc *http2.ClientConn
}

func (p *oneConnPool) GetClientConn(req *http.Request, addr string) (*http2.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cc != nil && p.cc.CanTakeNewRequest() {
		return p.cc, nil
	}
	d := tls.Dialer{Config: p.tlsConfig}
	conn, err := d.DialContext(req.Context(), "tcp", addr)
	if err != nil {
		return nil, err
	}
	cc, err := p.t.NewClientConn(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	p.cc = cc
	return cc, nil
}

func (p *oneConnPool) MarkDead(cc *http2.ClientConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cc == cc {
		p.cc = nil
	}
}
