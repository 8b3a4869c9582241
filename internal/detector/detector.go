package detector

import (
	"hash/maphash"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/resources"
	"github.com/freshinformer/freshinformer/stalereads"
)

// MaxEntries bounds the writes a Detector remembers: the recorded-write
// bound of an informer (4096 keys, as for lost-write detection).
const MaxEntries = 4096

type objKey struct{ namespace, name string }

// entry is this process's newest recorded write of a key that the cache
// had not applied when it was recorded.
type entry struct {
	// rv is the write's resource version; for a delete, the one the
	// delete's response or the caller gave (the deletion's, or the last
	// one known before it), zero if none.
	rv      freshness.RV
	uid     types.UID
	at      time.Time
	seq     uint64 // order of recording, to leave out writes a read began before
	deleted bool
	inScope bool // the informer's scope certainly holds the written object
}

// Config configures a Detector.
type Config struct {
	Resource schema.GroupResource
	// Informer is the informer's name, "" if unnamed; Scope describes what
	// it lists ("all namespaces", "namespace ns, labels app=x"). The log
	// lines carry both, so a reader knows which informer read stale.
	Informer, Scope string
	// Applied returns the resource version the informer's indexer holds
	// every event up to: what reads are judged against.
	Applied func() freshness.RV
	// AfterApplied calls fn once the informer has applied rv, with nil,
	// or once it never will (stopped), with an error: at once if so
	// already, else on the goroutine that applied it, with the informer's
	// locks released. The Detector prunes what it recorded then.
	AfterApplied func(rv freshness.RV, fn func(error))
	// Indexer is the informer's own: the one its View reads, and the
	// Detector looks in to prune deletes the cache shows.
	Indexer toolscache.Indexer
	// InScope reports whether the informer's scope certainly holds obj: a
	// selector on a field it cannot check counts as no, so that an absent
	// object is never reported on a guess.
	InScope func(obj metav1.Object) bool
	// OnReport, if set, receives each report and takes the log's place:
	// reports are then logged only with LogReports, and the detector does
	// not announce itself.
	OnReport   func(stalereads.Report)
	LogReports bool
	// Halt fails at the first report no OnReport takes, with Fail (nil:
	// a panic carrying the report).
	Halt bool
	Fail func(stalereads.Report)
}

// Detector checks an informer's reads against this process's recorded
// writes the cache has not applied. It is safe for concurrent use. Its
// mutex is a leaf but for the indexer's lock and what Applied takes, taken
// under it; reports are delivered, and AfterApplied called, with it
// released.
type Detector struct {
	cfg      Config
	rep      *reporter
	seed     maphash.Seed
	reported atomic.Uint64 // stale reads found (Reported)

	pending atomic.Int64            // len(entries): 0 makes every read a pass-through
	seq     atomic.Uint64           // the last entry's seq
	filters atomic.Pointer[filters] // made at the first write

	mu      sync.RWMutex
	entries map[objKey]entry
	armed   bool // an AfterApplied callback that prunes is registered
}

// New returns a Detector for one informer. Until Started, it logs
// through klog.Background.
func New(cfg Config) *Detector {
	d := &Detector{cfg: cfg, seed: maphash.MakeSeed(), entries: map[objKey]entry{}}
	out := output{Handler: cfg.OnReport, LogReports: cfg.LogReports, Halt: cfg.Halt, Fail: cfg.Fail}
	d.rep = newReporter(out, func(stalereads.Report) { d.reported.Add(1) }, d.withScope(informerLogger(klog.Background(), cfg)))
	return d
}

// informerLogger names the informer as its run's logger does
// (FreshInformer.RunWithContext): its name, if any, and its resource.
func informerLogger(logger klog.Logger, cfg Config) klog.Logger {
	if cfg.Informer != "" {
		logger = klog.LoggerWithValues(logger, "informer", cfg.Informer)
	}
	return klog.LoggerWithValues(logger, "resource", cfg.Resource.String())
}

func (d *Detector) withScope(logger klog.Logger) klog.Logger {
	return klog.LoggerWithValues(logger, "scope", d.cfg.Scope)
}

// Started hands the Detector the logger of the informer's run, which
// names the informer and its resource, and logs once that the detector
// is on, unless a handler takes the log's place: with it on and nothing
// stale, the log then tells it apart from off.
func (d *Detector) Started(logger klog.Logger) {
	logger = d.withScope(logger)
	d.rep.logger.Store(&logger)
	d.rep.announce(logger, "Stale-read detector on: reads through this informer are checked against this process's recorded writes")
}

// Reported returns how many stale reads the Detector has found: the
// informer's own count, which its metrics export.
func (d *Detector) Reported() uint64 { return d.reported.Load() }

// Of returns the Detector behind an indexer View, nil for any other
// indexer.
func Of(idx toolscache.Indexer) *Detector {
	if v, ok := idx.(*View); ok {
		return v.d
	}
	return nil
}

// Unwrap returns the indexer a View reads from, idx itself otherwise: the
// library's own reads are not the caller's and are not checked.
func Unwrap(idx toolscache.Indexer) toolscache.Indexer {
	if v, ok := idx.(*View); ok {
		return v.raw
	}
	return idx
}

// Wrote records a write whose object the server returned, unless the
// cache has applied it already.
func (d *Detector) Wrote(obj metav1.Object) {
	rv, err := freshness.ParseRV(obj.GetResourceVersion())
	if err != nil || rv.IsZero() || d.cfg.Applied().AtLeast(rv) {
		return
	}
	d.add(objKey{obj.GetNamespace(), obj.GetName()}, entry{rv: rv, uid: obj.GetUID(), inScope: d.cfg.InScope(obj)})
}

// Deleted records a delete of obj (its UID is what counts), unless the
// cache no longer shows the object alive.
func (d *Detector) Deleted(obj metav1.Object) {
	e := entry{uid: obj.GetUID(), deleted: true}
	e.rv, _ = freshness.ParseRV(obj.GetResourceVersion())
	k := objKey{obj.GetNamespace(), obj.GetName()}
	if e.uid == "" || !d.holdsAlive(k, e) {
		return
	}
	d.add(k, e)
}

// Reset forgets every write: a declared regression rewrote the history
// they are judged against.
func (d *Detector) Reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clearLocked()
}

func (d *Detector) add(k objKey, e entry) {
	e.at = time.Now()
	d.mu.Lock()
	old, exists := d.entries[k]
	if exists && !e.deleted && old.rv.Compare(e.rv) > 0 {
		d.mu.Unlock() // a newer write of the key is recorded
		return
	}
	if !exists && len(d.entries) >= MaxEntries {
		d.pruneLocked()
		if len(d.entries) >= MaxEntries {
			d.mu.Unlock() // the cache is far behind: keep what is recorded
			return
		}
	}
	e.seq = d.seq.Add(1)
	d.entries[k] = e
	if !exists {
		d.count(k, 1)
		d.pending.Add(1)
	}
	d.armUnlock()
}

// armUnlock registers the pruning callback if none is, at the newest
// recorded resource version (deletes: the cache's next step), and unlocks
// d.mu.
func (d *Detector) armUnlock() {
	if d.armed || len(d.entries) == 0 {
		d.mu.Unlock()
		return
	}
	var target freshness.RV
	for _, e := range d.entries {
		if !e.deleted && e.rv.Compare(target) > 0 {
			target = e.rv
		}
	}
	if target.IsZero() { // deletes only
		var ok bool
		if target, ok = nextRV(d.cfg.Applied()); !ok {
			d.mu.Unlock() // pruned with the next write's
			return
		}
	}
	d.armed = true
	d.mu.Unlock()
	d.cfg.AfterApplied(target, d.reached)
}

// reached is the AfterApplied callback: it prunes what the cache now
// shows and registers the next one while writes remain.
func (d *Detector) reached(err error) {
	d.mu.Lock()
	d.armed = false
	if err != nil { // stopped, or resource versions that cannot be ordered
		d.clearLocked()
		d.mu.Unlock()
		return
	}
	d.pruneLocked()
	d.armUnlock()
}

// pruneLocked forgets the writes the cache has applied and the deletes it
// shows. d.mu is held.
func (d *Detector) pruneLocked() {
	cur := d.cfg.Applied()
	for k, e := range d.entries {
		if e.deleted && d.holdsAlive(k, e) || !e.deleted && !cur.AtLeast(e.rv) {
			continue
		}
		delete(d.entries, k)
		d.count(k, -1)
		d.pending.Add(-1)
	}
}

func (d *Detector) clearLocked() {
	for k := range d.entries {
		d.count(k, -1)
	}
	clear(d.entries)
	d.pending.Store(0)
}

// holdsAlive reports whether the informer's own indexer holds the deleted
// object (its UID) as before the delete.
func (d *Detector) holdsAlive(k objKey, e entry) bool {
	obj, ok, _ := d.cfg.Indexer.GetByKey(resources.Key(k.namespace, k.name))
	if !ok {
		return false
	}
	m, err := meta.Accessor(obj)
	return err == nil && deletedAlive(m, e)
}

// deletedAlive reports whether m is the deleted object in a state from
// before the delete: not terminating, or terminating at a resource
// version older than the delete's.
func deletedAlive(m metav1.Object, e entry) bool {
	if m.GetUID() != e.uid {
		return false
	}
	if m.GetDeletionTimestamp() == nil {
		return true
	}
	got, err := freshness.ParseRV(m.GetResourceVersion())
	return err == nil && got.Compare(e.rv) < 0
}

// count adds delta to k's slots. d.mu is held.
func (d *Detector) count(k objKey, delta int32) {
	f := d.filters.Load()
	if f == nil {
		f = &filters{}
		d.filters.Store(f)
	}
	f.byKey.add(maphash.String(d.seed, resources.Key(k.namespace, k.name)), delta)
	f.byName.add(maphash.String(d.seed, k.name), delta)
}

// mayHoldKey and mayHoldName report whether a read of a key, or of an
// object by its name, may concern a recorded write: false for nearly every
// key this process did not write, for one hash and one atomic load.
func (d *Detector) mayHoldKey(key string) bool {
	f := d.filters.Load()
	return f != nil && f.byKey.has(maphash.String(d.seed, key))
}

func (d *Detector) mayHoldName(name string) bool {
	f := d.filters.Load()
	return f != nil && f.byName.has(maphash.String(d.seed, name))
}

func (d *Detector) lookup(k objKey) (entry, bool) {
	d.mu.RLock()
	e, ok := d.entries[k]
	d.mu.RUnlock()
	return e, ok
}

// nextRV returns rv plus one, the cache's next step; false beyond 64
// bits (never an etcd revision).
func nextRV(rv freshness.RV) (freshness.RV, bool) {
	n, _ := rv.Uint64()
	if n == ^uint64(0) || (n == 0 && !rv.IsZero()) {
		return freshness.RV{}, false
	}
	next, err := freshness.ParseRV(strconv.FormatUint(n+1, 10))
	return next, err == nil
}
