package detector

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/resources"
	"github.com/freshinformer/freshinformer/stalereads"
)

// WriteKey names an object on one server.
type WriteKey struct {
	Host            string
	Resource        schema.GroupResource
	Namespace, Name string
}

type lastWrite struct {
	rv freshness.RV
	at time.Time
}

// Writes remembers the newest resource version this process wrote per
// key, for a writes transport, and reports updates and patches sent on
// older state. Bounded: the MaxEntries keys most recently written first
// (the oldest is forgotten first). Safe for concurrent use.
type Writes struct {
	rep     *reporter
	counter func(gr schema.GroupResource, n int) // nil: not counted

	mu    sync.Mutex // guards the fields below; a leaf
	last  map[WriteKey]lastWrite
	order []WriteKey // a ring of the keys in last, oldest at next
	next  int
}

// WritesConfig configures a Writes.
type WritesConfig struct {
	// OnReport, LogReports, Halt and Fail are as in Config.
	OnReport   func(stalereads.Report)
	LogReports bool
	Halt       bool
	Fail       func(stalereads.Report)
	// Count, if set, counts n stale writes of gr: the transport's metrics.
	// It is called with 0 at each recorded write, so that the resource's
	// count is there, at 0, before its first stale write.
	Count func(gr schema.GroupResource, n int)
}

// NewWrites returns a Writes. It logs through klog.Background until
// Started.
func NewWrites(cfg WritesConfig) *Writes {
	w := &Writes{counter: cfg.Count, last: map[WriteKey]lastWrite{}}
	out := output{Handler: cfg.OnReport, LogReports: cfg.LogReports, Halt: cfg.Halt, Fail: cfg.Fail}
	w.rep = newReporter(out, func(r stalereads.Report) { w.count(r.Resource, 1) }, klog.Background())
	return w
}

// Started logs, once, that the stale-write detector is on (unless a
// handler takes the log's place), through the logger of the first
// request the transport carries.
func (w *Writes) Started(logger klog.Logger) {
	if w.rep.announced.Load() {
		return
	}
	w.rep.announce(logger, "Stale-write detector on: updates and patches through this transport are checked against its own recorded writes")
}

func (w *Writes) count(gr schema.GroupResource, n int) {
	if w.counter != nil {
		w.counter(gr, n)
	}
}

// Wrote records that k was written at rv (a write response's).
func (w *Writes) Wrote(k WriteKey, rv string) {
	parsed, err := freshness.ParseRV(rv)
	if err != nil || parsed.IsZero() {
		return
	}
	w.count(k.Resource, 0) // the metrics show the resource from its first write
	w.mu.Lock()
	defer w.mu.Unlock()
	if old, ok := w.last[k]; ok {
		if parsed.Compare(old.rv) > 0 {
			w.last[k] = lastWrite{rv: parsed, at: time.Now()}
		}
		return
	}
	slot := w.next
	if len(w.order) < MaxEntries {
		w.order = append(w.order, k)
	} else {
		delete(w.last, w.order[slot])
		w.order[slot] = k
	}
	w.next = (slot + 1) % MaxEntries
	w.last[k] = lastWrite{rv: parsed, at: time.Now()}
}

// Check reports op (update, patch) of k carrying resource version rv if it
// is older than this process's last write of k, logging through the
// request's logger.
func (w *Writes) Check(logger klog.Logger, k WriteKey, op, rv string) {
	sent, err := freshness.ParseRV(rv)
	if err != nil || sent.IsZero() {
		return // no precondition: nothing to tell
	}
	w.mu.Lock()
	last, ok := w.last[k]
	w.mu.Unlock()
	if !ok || sent.Compare(last.rv) >= 0 {
		return
	}
	w.rep.reportTo(logger, stalereads.Report{Kind: stalereads.WriteOlder, Resource: k.Resource, Key: resources.Key(k.Namespace, k.Name), Op: op,
		ResourceVersion: rv, WrittenResourceVersion: last.rv.String(), SinceWrite: time.Since(last.at)})
}
