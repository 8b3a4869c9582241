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
// long after its cache became fresh (seen by an event handler on the
// informer behind, which runs once the event is in the store).
type measuredStore struct {
	inner consistencyutil.ConsistencyStore

	mu          sync.Mutex
	pending     map[types.NamespacedName]*skip
	skips       int
	held        []time.Duration // EnsureReady calls that returned nil after blocking over 1 ms
	skipToSync  []time.Duration
	freshToSync []time.Duration
	freshUnseen int // resynced owners whose fresh moment no event showed (a bookmark, a relist)
}

type skip struct {
	at      time.Time
	gr      schema.GroupResource
	wroteRV string
	freshAt time.Time
}

var _ consistencyutil.ConsistencyStore = (*measuredStore)(nil)

func newMeasuredStore(inner consistencyutil.ConsistencyStore) *measuredStore {
	return &measuredStore{inner: inner, pending: map[types.NamespacedName]*skip{}}
}

func (m *measuredStore) WroteAt(owner types.NamespacedName, uid types.UID, gr schema.GroupResource, rv string) {
	m.inner.WroteAt(owner, uid, gr, rv)
}

func (m *measuredStore) Clear(owner types.NamespacedName, uid types.UID) { m.inner.Clear(owner, uid) }

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
				m.pending[owner] = &skip{at: now, gr: ce.GroupResource, wroteRV: ce.WroteRV}
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
// store of gr: skipped owners waiting for an RV at or below it are fresh.
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
		if p.gr != gr || !p.freshAt.IsZero() {
			continue
		}
		if c, err := resourceversion.CompareResourceVersion(p.wroteRV, rv); err == nil && c <= 0 {
			p.freshAt = now
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
