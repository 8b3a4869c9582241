package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// reqClass sorts an informer's requests by what they are, from the URL
// alone: the consistent limit=1 list (probes, Sync), other lists (relists,
// snapshots), watches, and watch-list streams (sendInitialEvents).
type reqClass int

const (
	classList1 reqClass = iota
	classList
	classWatch
	classWatchList
	numClasses
)

var classNames = [numClasses]string{"list limit=1", "list", "watch", "watch-list"}

// counter is an http.RoundTripper wrapper (rest.Config.Wrap) that counts
// the requests one informer's client sends and the response body bytes it
// reads, per class. Bytes are counted as client-go reads the body, that is
// after net/http has undone any gzip content encoding: the size of what the
// server encoded (JSON or protobuf, see contentTypes), not what crossed the
// wire. A watch's bytes are counted as they arrive.
type counter struct {
	requests [numClasses]atomic.Uint64
	bytes    [numClasses]atomic.Uint64

	mu           sync.Mutex
	contentTypes map[string]int
}

func newCounter() *counter { return &counter{contentTypes: map[string]int{}} }

func (c *counter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		cl := classify(req)
		c.requests[cl].Add(1)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return resp, err
		}
		c.mu.Lock()
		c.contentTypes[resp.Header.Get("Content-Type")]++
		c.mu.Unlock()
		if resp.Body != nil {
			resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.bytes[cl]}
		}
		return resp, nil
	})
}

func classify(req *http.Request) reqClass {
	q := req.URL.Query()
	switch {
	case q.Get("watch") == "true" || q.Get("watch") == "1" || strings.Contains(req.URL.Path, "/watch/"):
		if q.Get("sendInitialEvents") == "true" {
			return classWatchList
		}
		return classWatch
	case q.Get("limit") == "1":
		return classList1
	default:
		return classList
	}
}

// contentTypesSeen lists the response content types, for the output.
func (c *counter) contentTypesSeen() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for ct := range c.contentTypes {
		if ct != "" {
			out = append(out, ct)
		}
	}
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type countingBody struct {
	io.ReadCloser
	n *atomic.Uint64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(uint64(n))
	return n, err
}

// traffic is a counter's totals at one moment.
type traffic struct {
	requests, bytes [numClasses]uint64
}

func (c *counter) snapshot() traffic {
	var t traffic
	for i := range numClasses {
		t.requests[i] = c.requests[i].Load()
		t.bytes[i] = c.bytes[i].Load()
	}
	return t
}

func (t traffic) sub(o traffic) traffic {
	for i := range numClasses {
		t.requests[i] -= o.requests[i]
		t.bytes[i] -= o.bytes[i]
	}
	return t
}

func (t traffic) add(o traffic) traffic {
	for i := range numClasses {
		t.requests[i] += o.requests[i]
		t.bytes[i] += o.bytes[i]
	}
	return t
}

func (t traffic) totalRequests() (n uint64) {
	for _, r := range t.requests {
		n += r
	}
	return n
}

func (t traffic) totalBytes() (n uint64) {
	for _, b := range t.bytes {
		n += b
	}
	return n
}

// breakdown is "2 (1 list limit=1, 1 watch)", each count divided by per.
func (t traffic) breakdown(per float64) string {
	var parts []string
	for i := range numClasses {
		if t.requests[i] > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", num(float64(t.requests[i])/per), classNames[i]))
		}
	}
	s := num(float64(t.totalRequests()) / per)
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}
