package reflector

import (
	"errors"
	"fmt"
	"time"

	"github.com/freshinformer/freshinformer/freshness"
)

// DefaultAcceptRegressionAfter is how long a Guard refuses lists older than
// its floor before it accepts one as a declared regression. It is a few
// Reflector backoff periods (which grow to 30 s): enough for a lagging
// replica to catch up, short enough that a restored etcd does not wedge the
// informer for long.
const DefaultAcceptRegressionAfter = 2 * time.Minute

// MaxRegressionSample bounds Regression.SampleKeys.
const MaxRegressionSample = 10

// ErrStaleList is matched (with errors.Is) by the error a Guard returns when
// it refuses a list older than its floor.
var ErrStaleList = errors.New("list is older than the cache")

// StaleListError reports a refused list. The Reflector logs it, backs off
// and relists.
type StaleListError struct {
	// ListResourceVersion is the refused list's resource version.
	ListResourceVersion string
	// Floor is the resource version the cache had already reached.
	Floor string
	// Refused counts the consecutive refusals, this one included.
	Refused int
}

// Error says which list was refused and why.
func (e *StaleListError) Error() string {
	return fmt.Sprintf("refused list at resource version %s: older than %s already observed (refusal %d in a row)", e.ListResourceVersion, e.Floor, e.Refused)
}

// Is reports whether target is ErrStaleList.
func (e *StaleListError) Is(target error) bool { return target == ErrStaleList }

// RegressionReason says how a regression was detected.
type RegressionReason string

// The ways a Guard or a FreshInformer detects that the server went back in
// time.
const (
	// RegressionStaleList: lists older than the floor kept coming for
	// longer than AcceptRegressionAfter; the last one was accepted.
	RegressionStaleList RegressionReason = "StaleList"
	// RegressionConsistentList: a consistent read (resourceVersion "") came
	// back older than the floor. Such a read is served from etcd's current
	// revision, so it proves the server's history went back (etcd restored
	// without --bump-revision); it is accepted at once.
	RegressionConsistentList RegressionReason = "ConsistentList"
	// RegressionKeysWentBack: a list at or above the floor brought keys
	// back to older states than cached (etcd restored with
	// --bump-revision). The list is applied: the server's state is the
	// truth.
	RegressionKeysWentBack RegressionReason = "KeysWentBack"
	// RegressionWritesLost: a list at or past the resource version of a
	// write recorded with FreshInformer.RecordWrittenObject holds the
	// written key at an older state: the server lost a write it had
	// acknowledged (etcd restored with --bump-revision from a snapshot
	// taken before it), which the cache never held (its stream had not
	// delivered it yet). The list is applied.
	RegressionWritesLost RegressionReason = "WritesLost"
	// RegressionServerBehind: a write came back below the cache's resource
	// version and a consistent probe confirmed the server's revision is
	// below the floor (etcd restored without --bump-revision). The informer
	// forgets its freshness and relists.
	RegressionServerBehind RegressionReason = "ServerBehind"
)

// Regression describes a declared regression: the cache follows the server
// back in time.
type Regression struct {
	// Reason says how it was detected.
	Reason RegressionReason
	// ListResourceVersion is the resource version of the accepted list (for
	// RegressionServerBehind, of the probe).
	ListResourceVersion string
	// Floor is the resource version the cache had reached before.
	Floor string
	// Refused counts the older lists refused before this one.
	Refused int
	// Since is how long the server had been answering older.
	Since time.Duration
	// Keys counts the keys that went back to an older state
	// (RegressionKeysWentBack).
	Keys int
	// WritesLost counts the keys listed at states older than a recorded
	// write the list covers (RegressionWritesLost; also counted alongside
	// RegressionKeysWentBack).
	WritesLost int
	// SampleKeys names up to MaxRegressionSample of the keys counted in
	// Keys and WritesLost, sorted.
	SampleKeys []string
}

// Stats are a Guard's counters since it was made.
type Stats struct {
	// Lists counts lists the Guard admitted into the cache (initial list and
	// relists, plain or watch-list; refused ones are not counted here, nor
	// one asked for before a declared restore, which the informer drops;
	// one the queue then failed to take, its transform failing, is).
	Lists uint64
	// Watches counts watch requests (the first and every restart).
	Watches uint64
	// StaleListsRefused counts lists refused for being older than the
	// floor, once per Reflector attempt (a refused watch-list and the plain
	// list client-go falls back to count once).
	StaleListsRefused uint64
	// Regressions counts declared regressions, whatever their reason.
	Regressions uint64
	// FloorRaised counts list or watch requests whose resource version was
	// raised to the floor.
	FloorRaised uint64
	// MalformedSkipped counts watch events and bookmarks whose resource
	// version was malformed while the stream's lists were comparable: the
	// events were applied without counting toward freshness, the bookmarks
	// skipped.
	MalformedSkipped uint64
	// ImplausibleSkipped counts watch events and bookmarks skipped because
	// their resource version was implausibly far ahead of the floor (see
	// Plausible).
	ImplausibleSkipped uint64
	// WatchesStopped counts watch-list watches the Guard stopped because
	// their initial events were refused (client-go leaves them open).
	WatchesStopped uint64
}

// Plausible reports whether a watch event's or bookmark's resource version
// rv can follow floor. A server's revision grows by one per write, so a
// value more than ten times the floor plus 2^32 (about four billion writes
// within one watch) is not a real revision but a misbehaving server's; were
// it applied, every later event would look out of order. With no floor
// (nothing listed yet) everything is plausible. Lists are not judged: a
// list is the server's whole state.
func Plausible(rv, floor freshness.RV) bool {
	if floor.IsZero() {
		return true
	}
	f, ok := floor.Uint64()
	const margin = 1 << 32
	if !ok || f > (^uint64(0)-margin)/10 {
		// Beyond what 64 bits bound: allow one more digit.
		return len(rv.String()) <= len(floor.String())+1
	}
	r, ok := rv.Uint64()
	return ok && r <= f*10+margin
}
