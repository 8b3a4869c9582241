package consistency

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/readyourwrites"
)

// DefaultMaxWait is how long EnsureReady waits for the caches before it
// skips the sync, when no WithMaxWait option is given: longer than a
// healthy informer's write-to-visible latency (a few milliseconds, about
// 10 at p99 on a loaded machine), so that a healthy cache costs no skip;
// short, because a wait holds one of the controller's few workers, and a
// skipped owner is queued again the moment its caches are fresh (by the
// controller's own event handlers, or the Store's resync). Measured on
// kube-controller-manager's ReplicaSet controller under watch lag, a
// 100 ms wait made median convergence 12 % slower than upstream's store;
// not waiting at all was slower too, each skip coming back through the
// controller's rate-limited queue as another failed sync.
const DefaultMaxWait = 20 * time.Millisecond

// DefaultLostWriteCheck is how long an owner stays skipped before the
// Store asks the server whether the write it waits for still exists, when
// no WithLostWriteCheck option is given.
const DefaultLostWriteCheck = time.Second

// lostCheckTimeout bounds the consistent read of a lost-write check.
const lostCheckTimeout = 2 * time.Second

// Outcome says how an EnsureReady call ended, for metrics.
type Outcome string

// The outcomes of EnsureReady.
const (
	// OutcomeReady: the caches already held the owner's writes (or
	// nothing was recorded for it).
	OutcomeReady Outcome = "ready"
	// OutcomeWaited: the caches caught up within the bounded wait.
	OutcomeWaited Outcome = "waited"
	// OutcomeSkipped: a cache was still behind after the wait; EnsureReady
	// returned a *ConsistencyError.
	OutcomeSkipped Outcome = "skipped"
	// OutcomeLost: a consistent read showed the server below a write
	// recorded for the owner (an etcd restore lost it); its records were
	// dropped and the sync proceeded.
	OutcomeLost Outcome = "lost"
	// OutcomeIncomparable: an informer's resource versions cannot be
	// ordered; the records were dropped and the sync proceeded (fail open,
	// as upstream's store does).
	OutcomeIncomparable Outcome = "incomparable"
)

// Outcomes returns every Outcome, for metrics that export them all. Each
// call returns a new slice.
func Outcomes() []Outcome {
	return []Outcome{OutcomeReady, OutcomeWaited, OutcomeSkipped, OutcomeLost, OutcomeIncomparable}
}

// Metrics receives a Store's measurements. Package metrics implements it
// for Prometheus (metrics.NewConsistencyMetrics). Calls are made with no
// lock of the Store held, from the controller's workers and from informer
// callbacks: they must be quick and safe for concurrent use.
type Metrics interface {
	// ObserveEnsureReady records how an EnsureReady call ended and how
	// long it waited for the caches (0 when it did not wait).
	ObserveEnsureReady(outcome Outcome, waited time.Duration)
	// ObserveSkip records a skipped sync and the resource whose cache was
	// behind.
	ObserveSkip(gr schema.GroupResource)
	// ObserveFreshAfterSkip records how long after a skip the caches
	// held the skipped owner's writes.
	ObserveFreshAfterSkip(d time.Duration)
}

// Option configures a Store.
type Option func(*options)

type options struct {
	ownerGR   *schema.GroupResource
	maxWait   time.Duration
	lostCheck time.Duration
	onFresh   func(types.NamespacedName)
	metrics   Metrics
	ownerKind schema.GroupKind
	ryw       readyourwrites.Options
	logger    *klog.Logger
	clock     clock.PassiveClock
}

// WithMaxWait bounds how long EnsureReady waits for the caches before it
// skips the sync (default DefaultMaxWait). Zero or negative: it never
// waits, and checks as upstream's store does.
func WithMaxWait(d time.Duration) Option {
	return func(o *options) {
		if d < 0 {
			d = 0
		}
		o.maxWait = d
	}
}

// WithLostWriteCheck sets how long an owner stays skipped before
// EnsureReady asks the server, with one consistent read through the
// lagging informer (shared by every owner skipped on it and sent after
// their writes), whether the server has reached the write it waits for
// (default DefaultLostWriteCheck). A server below it was restored from an
// older etcd and lost the write: the owner's records are dropped
// (OutcomeLost). Zero or negative turns the check off (the informer's own
// probes still find such writes when they take the route that can).
func WithLostWriteCheck(d time.Duration) Option {
	return func(o *options) { o.lostCheck = d }
}

// WithOnFresh calls f with an owner whose sync EnsureReady skipped, the
// moment every cache holds what was recorded for it (or a write of it is
// found lost): for a controller that can re-add the key to its workqueue
// then (queue.Add), instead of waiting out its rate limiter's backoff. f
// runs on the informer's goroutine that made the cache fresh, with no lock
// held; it must be quick and must not block. Without it, a Store with
// WithOwnerResource tells the owner again to its informer's handlers then
// (a resync of that one object), which upstream's controllers queue.
func WithOnFresh(f func(owner types.NamespacedName)) Option {
	return func(o *options) { o.onFresh = f }
}

// WithMetrics reports the Store's measurements to m.
func WithMetrics(m Metrics) Option {
	return func(o *options) { o.metrics = m }
}

// WithOwnerKind sets the kind of the owners (ReplicaSet.apps, say) under
// which writes are recorded in the ReadYourWrites: it names them in errors
// and logs. Each Store keeps its own records, so it is not needed to tell
// owners of different controllers apart.
func WithOwnerKind(gk schema.GroupKind) Option {
	return func(o *options) { o.ownerKind = gk }
}

// WithOwnerResource names the owners' resource (replicasets.apps for the
// ReplicaSet controller). The Store then reads, once, each owner created
// while it runs (an add event after its informer's initial list) from the
// server before the owner's first sync, and that sync waits for the
// owner's informer to hold that copy, as for a write of the owner's:
// under watch lag an owner's add event arrives late, and whoever created
// it may have changed it since (a Deployment scales its new ReplicaSet up
// within milliseconds), so a first sync on the created copy writes a
// status the server refuses with 409 Conflict, or acts on a spec already
// replaced. The cost is one consistent read of one object per owner
// created, and an entry per owner (its name and UID) while it exists;
// owners from the initial list are not read. Without this option
// (the default), the Store knows only the owners' own writes, as
// upstream's does. With it, and no WithOnFresh, an owner whose sync was
// skipped is resynced to its informer's handlers the moment its caches
// hold its writes (cache.FreshInformer.ResyncKey), so that a controller
// that queues owners on update events syncs it then, not after its queue's
// backoff.
func WithOwnerResource(gr schema.GroupResource) Option {
	return func(o *options) { o.ownerGR = &gr }
}

// WithReadYourWritesOptions sets the bounds of the records kept
// (readyourwrites.Options: MaxOwners, OwnerIdleTimeout, Clock).
func WithReadYourWritesOptions(opts readyourwrites.Options) Option {
	return func(o *options) { o.ryw = opts }
}

// WithLogger logs through logger (default: klog.Background()).
func WithLogger(logger klog.Logger) Option {
	return func(o *options) { o.logger = &logger }
}

// WithClock measures waits and skips with c (default: the real clock).
func WithClock(c clock.PassiveClock) Option {
	return func(o *options) { o.clock = c }
}

// Store is kube-controller-manager's ConsistencyStore on freshinformer's
// informers (see the package documentation). It is safe for concurrent
// use; as upstream's, EnsureReady must not run concurrently with WroteAt
// for the same owner (a workqueue never syncs one key on two workers).
type Store struct {
	source    cache.InformerSource
	ownerGR   *schema.GroupResource // WithOwnerResource's; nil: none
	ryw       *readyourwrites.ReadYourWrites
	maxWait   time.Duration
	lostCheck time.Duration
	onFresh   func(types.NamespacedName)
	metrics   Metrics
	kind      schema.GroupKind
	log       klog.Logger
	clock     clock.PassiveClock

	mu     sync.Mutex // guards owners, each ownerState's fields, servers, seen, hooked, reads and doubtSkipped; taken after no other lock (nothing is called with it held)
	owners map[types.NamespacedName]*ownerState
	// seen holds the owners of WithOwnerResource's resource the owner
	// informers' handlers heard of (one entry per owner, until it is
	// deleted); hooked those informers, with their handlers'
	// registrations.
	seen   map[types.NamespacedName]seenOwner
	hooked map[*cache.FreshInformer]toolscache.ResourceEventHandlerRegistration
	// servers holds, per informer, the last consistent read of a
	// lost-write check.
	servers map[*cache.FreshInformer]serverRead
	// reads holds the resources the owners' syncs read: those written
	// through (WroteAt) and the owners' own (WithOwnerResource). It is
	// replaced, never changed in place, so that it is read unlocked.
	reads []schema.GroupResource
	// doubtSkipped holds the owners skipped while a cache was in doubt
	// that a callback kept on it hands back (whenTrusted).
	doubtSkipped map[types.NamespacedName]struct{}
}

// serverRead is a consistent read's answer and when it was sent.
type serverRead struct {
	rv   freshness.RV
	sent time.Time
}

// ownerState is what the Store knows of an owner with writes recorded.
type ownerState struct {
	uid types.UID
	// wrote is when the last write was recorded: a consistent read sent
	// before it cannot show the write lost.
	wrote time.Time
	// firstSkip is when the owner was first skipped since it was last
	// ready.
	firstSkip time.Time
	// watch calls off the callback kept on the caches after a skip; nil
	// when none is kept.
	watch     func() bool
	skippedAt time.Time
	// lost is the error of a write of the owner that a restore made
	// unreachable, found by the callback; the next EnsureReady drops the
	// owner's records and proceeds.
	lost error
}

// NewStore returns a Store over the informers of source (a factory of
// package cache, an InformerList, ...).
func NewStore(source cache.InformerSource, opts ...Option) *Store {
	o := options{maxWait: DefaultMaxWait, lostCheck: DefaultLostWriteCheck}
	for _, opt := range opts {
		opt(&o)
	}
	if o.clock == nil {
		o.clock = clock.RealClock{}
	}
	log := klog.Background()
	if o.logger != nil {
		log = *o.logger
	}
	if o.ryw.Timeout <= 0 {
		o.ryw.Timeout = max(o.maxWait, time.Millisecond)
	}
	s := &Store{
		source:    source,
		ownerGR:   o.ownerGR,
		seen:      map[types.NamespacedName]seenOwner{},
		hooked:    map[*cache.FreshInformer]toolscache.ResourceEventHandlerRegistration{},
		ryw:       readyourwrites.NewWithOptions(source, o.ryw),
		maxWait:   o.maxWait,
		lostCheck: o.lostCheck,
		onFresh:   o.onFresh,
		metrics:   o.metrics,
		kind:      o.ownerKind,
		log:       log.WithName("consistency"),
		clock:     o.clock,
		owners:    map[types.NamespacedName]*ownerState{},
		servers:   map[*cache.FreshInformer]serverRead{},

		doubtSkipped: map[types.NamespacedName]struct{}{},
	}
	if s.ownerGR != nil {
		s.reads = []schema.GroupResource{*s.ownerGR}
	}
	s.hookOwnerInformers()
	return s
}

func (s *Store) owner(nn types.NamespacedName, uid types.UID) readyourwrites.Owner {
	return readyourwrites.Owner{GroupKind: s.kind, NamespacedName: nn, UID: uid}
}

// WroteAt records that a write of resource gr, on behalf of owner (whose
// UID is ownerUID), returned resource version rv: the owner's next
// EnsureReady waits for every informer of gr that can hold objects of the
// owner's namespace to hold rv. A write for a new UID replaces what was
// recorded for the owner's predecessor. A resource no informer caches and
// a malformed rv are not recorded (upstream's store fails open on both).
func (s *Store) WroteAt(owner types.NamespacedName, ownerUID types.UID, gr schema.GroupResource, rv string) {
	s.mu.Lock()
	st := s.owners[owner]
	if st == nil || st.uid != ownerUID {
		if st != nil && st.watch != nil {
			defer st.watch()
		}
		st = &ownerState{uid: ownerUID}
		s.owners[owner] = st
	}
	st.wrote = s.clock.Now()
	if !slices.Contains(s.reads, gr) {
		s.reads = append(slices.Clip(s.reads), gr) // a new array: readers hold the old one
	}
	s.mu.Unlock()
	if err := s.ryw.RecordResourceVersion([]readyourwrites.Owner{s.owner(owner, ownerUID)}, gr, owner.Namespace, rv); err != nil {
		s.log.V(4).Info("Write not recorded: its freshness cannot be checked", "owner", owner, "resource", gr, "resourceVersion", rv, "err", err)
	}
}

// Clear drops what was recorded for owner if its UID is ownerUID, or
// whatever its UID when ownerUID is empty (upstream's semantics).
func (s *Store) Clear(owner types.NamespacedName, ownerUID types.UID) {
	s.mu.Lock()
	if e, ok := s.seen[owner]; ok && (ownerUID == "" || e.uid == "" || e.uid == ownerUID) {
		delete(s.seen, owner) // the controllers clear an owner they found deleted
	}
	st := s.owners[owner]
	if st == nil || (ownerUID != "" && st.uid != ownerUID) {
		s.mu.Unlock()
		return
	}
	delete(s.owners, owner)
	s.mu.Unlock()
	if st.watch != nil {
		st.watch()
	}
	s.ryw.Forget(s.owner(owner, st.uid))
}

// EnsureReady returns nil once every cache holds what was recorded for
// owner, waiting for at most the Store's bound (WithMaxWait); otherwise a
// *ConsistencyError naming the informer behind. See the package
// documentation for how a skipped owner is synced again and what a
// restore does.
func (s *Store) EnsureReady(owner types.NamespacedName) error {
	return s.EnsureReadyContext(context.Background(), owner)
}

// EnsureReadyContext is EnsureReady with a context that can cut its wait
// short (the controller's, so that shutting down does not wait).
func (s *Store) EnsureReadyContext(ctx context.Context, owner types.NamespacedName) error {
	if s.ownerGR != nil {
		s.readCreatedOwner(ctx, owner)
	}
	if err := s.awaitTrusted(ctx, owner); err != nil {
		return err
	}
	s.mu.Lock()
	st := s.owners[owner]
	var lost error
	if st != nil {
		lost = st.lost
	}
	s.mu.Unlock()
	if st == nil {
		s.observe(OutcomeReady, 0)
		return nil
	}
	o := s.owner(owner, st.uid)
	if lost != nil {
		return s.lose(owner, st, lost, 0)
	}
	err := s.ryw.CheckFresh(o)
	if err == nil {
		s.done(owner, st)
		s.observe(OutcomeReady, 0)
		return nil
	}
	var nf *readyourwrites.NotFreshError
	if !errors.As(err, &nf) || incomparable(nf) {
		return s.failOpen(owner, st, err)
	}
	var waited time.Duration
	if s.maxWait > 0 {
		var settled bool
		if nf, waited, settled, err = s.waitFresh(ctx, owner, st, o); settled {
			return err
		}
	}
	if lost := s.checkLost(ctx, st, nf); lost != nil {
		return s.lose(owner, st, lost, waited)
	}
	s.skipped(owner, st, o)
	s.observe(OutcomeSkipped, waited)
	if s.metrics != nil {
		s.metrics.ObserveSkip(nf.Resource)
	}
	return &ConsistencyError{
		ReadRV: nf.Observed, WroteRV: nf.Written, GroupResource: nf.Resource,
		Owner: owner, Scope: nf.Scope, InformerName: nf.Name, Waited: waited,
	}
}

// anyVersion is the lowest resource version: a cache is fresh to it
// exactly when it is trusted and nothing puts it in doubt.
const anyVersion = "1"

// awaitTrusted holds the owner's sync, for at most the Store's bound,
// while a cache it reads is in doubt: its stream broke (an apiserver
// restarting ends its watches) or a restore is being told, and it has not
// yet shown that the server did not go back, or relisted from the
// restored one. Such a cache may hold a history the server lost: after an
// etcd restore, the ReplicaSet controller read its pods from a cache
// already relisted and its ReplicaSets from one still holding a spec the
// server forgot, and created pods beyond the need. This holds owners with
// nothing recorded too. It skips with a *ConsistencyError naming the
// informer (WroteRV empty) when the bound passes. Informers that never
// synced, or cannot order resource versions, are left to the checks that
// follow, which fail open on them.
func (s *Store) awaitTrusted(ctx context.Context, owner types.NamespacedName) error {
	s.mu.Lock()
	reads := s.reads
	s.mu.Unlock()
	var start time.Time
	var wctx context.Context
	for _, gr := range reads {
		for _, inf := range s.source.FreshInformersForResource(gr) {
			if ns := inf.Selector().Namespace; (ns != "" && ns != owner.Namespace) || !inf.AdmitsNamespace() || !inf.HasSynced() {
				continue // a cache never synced holds no history to doubt (nor has a controller's unit test started it)
			}
			err := inf.CheckFreshness(anyVersion)
			if err == nil || !errors.Is(err, freshness.ErrNotFresh) {
				continue
			}
			if start.IsZero() {
				start = s.clock.Now()
				var cancel context.CancelFunc
				wctx, cancel = context.WithTimeout(ctx, s.maxWait)
				defer cancel()
			}
			if s.maxWait > 0 {
				// The stream's own proof ends the doubt: no probe for it.
				if err = inf.WaitForStream(wctx, anyVersion); err == nil {
					continue
				}
			}
			if errors.Is(err, freshness.ErrStopped) {
				return err // the controller is shutting down: no sync should proceed
			}
			waited := s.clock.Since(start)
			s.observe(OutcomeSkipped, waited)
			if s.metrics != nil {
				s.metrics.ObserveSkip(gr)
			}
			s.whenTrusted(owner, inf)
			return &ConsistencyError{ReadRV: inf.LastObservedResourceVersion(), GroupResource: gr, Owner: owner,
				Scope: inf.Selector(), InformerName: inf.Name(), Waited: waited}
		}
	}
	return nil
}

// whenTrusted hands an owner skipped while inf's cache was in doubt back
// (WithOnFresh's function, or, with WithOwnerResource, a resync of it) the
// moment that cache is trusted again, once per owner and doubt: an outage
// skips the owner on each of its events, and the rate-limited queue's
// backoff grows with every skip.
func (s *Store) whenTrusted(owner types.NamespacedName, inf *cache.FreshInformer) {
	if s.onFresh == nil && s.ownerGR == nil {
		return
	}
	s.mu.Lock()
	_, kept := s.doubtSkipped[owner]
	s.doubtSkipped[owner] = struct{}{}
	s.mu.Unlock()
	if kept {
		return
	}
	inf.AfterStream(anyVersion, func(err error) {
		s.mu.Lock()
		delete(s.doubtSkipped, owner)
		s.mu.Unlock()
		switch {
		case err != nil: // stopped, or no longer able to order resource versions
		case s.onFresh != nil:
			s.onFresh(owner)
		default:
			s.resync(owner)
		}
	})
}

// waitFresh waits, for at most the Store's bound, for the caches to hold
// what was recorded for owner. If settled, the outcome is observed and err
// is what EnsureReady returns; if not, the caches are still behind, where
// nf says.
func (s *Store) waitFresh(ctx context.Context, owner types.NamespacedName, st *ownerState, o readyourwrites.Owner) (nf *readyourwrites.NotFreshError, waited time.Duration, settled bool, err error) {
	start := s.clock.Now()
	wctx, cancel := context.WithTimeout(ctx, s.maxWait)
	werr := s.awaitCaches(wctx, o)
	cancel()
	waited = s.clock.Since(start)
	switch {
	case werr == nil:
		s.done(owner, st)
		s.observe(OutcomeWaited, waited)
		return nil, waited, true, nil
	case errors.Is(werr, freshness.ErrTooLargeResourceVersion):
		return nil, waited, true, s.lose(owner, st, werr, waited)
	}
	// Look again: the caches may have caught up as the wait ended, and
	// the error must say where they are now.
	cerr := s.ryw.CheckFresh(o)
	if cerr == nil {
		s.done(owner, st)
		s.observe(OutcomeWaited, waited)
		return nil, waited, true, nil
	}
	if !errors.As(cerr, &nf) || incomparable(nf) {
		return nil, waited, true, s.failOpen(owner, st, cerr)
	}
	return nf, waited, false, nil
}

// lose drops owner's records, a write of which an etcd restore lost
// (lost says how it is known), and lets its sync proceed: nil.
func (s *Store) lose(owner types.NamespacedName, st *ownerState, lost error, waited time.Duration) error {
	s.log.Error(lost, "A write recorded for the owner is beyond the server: an etcd restore lost it; the owner's records are dropped and its sync proceeds on the caches as they are after the restore", "owner", owner)
	s.drop(owner, st)
	s.observe(OutcomeLost, waited)
	return nil
}

// checkLost returns an error matching freshness.ErrTooLargeResourceVersion
// when the owner has been skipped for the lost-write check's delay and a
// consistent read through the lagging informer, sent after the owner's
// last write, answers below the write it waits for: only a server restored
// from an older etcd does that. One read per informer and delay serves
// every owner skipped on it.
func (s *Store) checkLost(ctx context.Context, st *ownerState, nf *readyourwrites.NotFreshError) error {
	if s.lostCheck <= 0 || nf.Informer == nil {
		return nil
	}
	written, err := freshness.ParseRV(nf.Written)
	if err != nil {
		return nil
	}
	now := s.clock.Now()
	s.mu.Lock()
	if st.firstSkip.IsZero() {
		st.firstSkip = now
	}
	due := now.Sub(st.firstSkip) >= s.lostCheck
	wrote := st.wrote
	read, ok := s.servers[nf.Informer]
	s.mu.Unlock()
	if !due {
		return nil
	}
	if !ok || !read.sent.After(wrote) || now.Sub(read.sent) >= s.lostCheck {
		sent := s.clock.Now()
		rctx, cancel := context.WithTimeout(ctx, lostCheckTimeout)
		rv, err := nf.Informer.ServerResourceVersion(rctx)
		cancel()
		if err != nil {
			s.log.V(4).Info("Lost-write check: consistent read failed", "resource", nf.Resource, "err", err)
			return nil
		}
		parsed, err := freshness.ParseRV(rv)
		if err != nil {
			return nil
		}
		read = serverRead{rv: parsed, sent: sent}
		s.mu.Lock()
		if cur, ok := s.servers[nf.Informer]; !ok || cur.sent.Before(sent) {
			s.servers[nf.Informer] = read
		}
		s.mu.Unlock()
	}
	if !read.sent.After(wrote) || read.rv.Compare(written) >= 0 {
		return nil
	}
	return fmt.Errorf("%s cache waits for %s: %w", nf.Resource, nf.Written,
		&freshness.TooLargeResourceVersionError{ResourceVersion: nf.Written, ServerResourceVersion: read.rv.String()})
}

// incomparable reports whether the informer behind cannot order resource
// versions (its server's are not KEP-5504 integers): waiting cannot help.
func incomparable(nf *readyourwrites.NotFreshError) bool {
	return nf.Informer != nil && errors.Is(nf.Informer.CheckFreshness(nf.Written), freshness.ErrIncomparable)
}

// failOpen drops the owner's records and lets the sync proceed, as
// upstream's store does when it cannot compare.
func (s *Store) failOpen(owner types.NamespacedName, st *ownerState, err error) error {
	if errors.Is(err, freshness.ErrStopped) {
		return err // the controller is shutting down: no sync should proceed
	}
	s.log.V(2).Info("Freshness cannot be decided; the sync proceeds", "owner", owner, "err", err)
	s.drop(owner, st)
	s.observe(OutcomeIncomparable, 0)
	return nil
}

// done forgets the owner once its caches held its writes, unless it was
// written again or recreated meanwhile.
func (s *Store) done(owner types.NamespacedName, st *ownerState) {
	s.mu.Lock()
	w := st.watch
	st.watch = nil
	if s.owners[owner] == st { // no WroteAt runs concurrently for the owner
		delete(s.owners, owner)
	}
	s.mu.Unlock()
	if w != nil {
		w()
	}
}

// drop forgets everything recorded for the owner.
func (s *Store) drop(owner types.NamespacedName, st *ownerState) {
	s.mu.Lock()
	if s.owners[owner] == st {
		delete(s.owners, owner)
	}
	w := st.watch
	st.watch = nil
	s.mu.Unlock()
	if w != nil {
		w()
	}
	s.ryw.Forget(s.owner(owner, st.uid))
}

// skipped keeps a callback on the caches behind, once per owner, until they
// hold its writes or cannot: it calls WithOnFresh's function, and notes a
// write found lost for the next EnsureReady.
func (s *Store) skipped(owner types.NamespacedName, st *ownerState, o readyourwrites.Owner) {
	s.mu.Lock()
	if st.watch != nil || s.owners[owner] != st {
		s.mu.Unlock()
		return
	}
	st.skippedAt = s.clock.Now()
	st.watch = func() bool { return false } // taken: another skip does not register twice
	s.mu.Unlock()
	stop := s.whenFresh(o, func(err error) { s.fresh(owner, st, err) })
	s.mu.Lock()
	if st.watch != nil && s.owners[owner] == st {
		st.watch = stop
		stop = nil
	}
	s.mu.Unlock()
	if stop != nil { // fired at once, or the owner was cleared meanwhile
		stop()
	}
}

// fresh is the callback kept on the caches after a skip.
func (s *Store) fresh(owner types.NamespacedName, st *ownerState, err error) {
	s.mu.Lock()
	current := s.owners[owner] == st
	st.watch = nil
	if err != nil && errors.Is(err, freshness.ErrTooLargeResourceVersion) && current {
		st.lost = err
	}
	lost := st.lost != nil
	since := s.clock.Since(st.skippedAt)
	s.mu.Unlock()
	if !current {
		return
	}
	if err != nil && !lost {
		// An informer stopped or cannot order resource versions: the next
		// EnsureReady says so; nothing to wake.
		return
	}
	if s.metrics != nil {
		s.metrics.ObserveFreshAfterSkip(since)
	}
	switch {
	case s.onFresh != nil:
		s.onFresh(owner)
	case s.ownerGR != nil:
		s.resync(owner)
	}
}

// resync tells the owner again to its informers' handlers, as a resync
// does (cache.FreshInformer.ResyncKey): upstream's controllers hand a
// skipped sync to a rate-limited queue, whose backoff grows with each
// skip, and queue an owner on every update event of it, so that the owner
// is synced now rather than after the backoff.
func (s *Store) resync(owner types.NamespacedName) {
	key := owner.Name
	if owner.Namespace != "" {
		key = owner.Namespace + "/" + owner.Name
	}
	for _, inf := range s.source.FreshInformersForResource(*s.ownerGR) {
		inf.ResyncKey(key)
	}
}

func (s *Store) observe(o Outcome, waited time.Duration) {
	if s.metrics != nil {
		s.metrics.ObserveEnsureReady(o, waited)
	}
}

// streamOnly reports whether the Store waits for inf's stream alone to
// bring a write recorded on it: inf admits every object of its namespace
// (so each write routed to it comes back on its stream), and the Store
// reads the server itself for writes a restore lost (WithLostWriteCheck).
// Then no wait or callback of the Store makes the informer probe the
// server: under watch lag, a probe only asks what the stream is about to
// deliver (a list, often a watch too, per quiet spell).
func (s *Store) streamOnly(inf *cache.FreshInformer) bool {
	return s.lostCheck > 0 && inf.AdmitsNamespace()
}

// awaitCaches waits until every cache holds what was recorded for o, or ctx
// ends: on the informer behind, then the next one behind, from their own
// streams where streamOnly allows (WaitForStream), else as
// readyourwrites' EnsureFresh does.
func (s *Store) awaitCaches(ctx context.Context, o readyourwrites.Owner) error {
	var last *cache.FreshInformer
	var lastRV string
	for {
		err := s.ryw.CheckFresh(o)
		if err == nil {
			return nil
		}
		var nf *readyourwrites.NotFreshError
		if !errors.As(err, &nf) || nf.Informer == nil || nf.Deleted || !s.streamOnly(nf.Informer) ||
			(nf.Informer == last && nf.Written == lastRV) { // reached, yet not fresh: let EnsureFresh say why
			return s.ryw.EnsureFresh(ctx, o)
		}
		if err := nf.Informer.WaitForStream(ctx, nf.Written); err != nil {
			return err
		}
		last, lastRV = nf.Informer, nf.Written
	}
}

// freshWatch is one whenFresh registration chain. mu guards its fields; it
// is a leaf: nothing is called with it held.
type freshWatch struct {
	s  *Store
	o  readyourwrites.Owner
	fn func(error)

	mu    sync.Mutex  // guards the fields below; a leaf
	gen   uint64      // registrations made
	stop  func() bool // calls off the newest registration
	ended bool        // fn has run or the watch was stopped
}

// whenFresh calls fn once every cache holds what was recorded for o (with
// nil; the records are settled, as CheckFresh does), or with the error of
// an informer that cannot catch up. It is readyourwrites' WhenFresh,
// registered on one lagging informer at a time, from its own stream
// (AfterStream) where streamOnly allows, so that a skipped owner costs no
// probe. stop calls it off, as WhenFresh's does.
func (s *Store) whenFresh(o readyourwrites.Owner, fn func(error)) (stop func() bool) {
	w := &freshWatch{s: s, o: o, fn: fn}
	w.step(nil)
	return w.cancel
}

// finish runs fn once, unless the watch was called off.
func (w *freshWatch) finish(err error) {
	w.mu.Lock()
	if w.ended {
		w.mu.Unlock()
		return
	}
	w.ended = true
	w.mu.Unlock()
	w.fn(err)
}

// step looks at the caches again (after a callback said one informer
// caught up, or failed with err) and registers on the next informer that
// is behind.
func (w *freshWatch) step(err error) {
	if err == nil {
		err = w.s.ryw.CheckFresh(w.o)
	}
	if err == nil {
		w.finish(nil)
		return
	}
	var nf *readyourwrites.NotFreshError
	if !errors.As(err, &nf) || nf.Informer == nil {
		w.finish(err)
		return
	}
	w.mu.Lock()
	if w.ended {
		w.mu.Unlock()
		return
	}
	w.gen++
	gen := w.gen
	w.mu.Unlock()
	st := w.register(nf)
	w.mu.Lock()
	if w.ended {
		w.mu.Unlock()
		st()
		return
	}
	if w.gen == gen { // no newer registration was made meanwhile (a callback run at once)
		w.stop = st
	}
	w.mu.Unlock()
}

// register waits for the informer nf names: from its own stream where
// streamOnly allows.
func (w *freshWatch) register(nf *readyourwrites.NotFreshError) (stop func() bool) {
	switch {
	case nf.Deleted:
		return w.s.ryw.WhenFresh(w.o, w.finish)
	case w.s.streamOnly(nf.Informer):
		return nf.Informer.AfterStream(nf.Written, w.step)
	default:
		return nf.Informer.AfterFreshness(nf.Written, w.step)
	}
}

// cancel calls the watch off; false if fn ran or it was called off before.
func (w *freshWatch) cancel() bool {
	w.mu.Lock()
	if w.ended {
		w.mu.Unlock()
		return false
	}
	w.ended = true
	st := w.stop
	w.mu.Unlock()
	if st != nil {
		st()
	}
	return true
}

// cachedUID returns owner's UID from inf's cache; if it is not cached
// (deleted), the Store forgets the owner, with nothing to remember.
func (s *Store) cachedUID(inf *cache.FreshInformer, owner types.NamespacedName) (types.UID, bool) {
	key := owner.Name
	if owner.Namespace != "" {
		key = owner.Namespace + "/" + owner.Name
	}
	obj, ok, err := inf.GetIndexer().GetByKey(key)
	m, merr := meta.Accessor(obj)
	if err != nil || !ok || merr != nil {
		s.mu.Lock()
		if e, ok := s.seen[owner]; ok && e.uid == "" {
			delete(s.seen, owner)
		}
		s.mu.Unlock()
		return "", false
	}
	return m.GetUID(), true
}

// hookOwnerInformers registers, on each informer of the owners' resource
// not hooked yet, the handler that tells owners added after its initial
// list from those in it (WithOwnerResource).
func (s *Store) hookOwnerInformers() {
	if s.ownerGR == nil {
		return
	}
	for _, inf := range s.source.FreshInformersForResource(*s.ownerGR) {
		s.mu.Lock()
		_, done := s.hooked[inf]
		if !done {
			s.hooked[inf] = nil // taken; the registration follows
		}
		s.mu.Unlock()
		if done {
			continue
		}
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, isInInitialList bool) {
				m, err := meta.Accessor(obj)
				if err != nil {
					return
				}
				nn := types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}
				s.mu.Lock()
				defer s.mu.Unlock()
				if e, ok := s.seen[nn]; !ok || (e.uid != m.GetUID() && !(e.uid == "" && e.synced)) {
					s.seen[nn] = seenOwner{uid: m.GetUID(), created: !isInInitialList}
				}
			},
			DeleteFunc: func(obj any) {
				if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
					obj = t.Obj
				}
				if m, err := meta.Accessor(obj); err == nil {
					s.mu.Lock()
					delete(s.seen, types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()})
					s.mu.Unlock()
				}
			},
		})
		if err == nil {
			s.mu.Lock()
			s.hooked[inf] = reg
			s.mu.Unlock()
		}
	}
}

// seenOwner is what the Store knows of an owner of WithOwnerResource's
// resource: its UID, whether it was added after its informer's initial
// list (created while the Store runs), and whether its first sync began.
type seenOwner struct {
	uid             types.UID
	created, synced bool
}

// readCreatedOwner reads an owner added after its informer's initial list
// from the server, once, before its first sync, and records the copy the
// server holds as a write of the owner's when the informer does not hold
// it yet, so that the sync waits for it (WithOwnerResource). An owner
// whose add the Store's handler has not heard of yet (handlers run
// independently of each other: the controller's may have queued the owner
// first) is taken as created once the handler has heard the initial list.
func (s *Store) readCreatedOwner(ctx context.Context, owner types.NamespacedName) {
	s.mu.Lock()
	if len(s.hooked) == 0 {
		s.mu.Unlock()
		s.hookOwnerInformers() // the informers were made after the Store
		s.mu.Lock()
	}
	e, known := s.seen[owner]
	if known && e.synced {
		s.mu.Unlock()
		return
	}
	read := e.created
	if !known {
		read = true
		for _, reg := range s.hooked {
			if reg == nil || !reg.HasSynced() {
				read = false // the initial list is still being heard: the owner is likely in it
			}
		}
	}
	if known || read { // an owner not heard of, the initial list not heard yet: its add will say
		s.seen[owner] = seenOwner{uid: e.uid, synced: true}
	}
	s.mu.Unlock()
	if !read {
		return
	}
	for _, inf := range s.source.FreshInformersForResource(*s.ownerGR) {
		if ns := inf.Selector().Namespace; (ns != "" && ns != owner.Namespace) || !inf.AdmitsNamespace() {
			continue
		}
		uid := e.uid
		if !known {
			var ok bool
			if uid, ok = s.cachedUID(inf, owner); !ok {
				return
			}
		}
		rctx, cancel := context.WithTimeout(ctx, lostCheckTimeout)
		rv, found, err := inf.ServerResourceVersionOf(rctx, owner.Namespace, owner.Name)
		cancel()
		if err != nil || !found {
			s.log.V(4).Info("Created owner not read from the server; its first sync reads the cache as it is", "owner", owner, "found", found, "err", err)
			return
		}
		if inf.CheckFreshness(rv) != nil {
			s.WroteAt(owner, uid, *s.ownerGR, rv)
		}
		return
	}
}
