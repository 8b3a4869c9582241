package apimodel

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// Namespace is the one namespace the model serves.
const Namespace = "ns"

// Annotations every served object carries: the revision of the write that
// produced it and that write's id (unique across restores, which reuse
// revisions). They are the truth when a served resourceVersion was mangled.
const (
	RevisionAnnotation = "apimodel.freshinformer.test/revision"
	WriteAnnotation    = "apimodel.freshinformer.test/write"
)

// FarFutureRV is the 40-digit resource version a misbehaving server puts on
// a bookmark.
const FarFutureRV = "9000000000000000000000000000000000000000"

// Options configure a Server.
type Options struct {
	// Seed drives every random choice the server makes (which replica
	// answers, which fault strikes).
	Seed uint64
	// Replicas is the number of apiservers behind the ListerWatcher, each
	// with its own watch cache (default 2).
	Replicas int
	// PageSize caps the items of one page when a list has a limit: the
	// server returns up to limit items, possibly fewer, with a continue
	// token (default 5, so that small collections paginate).
	PageSize int
	// TooLargeWait is how long a request for a revision the server (or the
	// answering replica) has not reached waits before "Too large resource
	// version" (504). kube-apiserver waits 3 s; the default is 50 ms.
	TooLargeWait time.Duration
}

// Faults are per-request and per-event probabilities, in [0, 1].
type Faults struct {
	// ListError: a list fails with a transient error (500, 429, 503 or
	// connection refused).
	ListError float64
	// WatchError: a watch request fails with a transient error.
	WatchError float64
	// GoneAtWatchStart: a watch from an exact revision is answered with 410
	// Gone (the replica's watch cache window no longer holds it), as an
	// error or as the stream's first event.
	GoneAtWatchStart float64
	// GoneInStream: after an event, the stream ends with a 410 ERROR event.
	GoneInStream float64
	// Close: after an event, the stream ends (a timeout, a proxy).
	Close float64
	// Bookmark: after an event, an honest bookmark (if requested).
	Bookmark float64

	// Misbehaving server.

	// Duplicate: an event is sent twice.
	Duplicate float64
	// Replay: after an event, an older event of the same stream is re-sent.
	Replay float64
	// OlderBookmark: after an event, a bookmark older than it.
	OlderBookmark float64
	// FarFutureBookmark: after an event, a bookmark at FarFutureRV.
	FarFutureBookmark float64
	// Malformed: an object event is served with a non-numeric
	// resourceVersion (the server accepts it back as a request parameter,
	// as a server with opaque resource versions would).
	Malformed float64
}

// Version identifies one state of one key. The zero Version is "absent".
type Version struct {
	Exists bool
	Rev    uint64
	Write  uint64
	UID    types.UID
}

func (v Version) String() string {
	if !v.Exists {
		return "absent"
	}
	return fmt.Sprintf("rev %d (write %d, uid %s)", v.Rev, v.Write, v.UID)
}

// VersionOf reads the Version of a served object from its annotations.
func VersionOf(obj metav1.Object) Version {
	a := obj.GetAnnotations()
	rev, err1 := strconv.ParseUint(a[RevisionAnnotation], 10, 64)
	write, err2 := strconv.ParseUint(a[WriteAnnotation], 10, 64)
	if err1 != nil || err2 != nil {
		return Version{}
	}
	return Version{Exists: true, Rev: rev, Write: write, UID: obj.GetUID()}
}

// Stats are the server's counters.
type Stats struct {
	Rev, Compacted uint64
	// Epoch counts restores.
	Epoch int
	// Lists counts complete list responses (the last page of a paginated
	// one); WatchLists counts initial-events-end bookmarks sent.
	Lists, WatchLists int
	// Watches counts watch streams opened; OpenWatches is how many are open
	// now (not ended by the server, stopped by the client or by its context),
	// MaxOpenWatches the most at once.
	Watches, OpenWatches, MaxOpenWatches int
	// LiveStreams counts streams whose events the client has neither read
	// to the end nor released with Stop (an HTTP stream and a decoding
	// goroutine in a real client); MaxLiveStreams the most at once.
	LiveStreams, MaxLiveStreams int
	// What a misbehaving server sent.
	Malformed, FarFuture, Duplicated, Replayed, OlderBookmarks int
	// StaleProxyLists counts lists and watch-lists answered by the stale
	// proxy.
	StaleProxyLists int
	// ElsewhereWrites counts revisions committed off the resource
	// (WriteElsewhere).
	ElsewhereWrites int
}

type record struct {
	rev   uint64
	typ   watch.EventType // Added, Modified or Deleted
	name  string
	obj   *corev1.ConfigMap // the state written (for a delete, the final state at the delete's revision)
	write uint64
}

func (r record) version() Version {
	if r.typ == watch.Deleted {
		return Version{}
	}
	return Version{Exists: true, Rev: r.rev, Write: r.write, UID: r.obj.UID}
}

type replica struct {
	frozen bool
	at     uint64 // the watch cache's revision while frozen
}

// Server is the model apiserver. It is safe for concurrent use: one mutex
// guards the model; each watch stream has a goroutine that hands events to
// the client.
type Server struct {
	opts Options

	mu        sync.Mutex
	rng       *rand.Rand
	rev       uint64
	compacted uint64
	history   []record            // the current timeline, ascending revisions
	byKey     map[string][]record // the same, per key
	live      map[string]*corev1.ConfigMap
	writeSeq  uint64
	uidSeq    uint64
	replicas  []replica
	faults    Faults
	stale     uint64 // the stale proxy's revision, 0 when off
	watchers  map[*watcher]struct{}
	changed   chan struct{} // closed and replaced on every change
	stats     Stats
	closed    bool
	down      bool            // restarting: every request fails
	mangled   map[uint64]bool // writes served with a malformed resourceVersion
	restores  []Restoration   // restores[e-1] began epoch e
}

// A Restoration describes one Restore: the epoch it began, the revision
// the server was at right after it, and whether the revision was bumped.
type Restoration struct {
	Epoch  int
	Rev    uint64
	Bumped bool
}

// New returns a Server at revision 1 with no objects.
func New(opts Options) *Server {
	if opts.Replicas <= 0 {
		opts.Replicas = 2
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 5
	}
	if opts.TooLargeWait <= 0 {
		opts.TooLargeWait = 50 * time.Millisecond
	}
	return &Server{
		opts:     opts,
		rng:      rand.New(rand.NewPCG(opts.Seed, 0x5e7e7)),
		rev:      1,
		byKey:    map[string][]record{},
		live:     map[string]*corev1.ConfigMap{},
		replicas: make([]replica, opts.Replicas),
		watchers: map[*watcher]struct{}{},
		changed:  make(chan struct{}),
	}
}

// --- writes ------------------------------------------------------------------

// Create creates name with a new UID and returns the write's revision.
func (s *Server) Create(name, value string) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return 0, unavailable()
	}
	if _, ok := s.live[name]; ok {
		return 0, apierrors.NewAlreadyExists(corev1.Resource("configmaps"), name)
	}
	s.uidSeq++
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: Namespace, Name: name,
		UID: types.UID(fmt.Sprintf("uid-%d", s.uidSeq)),
	}, Data: map[string]string{"v": value}}
	return s.commitLocked(watch.Added, obj), nil
}

// Update writes a new value to name.
func (s *Server) Update(name, value string) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return 0, unavailable()
	}
	cur, ok := s.live[name]
	if !ok {
		return 0, apierrors.NewNotFound(corev1.Resource("configmaps"), name)
	}
	obj := cur.DeepCopy()
	obj.Data = map[string]string{"v": value}
	return s.commitLocked(watch.Modified, obj), nil
}

// Delete deletes name.
func (s *Server) Delete(name string) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return 0, unavailable()
	}
	cur, ok := s.live[name]
	if !ok {
		return 0, apierrors.NewNotFound(corev1.Resource("configmaps"), name)
	}
	return s.commitLocked(watch.Deleted, cur.DeepCopy()), nil
}

// WriteElsewhere commits a revision that is not on the modelled resource:
// a write to another resource of the same etcd (a controller's write to
// another kind, or a lease renewal). It bumps the global revision and
// returns it; there is no event and no object, so lists report the new
// revision over unchanged items and watches send nothing for it. As with
// etcd's progress notifications, the watch caches (replicas not frozen)
// reach the revision too: a later bookmark, and a watch-list's or a
// NotOlderThan list's revision, may carry it. It fails, as the other
// writes do, while the server is down.
func (s *Server) WriteElsewhere() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return 0, unavailable()
	}
	s.rev++
	s.stats.ElsewhereWrites++
	for w := range s.watchers {
		s.deliverLocked(w) // nothing to send; the stream stands at the new revision
	}
	s.broadcastLocked()
	return s.rev, nil
}

func (s *Server) commitLocked(typ watch.EventType, obj *corev1.ConfigMap) uint64 {
	s.rev++
	s.writeSeq++
	obj.ResourceVersion = strconv.FormatUint(s.rev, 10)
	obj.Annotations = map[string]string{
		RevisionAnnotation: obj.ResourceVersion,
		WriteAnnotation:    strconv.FormatUint(s.writeSeq, 10),
	}
	rec := record{rev: s.rev, typ: typ, name: obj.Name, obj: obj, write: s.writeSeq}
	s.history = append(s.history, rec)
	s.byKey[obj.Name] = append(s.byKey[obj.Name], rec)
	if typ == watch.Deleted {
		delete(s.live, obj.Name)
	} else {
		s.live[obj.Name] = obj
	}
	for w := range s.watchers {
		s.deliverLocked(w)
	}
	s.broadcastLocked()
	return s.rev
}

func (s *Server) broadcastLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// --- what tests read ---------------------------------------------------------

// Rev returns the current revision.
func (s *Server) Rev() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// Epoch returns how many restores happened.
func (s *Server) Epoch() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats.Epoch
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Rev, st.Compacted = s.rev, s.compacted
	return st
}

// State returns every live key's Version.
func (s *Server) State() map[string]Version {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]Version, len(s.live))
	for name, obj := range s.live {
		m[name] = VersionOf(obj)
	}
	return m
}

// Mangled reports whether the write was served with a malformed
// resourceVersion on some stream.
func (s *Server) Mangled(write uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mangled[write]
}

// Names returns every key written in the current timeline.
func (s *Server) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.byKey))
	for n := range s.byKey {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// StatesSince returns the states name had at some revision in [rev, now]
// in the current timeline: its state at rev, then every later one.
func (s *Server) StatesSince(name string, rev uint64) []Version {
	s.mu.Lock()
	defer s.mu.Unlock()
	recs := s.byKey[name]
	i := sort.Search(len(recs), func(i int) bool { return recs[i].rev > rev })
	out := make([]Version, 0, len(recs)-i+1)
	if i == 0 {
		out = append(out, Version{})
	} else {
		out = append(out, recs[i-1].version())
	}
	for _, r := range recs[i:] {
		out = append(out, r.version())
	}
	return out
}

// snapshotLocked returns the live objects at rev, sorted by name.
func (s *Server) snapshotLocked(rev uint64) []*corev1.ConfigMap {
	var out []*corev1.ConfigMap
	for _, recs := range s.byKey {
		i := sort.Search(len(recs), func(i int) bool { return recs[i].rev > rev })
		if i > 0 && recs[i-1].typ != watch.Deleted {
			out = append(out, recs[i-1].obj)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.ConfigMap) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// --- faults ------------------------------------------------------------------

// SetFaults replaces the fault probabilities.
func (s *Server) SetFaults(f Faults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = f
}

// Compact compacts the history up to rev (at most the current revision):
// watches and continue tokens from below it get 410 Gone.
func (s *Server) Compact(rev uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rev = min(rev, s.rev)
	if rev > s.compacted {
		s.compacted = rev
	}
}

// CloseWatches ends every open stream cleanly (an apiserver shutting down
// streams, a proxy timing out).
func (s *Server) CloseWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watchers {
		s.endLocked(w, nil)
	}
}

// GoneWatches ends every open stream with a 410 ERROR event (etcd
// compacted the revision a slow watch was at).
func (s *Server) GoneWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watchers {
		s.endLocked(w, goneStatus(w.sent, s.compacted))
	}
}

// Freeze stops replica i's watch cache at its current revision: it answers
// lists and streams from there until Thaw.
func (s *Server) Freeze(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 || i >= len(s.replicas) || s.replicas[i].frozen {
		return
	}
	s.replicas[i] = replica{frozen: true, at: s.rev}
}

// FreezeIdle freezes every replica that serves no open stream and returns
// them.
func (s *Server) FreezeIdle() []int {
	s.mu.Lock()
	busy := map[int]bool{}
	for w := range s.watchers {
		busy[w.replica] = true
	}
	s.mu.Unlock()
	var out []int
	for i := range s.opts.Replicas {
		if !busy[i] {
			s.Freeze(i)
			out = append(out, i)
		}
	}
	return out
}

// Thaw lets replica i catch up.
func (s *Server) Thaw(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 || i >= len(s.replicas) {
		return
	}
	s.replicas[i] = replica{}
	for w := range s.watchers {
		if w.replica == i {
			s.deliverLocked(w)
		}
	}
	s.broadcastLocked()
}

// ThawAll lets every replica catch up.
func (s *Server) ThawAll() {
	for i := range s.Replicas() {
		s.Thaw(i)
	}
}

// Replicas returns the number of replicas.
func (s *Server) Replicas() int { return s.opts.Replicas }

// StartStaleProxy makes every list and watch-list answer with the state at
// rev (a caching proxy replaying a recorded response) until StopStaleProxy.
func (s *Server) StartStaleProxy(rev uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stale = max(1, min(rev, s.rev))
}

// StopStaleProxy ends StartStaleProxy.
func (s *Server) StopStaleProxy() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stale = 0
}

// Bookmark sends an honest bookmark on every stream that asked for them.
func (s *Server) Bookmark() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watchers {
		// A stream from a revision the server has not reached yet gets
		// none: a bookmark is never older than the stream's start.
		if w.bookmarks && !w.ended && w.sent <= s.rev {
			w.push(bookmarkEvent(strconv.FormatUint(w.sent, 10), false))
		}
	}
}

// SetDown stops (true) or restarts (false) the apiserver: while it is down,
// every request and write fails with connection refused.
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
	if down {
		for w := range s.watchers {
			s.endLocked(w, nil)
		}
	}
	s.broadcastLocked()
}

// InjectOlderBookmark sends, on every stream that asked for bookmarks, a
// bookmark ago revisions older than what the stream has sent (a
// misbehaving server). Never newer: a bookmark ahead of the stream would
// claim events it never sent, which no client can tell.
func (s *Server) InjectOlderBookmark(ago uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watchers {
		if w.bookmarks && !w.ended && w.sent > 1 {
			w.push(bookmarkEvent(strconv.FormatUint(w.sent-min(w.sent-1, ago), 10), false))
			s.stats.OlderBookmarks++
		}
	}
}

// ReplayWatches re-sends, on every stream, one older event it has sent (a
// misbehaving server or proxy).
func (s *Server) ReplayWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watchers {
		if len(w.recent) > 1 && !w.ended {
			old := w.recent[s.rng.IntN(len(w.recent)-1)]
			w.push(watch.Event{Type: old.typ, Object: old.obj.DeepCopy()})
			s.stats.Replayed++
		}
	}
}

// Restore models an etcd restore from the snapshot taken at rev, followed by
// an apiserver restart (every stream ends; see SetDown for the downtime). With bump > 0 (etcdutl
// --bump-revision bump --mark-compacted, as the Kubernetes docs recommend)
// the revision jumps ahead by bump and everything before it is compacted;
// with bump == 0 the revision goes back to rev and new writes reuse the
// revisions after it.
func (s *Server) Restore(rev, bump uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rev = max(1, min(rev, s.rev))
	i := sort.Search(len(s.history), func(i int) bool { return s.history[i].rev > rev })
	s.history = slices.Clone(s.history[:i])
	s.byKey = map[string][]record{}
	s.live = map[string]*corev1.ConfigMap{}
	for _, r := range s.history {
		s.byKey[r.name] = append(s.byKey[r.name], r)
		if r.typ == watch.Deleted {
			delete(s.live, r.name)
		} else {
			s.live[r.name] = r.obj
		}
	}
	if bump > 0 {
		s.rev += bump
		s.compacted = s.rev
	} else {
		s.rev = rev
		s.compacted = min(s.compacted, rev)
	}
	for i := range s.replicas {
		s.replicas[i] = replica{}
	}
	s.stale = 0
	for w := range s.watchers {
		s.endLocked(w, nil)
	}
	s.stats.Epoch++
	s.restores = append(s.restores, Restoration{Epoch: s.stats.Epoch, Rev: s.rev, Bumped: bump > 0})
	s.broadcastLocked()
}

// RestorationOf returns the Restore that began epoch, recorded under the
// same lock as the restore itself (a test reading the epoch never misses
// its restoration); false for epoch 0 (no restore yet) or a future one.
func (s *Server) RestorationOf(epoch int) (Restoration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if epoch < 1 || epoch > len(s.restores) {
		return Restoration{}, false
	}
	return s.restores[epoch-1], true
}

// Close ends every stream and waits for their goroutines.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	ws := make([]*watcher, 0, len(s.watchers))
	for w := range s.watchers {
		s.endLocked(w, nil)
		ws = append(ws, w)
	}
	s.mu.Unlock()
	for _, w := range ws {
		<-w.done
	}
}

func (s *Server) hit(p float64) bool { return p > 0 && s.rng.Float64() < p }

// replicaRevLocked is replica i's watch cache revision.
func (s *Server) replicaRevLocked(i int) uint64 {
	if s.replicas[i].frozen {
		return s.replicas[i].at
	}
	return s.rev
}

// waitLocked waits (releasing s.mu) until cond holds, d passes or ctx ends.
func (s *Server) waitLocked(ctx context.Context, d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		remaining := time.Until(deadline)
		if remaining <= 0 || ctx.Err() != nil {
			return false
		}
		ch := s.changed
		s.mu.Unlock()
		t := time.NewTimer(remaining)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		s.mu.Lock()
	}
	return true
}

// --- errors a real server returns ----------------------------------------------

func transientError(rng *rand.Rand) error {
	switch rng.IntN(4) {
	case 0:
		return apierrors.NewInternalError(errors.New("etcdserver: leader changed"))
	case 1:
		return apierrors.NewTooManyRequests("the server has received too many requests and has asked us to try again later", 1)
	case 2:
		return apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
	default:
		return unavailable()
	}
}

// unavailable is what a client gets from an apiserver that is not
// running: connection refused.
func unavailable() error {
	return &url.Error{Op: "Get", URL: "https://apiserver.model/api/v1/namespaces/ns/configmaps", Err: &net.OpError{
		Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED),
	}}
}

func tooLarge(asked, current uint64) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", asked, current), 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	return err
}

func gone(asked, compacted uint64) error {
	return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", asked, compacted))
}

func goneStatus(asked, compacted uint64) *metav1.Status {
	s := gone(asked, compacted).(*apierrors.StatusError).ErrStatus
	return &s
}

func badRequest(msg string) error { return apierrors.NewBadRequest(msg) }

// parseRV parses a resourceVersion parameter: a decimal revision, or a
// mangled one this server served ("m" + revision). ok is false for
// anything else (400 Bad Request).
func parseRV(s string) (rev uint64, ok bool) {
	s = strings.TrimPrefix(s, "m")
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		if s != "" && strings.Trim(s, "0123456789") == "" { // more digits than a revision has: too large
			return ^uint64(0), true
		}
		return 0, false
	}
	return n, true
}

// --- list ----------------------------------------------------------------------

type continueToken struct {
	rev   uint64
	after string
}

func encodeContinue(t continueToken) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d/%s", t.rev, t.after))
}

func decodeContinue(s string) (continueToken, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return continueToken{}, false
	}
	revS, after, ok := strings.Cut(string(b), "/")
	rev, err := strconv.ParseUint(revS, 10, 64)
	if !ok || err != nil {
		return continueToken{}, false
	}
	return continueToken{rev: rev, after: after}, true
}

// List lists without a context.
func (s *Server) List(options metav1.ListOptions) (runtime.Object, error) {
	return s.ListWithContext(context.Background(), options)
}

// ListWithContext serves a list with the semantics of the package doc.
func (s *Server) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.down {
		return nil, unavailable()
	}
	if s.hit(s.faults.ListError) {
		return nil, transientError(s.rng)
	}
	if o.Continue != "" {
		return s.continueLocked(o)
	}
	if s.stale != 0 {
		s.stats.StaleProxyLists++
		return s.pageLocked(s.stale, "", 0), nil
	}
	r := s.rng.IntN(len(s.replicas))
	match := o.ResourceVersionMatch
	switch o.ResourceVersion {
	case "":
		if match != "" {
			return nil, badRequest("resourceVersionMatch is forbidden unless resourceVersion is provided")
		}
		return s.pageLocked(s.rev, "", o.Limit), nil // Most Recent: a quorum read
	case "0":
		if match == metav1.ResourceVersionMatchExact {
			return nil, badRequest("resourceVersionMatch \"Exact\" is forbidden for resourceVersion \"0\"")
		}
		return s.pageLocked(s.replicaRevLocked(r), "", 0), nil // Any: the watch cache, limit ignored
	}
	asked, ok := parseRV(o.ResourceVersion)
	if !ok {
		return nil, badRequest(fmt.Sprintf("invalid resource version %q", o.ResourceVersion))
	}
	switch {
	case match == metav1.ResourceVersionMatchExact || (match == "" && o.Limit > 0):
		if asked < s.compacted {
			return nil, gone(asked, s.compacted)
		}
		if !s.waitLocked(ctx, s.opts.TooLargeWait, func() bool { return s.rev >= asked }) {
			return nil, tooLarge(asked, s.rev)
		}
		return s.pageLocked(asked, "", o.Limit), nil
	case match == "" || match == metav1.ResourceVersionMatchNotOlderThan:
		if !s.waitLocked(ctx, s.opts.TooLargeWait, func() bool { return s.replicaRevLocked(r) >= asked }) {
			return nil, tooLarge(asked, s.replicaRevLocked(r))
		}
		return s.pageLocked(s.replicaRevLocked(r), "", o.Limit), nil
	default:
		return nil, badRequest(fmt.Sprintf("unknown resourceVersionMatch %q", match))
	}
}

// continueLocked serves the next page of a paginated list, at the
// revision its continue token names.
func (s *Server) continueLocked(o metav1.ListOptions) (runtime.Object, error) {
	if o.ResourceVersion != "" && o.ResourceVersion != "0" {
		return nil, badRequest("specifying resource version is not allowed when using continue")
	}
	tok, ok := decodeContinue(o.Continue)
	if !ok {
		return nil, badRequest("continue key is not valid")
	}
	if tok.rev < s.compacted {
		return nil, apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
	}
	return s.pageLocked(tok.rev, tok.after, o.Limit), nil
}

// pageLocked returns the objects at rev after the name `after`, at most
// min(limit, PageSize) of them when limit > 0, with a continue token if more
// remain.
func (s *Server) pageLocked(rev uint64, after string, limit int64) *corev1.ConfigMapList {
	objs := s.snapshotLocked(rev)
	i := sort.Search(len(objs), func(i int) bool { return objs[i].Name > after })
	objs = objs[i:]
	list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatUint(rev, 10)}}
	if limit > 0 {
		n := min(int(limit), s.opts.PageSize)
		if len(objs) > n {
			list.Continue = encodeContinue(continueToken{rev: rev, after: objs[n-1].Name})
			remaining := int64(len(objs) - n)
			list.RemainingItemCount = &remaining
			objs = objs[:n]
		}
	}
	for _, o := range objs {
		list.Items = append(list.Items, *o.DeepCopy())
	}
	if list.Continue == "" {
		s.stats.Lists++
	}
	return list
}

// --- watch ---------------------------------------------------------------------

// Watch watches without a context.
func (s *Server) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return s.WatchWithContext(context.Background(), options)
}

// WatchWithContext serves a watch or a watch-list with the semantics of the
// package doc. The stream ends when ctx ends, as an HTTP stream would.
func (s *Server) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.down {
		return nil, unavailable()
	}
	if s.hit(s.faults.WatchError) {
		return nil, transientError(s.rng)
	}
	r := s.rng.IntN(len(s.replicas))
	if o.SendInitialEvents != nil && *o.SendInitialEvents {
		return s.watchListLocked(ctx, o, r)
	}
	if o.SendInitialEvents != nil || o.ResourceVersionMatch != "" {
		return nil, badRequest("resourceVersionMatch and sendInitialEvents=false are forbidden for watch")
	}
	switch o.ResourceVersion {
	case "": // Get State and Start at Most Recent
		return s.startLocked(ctx, o, r, s.rev, true), nil
	case "0": // Get State and Start at Any
		return s.startLocked(ctx, o, r, s.replicaRevLocked(r), true), nil
	}
	asked, ok := parseRV(o.ResourceVersion)
	if !ok {
		return nil, badRequest(fmt.Sprintf("invalid resource version %q", o.ResourceVersion))
	}
	if asked < s.compacted || s.hit(s.faults.GoneAtWatchStart) {
		if s.rng.IntN(2) == 0 {
			return nil, gone(asked, s.compacted)
		}
		w := s.newWatcherLocked(ctx, o, r, asked)
		s.endLocked(w, goneStatus(asked, s.compacted))
		return w, nil
	}
	if asked == ^uint64(0) { // more digits than a revision has
		return nil, tooLarge(asked, s.rev)
	}
	// A revision the server has not reached (it was restored without a
	// bumped revision) starts a stream that sends the events after it once
	// there are any, as kube-apiserver's watch cache does: only a
	// watch-list waits for the cache to be fresh.
	return s.startLocked(ctx, o, r, asked, false), nil
}

// watchListLocked serves sendInitialEvents=true: the state at a revision not
// older than asked (the current one when asked is unset), the
// initial-events-end bookmark, then the events after it.
func (s *Server) watchListLocked(ctx context.Context, o metav1.ListOptions, r int) (watch.Interface, error) {
	if !o.AllowWatchBookmarks {
		return nil, badRequest("sendInitialEvents requires allowWatchBookmarks=true")
	}
	if o.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan {
		return nil, badRequest("sendInitialEvents requires resourceVersionMatch=NotOlderThan")
	}
	var asked uint64
	switch o.ResourceVersion {
	case "":
		asked = s.rev // consistent: the cache must reach the current revision
	case "0":
	default:
		var ok bool
		if asked, ok = parseRV(o.ResourceVersion); !ok {
			return nil, badRequest(fmt.Sprintf("invalid resource version %q", o.ResourceVersion))
		}
	}
	at := s.stale
	if at == 0 {
		if !s.waitLocked(ctx, s.opts.TooLargeWait, func() bool { return s.replicaRevLocked(r) >= asked }) {
			return nil, tooLarge(asked, s.replicaRevLocked(r))
		}
		at = s.replicaRevLocked(r)
	} else {
		s.stats.StaleProxyLists++
	}
	w := s.newWatcherLocked(ctx, o, r, at)
	for _, obj := range s.snapshotLocked(at) {
		w.push(watch.Event{Type: watch.Added, Object: obj.DeepCopy()})
	}
	w.push(bookmarkEvent(strconv.FormatUint(at, 10), true))
	s.stats.WatchLists++
	if at < s.compacted && s.stale != 0 {
		s.endLocked(w, goneStatus(at, s.compacted)) // the proxy's recorded revision is gone upstream
		return w, nil
	}
	s.deliverLocked(w)
	return w, nil
}

// startLocked opens a stream at rev; with initial, the state at rev first.
func (s *Server) startLocked(ctx context.Context, o metav1.ListOptions, r int, rev uint64, initial bool) *watcher {
	w := s.newWatcherLocked(ctx, o, r, rev)
	if initial {
		for _, obj := range s.snapshotLocked(rev) {
			w.push(watch.Event{Type: watch.Added, Object: obj.DeepCopy()})
		}
	}
	s.deliverLocked(w)
	return w
}

func bookmarkEvent(rv string, initialEventsEnd bool) watch.Event {
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}}
	if initialEventsEnd {
		obj.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	}
	return watch.Event{Type: watch.Bookmark, Object: obj}
}

// deliverLocked sends w the events after what it has sent, up to its
// replica's revision, with the stream faults in force.
func (s *Server) deliverLocked(w *watcher) {
	if w.ended {
		return
	}
	upTo := s.replicaRevLocked(w.replica)
	i := sort.Search(len(s.history), func(i int) bool { return s.history[i].rev > w.sent })
	f := s.faults
	for ; i < len(s.history) && s.history[i].rev <= upTo; i++ {
		rec := s.history[i]
		obj := rec.obj.DeepCopy()
		if s.hit(f.Malformed) {
			obj.ResourceVersion = "m" + obj.ResourceVersion
			s.stats.Malformed++
			if s.mangled == nil {
				s.mangled = map[uint64]bool{}
			}
			s.mangled[rec.write] = true
		}
		ev := watch.Event{Type: rec.typ, Object: obj}
		w.push(ev)
		w.sent = rec.rev
		if s.hit(f.Duplicate) {
			w.push(watch.Event{Type: ev.Type, Object: obj.DeepCopy()})
			s.stats.Duplicated++
		}
		if len(w.recent) > 0 && s.hit(f.Replay) {
			old := w.recent[s.rng.IntN(len(w.recent))]
			w.push(watch.Event{Type: old.typ, Object: old.obj.DeepCopy()})
			s.stats.Replayed++
		}
		w.recent = append(w.recent, rec)
		if len(w.recent) > 32 {
			w.recent = w.recent[1:]
		}
		if w.bookmarks {
			switch {
			case w.sent > 1 && s.hit(f.OlderBookmark):
				w.push(bookmarkEvent(strconv.FormatUint(1+s.rng.Uint64N(w.sent-1), 10), false))
				s.stats.OlderBookmarks++
			case s.hit(f.FarFutureBookmark):
				w.push(bookmarkEvent(FarFutureRV, false))
				s.stats.FarFuture++
			case s.hit(f.Bookmark):
				w.push(bookmarkEvent(strconv.FormatUint(w.sent, 10), false))
			}
		}
		if s.hit(f.GoneInStream) {
			s.endLocked(w, goneStatus(w.sent, s.compacted))
			return
		}
		if s.hit(f.Close) {
			s.endLocked(w, nil)
			return
		}
	}
	// Nothing more to send yet; the stream stands at its replica's revision.
	if upTo > w.sent {
		w.sent = upTo
	}
}

// --- watch streams ---------------------------------------------------------------

type watcher struct {
	s         *Server
	ctx       context.Context
	replica   int
	bookmarks bool

	// Guarded by s.mu.
	sent   uint64 // the revision the stream has reached
	recent []record
	ended  bool

	mu    sync.Mutex // guards queue and closing
	queue []watch.Event
	final bool // no more events after queue

	kick     chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	result   chan watch.Event
	done     chan struct{}
}

func (s *Server) newWatcherLocked(ctx context.Context, o metav1.ListOptions, r int, rev uint64) *watcher {
	w := &watcher{
		s: s, ctx: ctx, replica: r, bookmarks: o.AllowWatchBookmarks, sent: rev,
		kick: make(chan struct{}, 1), stop: make(chan struct{}),
		result: make(chan watch.Event), done: make(chan struct{}),
	}
	s.watchers[w] = struct{}{}
	s.stats.Watches++
	s.stats.OpenWatches++
	s.stats.MaxOpenWatches = max(s.stats.MaxOpenWatches, s.stats.OpenWatches)
	s.stats.LiveStreams++
	s.stats.MaxLiveStreams = max(s.stats.MaxLiveStreams, s.stats.LiveStreams)
	go w.pump()
	return w
}

// endLocked ends w's stream after what is queued, with a final ERROR event
// if status is set.
func (s *Server) endLocked(w *watcher, status *metav1.Status) {
	if w.ended {
		return
	}
	if status != nil {
		w.push(watch.Event{Type: watch.Error, Object: status})
	}
	w.ended = true
	delete(s.watchers, w)
	s.stats.OpenWatches--
	w.mu.Lock()
	w.final = true
	w.mu.Unlock()
	w.wake()
}

func (w *watcher) push(ev watch.Event) {
	w.mu.Lock()
	w.queue = append(w.queue, ev)
	w.mu.Unlock()
	w.wake()
}

func (w *watcher) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// pump hands queued events to the client, like a stream decoder.
func (w *watcher) pump() {
	defer close(w.done)
	defer close(w.result)
	defer func() { // before the client can see the end and open another
		w.s.mu.Lock()
		w.s.stats.LiveStreams--
		w.s.mu.Unlock()
	}()
	for {
		w.mu.Lock()
		q, final := w.queue, w.final
		w.queue = nil
		w.mu.Unlock()
		for _, ev := range q {
			select {
			case w.result <- ev:
			case <-w.stop:
				return
			case <-w.ctx.Done():
				w.end()
				return
			}
		}
		if final { // everything queued before the end was in q
			return
		}
		select {
		case <-w.kick:
		case <-w.stop:
			return
		case <-w.ctx.Done():
			w.end()
			return
		}
	}
}

func (w *watcher) end() {
	w.s.mu.Lock()
	w.s.endLocked(w, nil)
	w.s.mu.Unlock()
}

// Stop ends the stream from the client's side.
func (w *watcher) Stop() {
	w.stopOnce.Do(func() {
		w.end()
		close(w.stop)
	})
	<-w.done
}

// ResultChan returns the stream's events; it is closed when the stream ends.
func (w *watcher) ResultChan() <-chan watch.Event { return w.result }
