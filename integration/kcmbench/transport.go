package main

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// counter counts a controller client's requests and its ReplicaSet status
// conflicts.
type counter struct {
	requests  atomic.Int64
	conflicts atomic.Int64 // 409 on a status write (the controller's ReplicaSets' or Jobs')

	mu     sync.Mutex
	byKind map[string]int // requests by verb and resource (requestKind)
}

// count adds a request of kind k.
func (c *counter) count(k string) {
	c.requests.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKind == nil {
		c.byKind = map[string]int{}
	}
	c.byKind[k]++
}

// breakdown returns the request counts by kind, most first.
func (c *counter) breakdown() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	type kv struct {
		k string
		n int
	}
	var all []kv
	for k, n := range c.byKind {
		all = append(all, kv{k, n})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n || all[i].n == all[j].n && all[i].k < all[j].k })
	var b strings.Builder
	for i, e := range all {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", e.k, e.n)
	}
	return b.String()
}

// requestKind names a request by verb and resource: "PUT replicasets/status",
// "WATCH pods", "LIST pods (limit=1)", "POST events".
func requestKind(req *http.Request) string {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	// /api/v1/namespaces/NS/RES[/NAME[/SUB]] or /apis/G/V/namespaces/NS/RES[/NAME[/SUB]]
	i := 2
	if len(parts) > 0 && parts[0] == "apis" {
		i = 3
	}
	rest := parts[min(i, len(parts)):]
	if len(rest) >= 2 && rest[0] == "namespaces" {
		rest = rest[2:]
	}
	res, named := "?", false
	if len(rest) > 0 {
		res = rest[0]
	}
	if len(rest) > 1 {
		named = true
	}
	if len(rest) > 2 {
		res += "/" + rest[2]
	}
	q := req.URL.Query()
	verb := req.Method
	switch {
	case q.Get("watch") == "true":
		verb = "WATCH"
	case req.Method == http.MethodGet && !named:
		verb = "LIST"
		if l := q.Get("limit"); l != "" {
			res += " (limit=" + l + ")"
		}
	}
	return verb + " " + res
}

// countingRT counts requests through it.
type countingRT struct {
	next http.RoundTripper
	c    *counter
}

func (t *countingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	t.c.count(requestKind(req))
	resp, err := t.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusConflict && (req.Method == http.MethodPut || req.Method == http.MethodPatch) &&
		strings.HasSuffix(req.URL.Path, "/status") {
		t.c.conflicts.Add(1)
	}
	return resp, err
}

// lagRT delays the body of every watch response by lag: each chunk the
// server sends reaches the reader lag after it arrived, in order, as a
// slow network or a lagging watch cache would deliver it. Lists and
// writes are not delayed.
type lagRT struct {
	next http.RoundTripper
	lag  time.Duration
}

func (t *lagRT) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || t.lag <= 0 || req.URL.Query().Get("watch") != "true" {
		return resp, err
	}
	resp.Body = newLagBody(resp.Body, t.lag)
	return resp, nil
}

type chunk struct {
	data []byte
	at   time.Time
	err  error
}

// lagBody reads the inner body on its own goroutine, stamping each chunk,
// and hands chunks out no earlier than their stamp plus the lag.
type lagBody struct {
	inner io.ReadCloser
	lag   time.Duration
	ch    chan chunk
	cur   []byte
	done  chan struct{}
	once  sync.Once
}

func newLagBody(inner io.ReadCloser, lag time.Duration) *lagBody {
	b := &lagBody{inner: inner, lag: lag, ch: make(chan chunk, 1024), done: make(chan struct{})}
	go b.pump()
	return b
}

func (b *lagBody) pump() {
	defer close(b.ch)
	for {
		buf := make([]byte, 32*1024)
		n, err := b.inner.Read(buf)
		c := chunk{data: buf[:n], at: time.Now(), err: err}
		select {
		case b.ch <- c:
		case <-b.done:
			return
		}
		if err != nil {
			return
		}
	}
}

func (b *lagBody) Read(p []byte) (int, error) {
	for len(b.cur) == 0 {
		c, ok := <-b.ch
		if !ok {
			return 0, io.EOF
		}
		if d := time.Until(c.at.Add(b.lag)); d > 0 {
			select {
			case <-time.After(d):
			case <-b.done:
				return 0, io.ErrClosedPipe
			}
		}
		if len(c.data) == 0 && c.err != nil {
			return 0, c.err
		}
		b.cur = c.data
		if c.err != nil && len(c.data) > 0 {
			n := copy(p, b.cur)
			b.cur = b.cur[n:]
			if len(b.cur) == 0 {
				return n, c.err
			}
			return n, nil
		}
	}
	n := copy(p, b.cur)
	b.cur = b.cur[n:]
	return n, nil
}

func (b *lagBody) Close() error {
	b.once.Do(func() { close(b.done) })
	return b.inner.Close()
}
