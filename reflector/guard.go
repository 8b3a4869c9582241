package reflector

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/freshinformer/freshinformer/freshness"
)

// DefaultAcceptRegressionAfter is how long a Guard refuses lists older than
// its floor before it accepts one as a declared regression. It is a few
// Reflector backoff periods (which grow to 30 s): enough for a lagging
// replica to catch up, short enough that a restored etcd does not wedge the
// informer for long.
const DefaultAcceptRegressionAfter = 2 * time.Minute

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

// Regression describes a list accepted although older than the floor.
type Regression struct {
	// ListResourceVersion is the accepted list's resource version.
	ListResourceVersion string
	// Floor is the resource version the cache had reached before.
	Floor string
	// Refused counts the older lists refused before this one.
	Refused int
	// Since is how long the server had been answering older.
	Since time.Duration
}

// Options configure a Guard.
type Options struct {
	// Floor returns the highest resource version the stream has delivered
	// or the cache has applied. Required.
	Floor func() freshness.RV
	// AcceptRegressionAfter bounds how long older lists are refused before
	// one is accepted as a declared regression. Zero means
	// DefaultAcceptRegressionAfter; a negative value accepts the second
	// older list at once.
	AcceptRegressionAfter time.Duration
	// OnRegression, if set, is called (synchronously, on the Reflector's
	// goroutine) for every declared regression.
	OnRegression func(Regression)
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
	// Logger defaults to klog.Background().
	Logger *klog.Logger
}

// Stats are a Guard's counters since it was made.
type Stats struct {
	// Lists counts lists the Guard admitted into the cache (initial list and
	// relists, plain or watch-list; refused ones are not counted here).
	Lists uint64
	// Watches counts watch requests (the first and every restart).
	Watches uint64
	// StaleListsRefused counts lists refused for being older than the floor.
	StaleListsRefused uint64
	// Regressions counts older lists accepted as declared regressions.
	Regressions uint64
	// FloorRaised counts list or watch requests whose resource version was
	// raised to the floor.
	FloorRaised uint64
}

// Guard keeps one informer's list/watch stream from going back in time. Use
// ListerWatcher to wrap the informer's ListerWatcher and NewQueue for its
// queue; both share the Guard's floor and counters.
type Guard struct {
	opts   Options
	logger klog.Logger

	mu          sync.Mutex
	refused     int       // consecutive refusals
	streakStart time.Time // first refusal of the current streak

	lists, watches, staleRefused, regressions, floorRaised atomic.Uint64
}

// NewGuard returns a Guard. It panics if opts.Floor is nil, a programming
// error.
func NewGuard(opts Options) *Guard {
	if opts.Floor == nil {
		panic("reflector.NewGuard: Options.Floor is required")
	}
	if opts.AcceptRegressionAfter == 0 {
		opts.AcceptRegressionAfter = DefaultAcceptRegressionAfter
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	g := &Guard{opts: opts, logger: klog.Background()}
	if opts.Logger != nil {
		g.logger = *opts.Logger
	}
	return g
}

// Stats returns the Guard's counters.
func (g *Guard) Stats() Stats {
	return Stats{
		Lists:             g.lists.Load(),
		Watches:           g.watches.Load(),
		StaleListsRefused: g.staleRefused.Load(),
		Regressions:       g.regressions.Load(),
		FloorRaised:       g.floorRaised.Load(),
	}
}

// admitList decides whether a list at rv may replace the cache: nil to
// accept, a *StaleListError to refuse.
func (g *Guard) admitList(rv string) error {
	floor := g.opts.Floor()
	listRV, err := freshness.ParseRV(rv)
	if err != nil || floor.IsZero() || listRV.AtLeast(floor) {
		// Not comparable: nothing to guard, the informer degrades to a
		// plain one. Otherwise the list is fresh enough.
		g.mu.Lock()
		g.refused = 0
		g.mu.Unlock()
		g.lists.Add(1)
		return nil
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.opts.Clock.Now()
	if g.refused == 0 {
		g.streakStart = now
	}
	since := now.Sub(g.streakStart)
	if g.refused > 0 && since >= g.opts.AcceptRegressionAfter {
		r := Regression{ListResourceVersion: rv, Floor: floor.String(), Refused: g.refused, Since: since}
		g.refused = 0
		g.regressions.Add(1)
		g.lists.Add(1)
		g.logger.Error(nil, "Accepting a list older than the cache as a declared regression: the server has served older state for too long (etcd restored from a backup?)",
			"listResourceVersion", rv, "floor", floor.String(), "refused", r.Refused, "since", since)
		if g.opts.OnRegression != nil {
			g.opts.OnRegression(r)
		}
		return nil
	}
	g.refused++
	g.staleRefused.Add(1)
	err = &StaleListError{ListResourceVersion: rv, Floor: floor.String(), Refused: g.refused}
	g.logger.V(2).Info("Refusing a list older than the cache", "listResourceVersion", rv, "floor", floor.String(), "refused", g.refused)
	return err
}

// raise returns rv, or the floor when rv is an older comparable resource
// version. "" (a consistent read) and "0" (any state) are left alone: the
// Reflector falls back to "" after 410 Gone or "Too large resource
// version", and raising it again would loop; Replace's check still applies.
func (g *Guard) raise(rv string) string {
	parsed, err := freshness.ParseRV(rv)
	if err != nil {
		return rv
	}
	if floor := g.opts.Floor(); !parsed.AtLeast(floor) {
		g.floorRaised.Add(1)
		return floor.String()
	}
	return rv
}

// ListerWatcher wraps lw so that list and watch requests never start below
// the floor and lists ask for NotOlderThan semantics.
func (g *Guard) ListerWatcher(lw toolscache.ListerWatcher) toolscache.ListerWatcher {
	return &guardedListerWatcher{inner: toolscache.ToListerWatcherWithContext(lw), outer: lw, guard: g}
}

type guardedListerWatcher struct {
	inner toolscache.ListerWatcherWithContext
	outer toolscache.ListerWatcher // for the optional interfaces it implements
	guard *Guard
}

var _ toolscache.ListerWatcherWithContext = &guardedListerWatcher{}

func (lw *guardedListerWatcher) List(options metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), options)
}

func (lw *guardedListerWatcher) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), options)
}

func (lw *guardedListerWatcher) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	// Only the first page names a resource version; later pages continue it.
	if options.Continue == "" && options.ResourceVersion != "" && options.ResourceVersion != "0" {
		options.ResourceVersion = lw.guard.raise(options.ResourceVersion)
		if options.ResourceVersionMatch == "" {
			options.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
		}
	}
	return lw.inner.ListWithContext(ctx, options)
}

func (lw *guardedListerWatcher) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	lw.guard.watches.Add(1)
	options.ResourceVersion = lw.guard.raise(options.ResourceVersion)
	return lw.inner.WatchWithContext(ctx, options)
}

// IsWatchListSemanticsUnSupported forwards what the wrapped ListerWatcher
// says (client-go's informer factories mark clients that cannot stream
// lists); a ListerWatcher that says nothing supports them.
func (lw *guardedListerWatcher) IsWatchListSemanticsUnSupported() bool {
	u, ok := lw.outer.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && u.IsWatchListSemanticsUnSupported()
}

// Queue is client-go's RealFIFO with the Guard's check on Replace, the one
// call through which a list (plain or watch-list) reaches the cache.
type Queue struct {
	*toolscache.RealFIFO
	guard *Guard
}

// NewQueue returns a Queue over a RealFIFO made with opts, forcing atomic
// events and bookmark deltas on: the informer then sees every list as one
// ReplacedAll and every bookmark in stream order, whatever client-go's
// AtomicFIFO feature gate says.
func (g *Guard) NewQueue(opts toolscache.RealFIFOOptions) *Queue {
	opts.AtomicEvents = true
	opts.EmitDeltaTypeBookmark = true
	opts.KnownObjects = nil // atomic events keep no known-objects view
	return &Queue{RealFIFO: toolscache.NewRealFIFOWithOptions(opts), guard: g}
}

// Replace refuses a list older than the floor (the Reflector backs off and
// relists) and otherwise queues it.
func (q *Queue) Replace(list []interface{}, resourceVersion string) error {
	if err := q.guard.admitList(resourceVersion); err != nil {
		return err
	}
	return q.RealFIFO.Replace(list, resourceVersion)
}
