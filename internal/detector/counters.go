package detector

import (
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Counts are the stale reads and writes of one resource, process-wide.
type Counts struct {
	Reads, Writes atomic.Uint64
}

// counts holds one Counts per resource some detector watches (the
// metrics' series): bounded by the resources the process reads or writes.
var counts sync.Map // schema.GroupResource -> *Counts

// CountsFor returns gr's counts, registering them for the metrics.
func CountsFor(gr schema.GroupResource) *Counts {
	if c, ok := counts.Load(gr); ok {
		return c.(*Counts)
	}
	c, _ := counts.LoadOrStore(gr, &Counts{})
	return c.(*Counts)
}

// EachCount calls f with the counts of every resource registered so far.
func EachCount(f func(gr schema.GroupResource, reads, writes uint64)) {
	counts.Range(func(k, v any) bool {
		c := v.(*Counts)
		f(k.(schema.GroupResource), c.Reads.Load(), c.Writes.Load())
		return true
	})
}
