package main

import (
	"errors"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	toolscache "k8s.io/client-go/tools/cache"
	consistencyutil "k8s.io/kubernetes/pkg/controller/util/consistency"
)

// measuredStore wraps a ConsistencyStore and measures, for each owner
// EnsureReady skipped, how long until its next sync proceeded, and how
// long after its caches became fresh: every informer the owner wrote
// through (its pods', its own status') holds the newest write recorded
// for it when it was skipped, as event handlers on them see it (they run
// once the event is in the store).
type measuredStore struct {
	inner consistencyutil.ConsistencyStore

	mu          sync.Mutex
	wrote       map[types.NamespacedName]map[schema.GroupResource]string // the newest write per informer
	pending     map[types.NamespacedName]*skip
	skips       int
	held        []time.Duration // EnsureReady calls that returned nil after blocking over 1 ms
	skipToSync  []time.Duration
	freshToSync []time.Duration
	freshUnseen int // resynced owners whose fresh moment no event showed (a bookmark, a relist)
}

type skip struct {
	at      time.Time
	behind  map[schema.GroupResource]string // the writes not yet seen, per informer
	freshAt time.Time
}

var _ consistencyutil.ConsistencyStore = (*measuredStore)(nil)

func newMeasuredStore(inner consistencyutil.ConsistencyStore) *measuredStore {
	return &measuredStore{inner: inner, pending: map[types.NamespacedName]*skip{}, wrote: map[types.NamespacedName]map[schema.GroupResource]string{}}
}

func (m *measuredStore) WroteAt(owner types.NamespacedName, uid types.UID, gr schema.GroupResource, rv string) {
	m.inner.WroteAt(owner, uid, gr, rv)
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.wrote[owner]
	if w == nil {
		w = map[schema.GroupResource]string{}
		m.wrote[owner] = w
	}
	if c, err := resourceversion.CompareResourceVersion(w[gr], rv); w[gr] == "" || err == nil && c < 0 {
		w[gr] = rv
	}
}

func (m *measuredStore) Clear(owner types.NamespacedName, uid types.UID) {
	m.inner.Clear(owner, uid)
	m.mu.Lock()
	delete(m.wrote, owner)
	m.mu.Unlock()
}

func (m *measuredStore) EnsureReady(owner types.NamespacedName) error {
	start := time.Now()
	err := m.inner.EnsureReady(owner)
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		var ce *consistencyutil.ConsistencyError // ours fills it in too (its As method)
		if errors.As(err, &ce) {
			m.skips++
			if m.pending[owner] == nil {
				behind := map[schema.GroupResource]string{ce.GroupResource: ce.WroteRV}
				for gr, rv := range m.wrote[owner] {
					if c, err := resourceversion.CompareResourceVersion(behind[gr], rv); behind[gr] == "" || err == nil && c < 0 {
						behind[gr] = rv
					}
				}
				m.pending[owner] = &skip{at: now, behind: behind}
			}
		}
		return err
	}
	if d := now.Sub(start); d > time.Millisecond {
		m.held = append(m.held, d)
	}
	if p := m.pending[owner]; p != nil {
		m.skipToSync = append(m.skipToSync, now.Sub(p.at))
		if p.freshAt.IsZero() {
			m.freshUnseen++
		} else {
			m.freshToSync = append(m.freshToSync, now.Sub(p.freshAt))
		}
		delete(m.pending, owner)
	}
	return nil
}

// observe is called by the event handlers with each object applied to the
// store of gr: a skipped owner's write to gr at or below it is seen, and
// the owner is fresh once each of its writes is.
func (m *measuredStore) observe(gr schema.GroupResource, obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	rv := o.GetResourceVersion()
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.pending {
		want, ok := p.behind[gr]
		if !ok || !p.freshAt.IsZero() {
			continue
		}
		if c, err := resourceversion.CompareResourceVersion(want, rv); err == nil && c <= 0 {
			delete(p.behind, gr)
			if len(p.behind) == 0 {
				p.freshAt = now
			}
		}
	}
}

func (m *measuredStore) handler(gr schema.GroupResource) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.observe(gr, obj) },
		UpdateFunc: func(_, obj any) { m.observe(gr, obj) },
		DeleteFunc: func(obj any) { m.observe(gr, obj) },
	}
}

// pct returns the p-th percentile of ds (p in 0..100), 0 for none.
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}
