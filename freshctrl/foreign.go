package freshctrl

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/readyourwrites"
)

// Informers from a cache.Options.NewInformer hook that are not
// FreshInformers (foreign ones, wrapped with cache.Wrap once the cache
// runs) are outside package readyourwrites, which works on FreshInformers.
// For them the client keeps one mark per informer: the newest resource
// version written through it that the informer's scope can see, which a
// read through that informer waits for. A read may so wait for writes to
// other keys than its own, never for less than its own; deletes are not
// waited for (a wrapped informer cannot be asked what it holds past a
// resource version).

// foreignMarks holds the marks. Its mutex guards rv only and is a leaf:
// nothing is called under it but the registry's read lock (registry.has),
// which is never held while calling the client.
//
// Bound: one entry per foreign informer the cache holds; those the cache
// forgot (RemoveInformer) are dropped at the next write.
type foreignMarks struct {
	mu sync.Mutex // guards rv; a leaf
	rv map[*informerEntry]freshness.RV
}

// raise raises the marks of gk's foreign informers that sees reports true
// of to rv, and drops those of informers the registry forgot.
func (m *foreignMarks) raise(reg *registry, gk schema.GroupKind, rv freshness.RV, sees func(*informerEntry) bool) {
	var raised []*informerEntry
	for _, e := range reg.all(gk) {
		if e.Informer == nil && sees(e) {
			raised = append(raised, e)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for e := range m.rv {
		if !reg.has(e) {
			delete(m.rv, e)
		}
	}
	for _, e := range raised {
		if rv.Compare(m.rv[e]) > 0 {
			m.rv[e] = rv
		}
	}
}

func (m *foreignMarks) get(e *informerEntry) freshness.RV {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rv[e]
}

// awaitForeign waits (or, with FailIfNotFresh, checks) until the wrapped
// foreign informers serving a read have reached their marks.
func (c *freshClient) awaitForeign(ctx context.Context, gk schema.GroupKind, rep Representation, ns string, key *types.NamespacedName, ro readOptions) error {
	for _, e := range c.cache.reg.lookup(gk, rep) {
		if e.Informer != nil || !e.Scope.covers(ns) {
			continue
		}
		target := c.foreign.get(e)
		f := e.freshness()
		if target.IsZero() || f == nil {
			continue // nothing written it can see, or not wrapped: it cannot say
		}
		if cur, err := freshness.ParseRV(f.LastObservedResourceVersion()); err == nil && cur.AtLeast(target) {
			continue
		}
		nf := &readyourwrites.NotFreshError{Resource: e.Resource, Name: e.name, Written: target.String()}
		if key != nil {
			nf.Key = *key
		}
		if ro.failFast {
			nf.Observed = f.LastObservedResourceVersion()
			return nf
		}
		start := time.Now()
		if err := f.WaitForFreshness(ctx, target.String()); err != nil {
			nf.Waited, nf.Err, nf.Observed = time.Since(start), err, f.LastObservedResourceVersion()
			return nf
		}
	}
	return nil
}

// cached reports whether e's indexer holds key.
func cached(e *informerEntry, key types.NamespacedName) bool {
	k := key.Name
	if key.Namespace != "" {
		k = key.Namespace + "/" + k
	}
	_, ok, _ := e.indexer().GetByKey(k)
	return ok
}
