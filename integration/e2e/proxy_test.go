package e2e

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// laggingProxy stands in front of one kube-apiserver replica and makes it
// lag the way a real replica can: it holds watch events back, serves a list
// it recorded earlier (a stale list), or ends watches and answers the next
// ones with 410 Gone (so the informer relists). Clients talk plain HTTP to
// it; it forwards to the replica with the replica's admin credentials and
// asks for JSON, so recorded bodies can be replayed to any client.
type laggingProxy struct {
	srv    *httptest.Server
	target *url.URL
	rt     http.RoundTripper

	mu        sync.Mutex
	holding   chan struct{} // non-nil while watch events are held; closed on release
	recordOne bool          // record the next successful list
	recorded  []byte
	stale     int // serve the recorded list to this many more lists (-1: all)
	gone      int // answer this many more watches with 410
	watches   map[*watchConn]struct{}

	servedStale, servedGone int
}

type watchConn struct{ cancel context.CancelFunc }

func newLaggingProxy(t *testing.T, replica *rest.Config) *laggingProxy {
	t.Helper()
	target, err := url.Parse(replica.Host)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(replica)
	if err != nil {
		t.Fatal(err)
	}
	p := &laggingProxy{target: target, rt: rt, watches: map[*watchConn]struct{}{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(func() {
		p.release()
		p.cutWatches()
		p.srv.Close()
		if tr, ok := rt.(interface{ CloseIdleConnections() }); ok {
			tr.CloseIdleConnections()
		}
	})
	return p
}

// client returns a clientset that talks to the replica through the proxy.
func (p *laggingProxy) client(t *testing.T) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: p.srv.URL, QPS: 1000, Burst: 2000, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// hold makes watch streams stop delivering (events queue up in the
// proxy's connections) until release.
func (p *laggingProxy) hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holding == nil {
		p.holding = make(chan struct{})
	}
}

func (p *laggingProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holding != nil {
		close(p.holding)
		p.holding = nil
	}
}

func (p *laggingProxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.holding
}

// recordNextList records the next successful list response.
func (p *laggingProxy) recordNextList() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.recordOne = true
}

// serveStale serves the recorded list to the next n lists (n < 0: until
// serveStale(0)).
func (p *laggingProxy) serveStale(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stale = n
}

// forceRelist ends every open watch and answers the next watch with 410
// Gone, which makes client-go's Reflector relist.
func (p *laggingProxy) forceRelist() {
	p.mu.Lock()
	p.gone = 1
	p.mu.Unlock()
	p.cutWatches()
}

func (p *laggingProxy) cutWatches() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for w := range p.watches {
		w.cancel()
	}
}

func (p *laggingProxy) counts() (stale, gone int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.servedStale, p.servedGone
}

func isWatch(r *http.Request) bool {
	v := r.URL.Query().Get("watch")
	return v == "true" || v == "1"
}

func (p *laggingProxy) serve(w http.ResponseWriter, r *http.Request) {
	watch := isWatch(r)
	// A lagging replica serves stale lists only to requests that allow
	// them: a consistent read (resourceVersion unset: freshness probes,
	// restore checks, Sync) waits for etcd's current revision on any
	// replica.
	list := !watch && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/configmaps") &&
		r.URL.Query().Get("resourceVersion") != ""

	p.mu.Lock()
	switch {
	case watch && p.gone > 0:
		p.gone--
		p.servedGone++
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusGone)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version (laggingProxy)","reason":"Expired","code":410}`)
		return
	case list && p.stale != 0 && p.recorded != nil:
		if p.stale > 0 {
			p.stale--
		}
		p.servedStale++
		body := p.recorded
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
		return
	}
	record := list && p.recordOne
	p.mu.Unlock()

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if watch {
		c := &watchConn{cancel: cancel}
		p.mu.Lock()
		p.watches[c] = struct{}{}
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			delete(p.watches, c)
			p.mu.Unlock()
		}()
	}
	u := *p.target
	u.Path, u.RawQuery = r.URL.Path, r.URL.RawQuery
	req, err := http.NewRequestWithContext(ctx, r.Method, u.String(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	req.Header.Set("Accept", "application/json")
	req.Header.Del("Authorization")
	resp, err := p.rt.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)

	if !watch {
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return
		}
		if record && resp.StatusCode == http.StatusOK {
			p.mu.Lock()
			if p.recordOne {
				p.recordOne = false
				p.recorded = body
			}
			p.mu.Unlock()
		}
		_, _ = w.Write(body)
		return
	}
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			// A held stream delivers nothing until release (or the
			// client or the test ends it).
			if g := p.gate(); g != nil {
				select {
				case <-g:
				case <-ctx.Done():
					return
				}
			}
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}
