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
	rep *reporter

	mu    sync.Mutex // guards the fields below; a leaf
	last  map[WriteKey]lastWrite
	order []WriteKey // a ring of the keys in last, oldest at next
	next  int
}

// NewWrites returns a Writes reporting to onReport (nil: none).
func NewWrites(onReport func(stalereads.Report), halt bool) *Writes {
	return &Writes{rep: newReporter(onReport, halt, klog.Background()), last: map[WriteKey]lastWrite{}}
}

// Wrote records that k was written at rv (a write response's).
func (w *Writes) Wrote(k WriteKey, rv string) {
	parsed, err := freshness.ParseRV(rv)
	if err != nil || parsed.IsZero() {
		return
	}
	CountsFor(k.Resource) // the metrics show the resource from its first write
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
// is older than this process's last write of k.
func (w *Writes) Check(k WriteKey, op, rv string) {
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
	w.rep.report(stalereads.Report{Kind: stalereads.WriteOlder, Resource: k.Resource, Key: resources.Key(k.Namespace, k.Name), Op: op,
		ResourceVersion: rv, WrittenResourceVersion: last.rv.String(), SinceWrite: time.Since(last.at)})
}
