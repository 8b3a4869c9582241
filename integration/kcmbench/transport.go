package main

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// counter counts a controller client's requests and its ReplicaSet status
// conflicts.
type counter struct {
	requests  atomic.Int64
	conflicts atomic.Int64 // 409 on a ReplicaSet status write
}

// countingRT counts requests through it.
type countingRT struct {
	next http.RoundTripper
	c    *counter
}

func (t *countingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	t.c.requests.Add(1)
	resp, err := t.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusConflict && req.Method == http.MethodPut &&
		strings.Contains(req.URL.Path, "/replicasets/") && strings.HasSuffix(req.URL.Path, "/status") {
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
