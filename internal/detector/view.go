package detector

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/resources"
	"github.com/freshinformer/freshinformer/stalereads"
)

// View is an informer's indexer whose reads (Get, GetByKey, List, ByIndex,
// Index) are checked against the Detector's recorded writes; everything
// else goes to the informer's own view of it. While no write is pending,
// a read costs one atomic load more; while some are, a read of a key none
// of them wrote costs a hash and an atomic load more, and allocates
// nothing.
type View struct {
	toolscache.Indexer                    // the informer's view, for all but the reads
	raw                toolscache.Indexer // what the reads read (Config.Indexer)
	d                  *Detector
}

// View returns the informer's view of its indexer, idx, with its reads
// checked by d.
func (d *Detector) View(idx toolscache.Indexer) toolscache.Indexer {
	return &View{Indexer: idx, raw: d.cfg.Indexer, d: d}
}

// GetByKey implements toolscache.Store.
func (v *View) GetByKey(key string) (any, bool, error) {
	if v.d.pending.Load() == 0 || !v.d.mayHoldKey(key) {
		return v.raw.GetByKey(key)
	}
	var k objKey
	if i := strings.IndexByte(key, '/'); i >= 0 {
		k = objKey{key[:i], key[i+1:]}
	} else {
		k.name = key
	}
	e, cur, check := v.d.beforeGet(k)
	obj, exists, err := v.raw.GetByKey(key)
	if check && err == nil {
		v.d.afterGet("GetByKey", k, e, cur, obj, exists)
	}
	return obj, exists, err
}

// Get implements toolscache.Store.
func (v *View) Get(obj any) (any, bool, error) {
	if v.d.pending.Load() == 0 {
		return v.raw.Get(obj)
	}
	m, err := meta.Accessor(obj)
	if err != nil || !v.d.mayHoldName(m.GetName()) {
		return v.raw.Get(obj)
	}
	k := objKey{m.GetNamespace(), m.GetName()}
	e, cur, check := v.d.beforeGet(k)
	got, exists, err := v.raw.Get(obj)
	if check && err == nil {
		v.d.afterGet("Get", k, e, cur, got, exists)
	}
	return got, exists, err
}

// List implements toolscache.Store: a list of every namespace.
func (v *View) List() []any {
	if v.d.pending.Load() == 0 {
		return v.raw.List()
	}
	b := v.d.before()
	items := v.raw.List()
	v.d.checkList("List", b, items, listScope{all: true, missing: true})
	return items
}

// ByIndex implements toolscache.Indexer. Listers and controller-runtime
// list a namespace through toolscache.NamespaceIndex: such a list is
// checked for missing keys too.
func (v *View) ByIndex(indexName, indexedValue string) ([]any, error) {
	if v.d.pending.Load() == 0 {
		return v.raw.ByIndex(indexName, indexedValue)
	}
	b := v.d.before()
	items, err := v.raw.ByIndex(indexName, indexedValue)
	if err == nil {
		v.d.checkList("ByIndex", b, items, listScope{namespace: indexedValue, missing: indexName == toolscache.NamespaceIndex})
	}
	return items, err
}

// Index implements toolscache.Indexer.
func (v *View) Index(indexName string, obj any) ([]any, error) {
	if v.d.pending.Load() == 0 {
		return v.raw.Index(indexName, obj)
	}
	b := v.d.before()
	items, err := v.raw.Index(indexName, obj)
	if err == nil {
		scope := listScope{}
		if m, merr := meta.Accessor(obj); merr == nil && indexName == toolscache.NamespaceIndex {
			scope = listScope{namespace: m.GetNamespace(), missing: true}
		}
		v.d.checkList("Index", b, items, scope)
	}
	return items, err
}

// beforeGet returns what a read of k is checked against: k's recorded
// write and the resource version the cache had applied as the read
// began; check is false when there is nothing to check (no write of k, or
// the cache had applied it).
func (d *Detector) beforeGet(k objKey) (e entry, cur freshness.RV, check bool) {
	e, ok := d.lookup(k)
	if !ok {
		return e, cur, false
	}
	cur = d.cfg.Applied()
	return e, cur, e.deleted || !cur.AtLeast(e.rv)
}

// afterGet checks what a read of k returned.
func (d *Detector) afterGet(op string, k objKey, e entry, cur freshness.RV, obj any, exists bool) {
	var r []stalereads.Report
	if exists {
		r = d.judge(r, op, k, e, cur, obj)
	} else {
		r = d.missing(r, op, k, e, cur)
	}
	d.deliver(r)
}

// snapshot is what a list is judged against: the writes recorded and the
// resource version the cache had applied when it began.
type snapshot struct {
	seq uint64
	cur freshness.RV
}

func (d *Detector) before() snapshot {
	return snapshot{seq: d.seq.Load(), cur: d.cfg.Applied()}
}

// listScope is what a list covers: every namespace, or one; missing says
// whether a recorded write in it must be among the items (false for an
// index whose values the detector cannot tell).
type listScope struct {
	all       bool
	namespace string
	missing   bool
}

func (s listScope) covers(k objKey) bool { return s.all || k.namespace == s.namespace }

// pendingAt reports whether e was recorded before the read b began and
// the cache had not applied it then.
func (e entry) pendingAt(b snapshot) bool {
	return e.seq <= b.seq && (e.deleted || !b.cur.AtLeast(e.rv))
}

// expected reports whether e must be among the items of a list of scope s
// that began at b.
func (e entry) expected(s listScope, k objKey, b snapshot) bool {
	return s.missing && s.covers(k) && !e.deleted && e.inScope && e.pendingAt(b)
}

// checkList checks a list's items against the recorded writes: each item
// that is older than a write of its key, and each key written in the
// list's scope that is not among them.
func (d *Detector) checkList(op string, b snapshot, items []any, s listScope) {
	var reports []stalereads.Report
	matched := 0
	for _, item := range items {
		m, err := meta.Accessor(item)
		if err != nil || !d.mayHoldName(m.GetName()) {
			continue
		}
		k := objKey{m.GetNamespace(), m.GetName()}
		e, ok := d.lookup(k)
		if !ok || !e.pendingAt(b) {
			continue
		}
		if e.expected(s, k, b) {
			matched++
		}
		reports = d.judge(reports, op, k, e, b.cur, item)
	}
	if s.missing {
		reports = d.checkMissing(reports, op, b, items, s, matched)
	}
	d.deliver(reports)
}

// checkMissing reports the written keys of the list's scope that are not
// among its items, given that matched of them are.
func (d *Detector) checkMissing(reports []stalereads.Report, op string, b snapshot, items []any, s listScope, matched int) []stalereads.Report {
	var absent map[objKey]entry
	d.mu.RLock()
	expected := 0
	for k, e := range d.entries {
		if e.expected(s, k, b) {
			expected++
		}
	}
	if expected > matched {
		absent = map[objKey]entry{}
		for k, e := range d.entries {
			if e.expected(s, k, b) {
				absent[k] = e
			}
		}
	}
	d.mu.RUnlock()
	if absent == nil {
		return reports
	}
	for _, item := range items {
		if m, err := meta.Accessor(item); err == nil {
			delete(absent, objKey{m.GetNamespace(), m.GetName()})
		}
	}
	for k, e := range absent {
		reports = d.missing(reports, op, k, e, b.cur)
	}
	return reports
}

// judge appends a report if obj, what a read returned for k, is older
// than e, the write of k the cache had not applied when the read began
// (cur).
func (d *Detector) judge(reports []stalereads.Report, op string, k objKey, e entry, cur freshness.RV, obj any) []stalereads.Report {
	m, err := meta.Accessor(obj)
	if err != nil {
		return reports
	}
	got, err := freshness.ParseRV(m.GetResourceVersion())
	switch {
	case e.deleted && deletedAlive(m, e):
		r := d.report(stalereads.ReadDeleted, op, k, e, cur)
		r.ResourceVersion, r.UID = m.GetResourceVersion(), m.GetUID()
		return append(reports, r)
	case e.deleted:
		return reports // recreated, or terminating since
	case err == nil && got.Compare(e.rv) < 0:
		r := d.report(stalereads.ReadOlder, op, k, e, cur)
		r.ResourceVersion = m.GetResourceVersion()
		return append(reports, r)
	}
	return reports
}

// missing appends a report for a read that returned no object for k if
// the write e put it in the informer's scope and the cache has still not
// applied it: otherwise the object may be gone since (deleted by someone
// else after the write).
func (d *Detector) missing(reports []stalereads.Report, op string, k objKey, e entry, cur freshness.RV) []stalereads.Report {
	if e.deleted || !e.inScope || d.cfg.Applied().AtLeast(e.rv) {
		return reports
	}
	return append(reports, d.report(stalereads.ReadMissing, op, k, e, cur))
}

func (d *Detector) report(kind stalereads.Kind, op string, k objKey, e entry, cur freshness.RV) stalereads.Report {
	return stalereads.Report{Kind: kind, Resource: d.cfg.Resource, Informer: d.cfg.Informer, Key: resources.Key(k.namespace, k.name), Op: op,
		WrittenResourceVersion: e.rv.String(), CacheResourceVersion: cur.String(), SinceWrite: time.Since(e.at)}
}

func (d *Detector) deliver(reports []stalereads.Report) {
	for _, r := range reports {
		d.rep.report(r)
	}
}
