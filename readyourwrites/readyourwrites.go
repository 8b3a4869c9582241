package readyourwrites

import (
	"container/list"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/internal/resources"
)

// DefaultEnsureFreshTimeout bounds EnsureFresh when its context has no
// earlier deadline.
const DefaultEnsureFreshTimeout = 10 * time.Second

// DefaultMaxOwners is how many owners a ReadYourWrites keeps records for
// when Options.MaxOwners is not set.
const DefaultMaxOwners = 10_000

// DefaultOwnerIdleTimeout is how long a ReadYourWrites keeps an owner's
// records with nothing recorded or checked for it, when
// Options.OwnerIdleTimeout is not set.
const DefaultOwnerIdleTimeout = time.Minute

// ReadYourWrites records the writes made on behalf of owners and tells
// when the informer caches hold them (see the package documentation for
// what it proves, its bounds and where callbacks run).
//
// A ReadYourWrites is safe for concurrent use by any number of goroutines,
// for one owner or many. Its mutex guards its records only; it is taken
// before any lock of an informer and never held while waiting or calling a
// callback (see the package documentation's lock order).
type ReadYourWrites struct {
	source    cache.InformerSource
	timeout   time.Duration
	resolver  resources.Mapper
	clock     clock.PassiveClock
	maxOwners int
	idle      time.Duration

	mu     sync.Mutex // guards owners, lru and evicted
	owners map[ownerKey]*ownerWrites
	lru    *list.List // of *ownerWrites, most recently used first
	// evicted holds, per owner kind and informer, what evicted owners of
	// that kind still wait for.
	evicted map[schema.GroupKind]map[*cache.FreshInformer]*evictedWrites
}

// Options configure a ReadYourWrites.
type Options struct {
	// Timeout bounds how long one EnsureFresh call waits (0:
	// DefaultEnsureFreshTimeout); see New.
	Timeout time.Duration
	// Scheme and RESTMapper tell Wrote and Deleted the resource of types
	// that client-go's scheme does not know, when the InformerSource cannot
	// tell (the factories use the scheme given to them with
	// cache.WithScheme).
	Scheme     *runtime.Scheme
	RESTMapper meta.RESTMapper
	// MaxOwners bounds the owners whose records are kept (0:
	// DefaultMaxOwners); past it, the least recently used owner is evicted
	// (see the package documentation for what eviction keeps).
	MaxOwners int
	// OwnerIdleTimeout evicts an owner once nothing was recorded or
	// checked for it for that long (0: DefaultOwnerIdleTimeout).
	OwnerIdleTimeout time.Duration
	// Clock measures idleness (nil: the real clock).
	Clock clock.PassiveClock
}

// New returns a ReadYourWrites over the informers of source (a factory, an
// InformerList, ...). timeout bounds how long one EnsureFresh call waits
// for all the caches of an owner together (0: DefaultEnsureFreshTimeout;
// its context's deadline wins when earlier); past it, EnsureFresh fails
// with an error matching context.DeadlineExceeded, for the caller to
// requeue. It bounds nothing else: not CheckFresh, which never waits, nor
// WhenFresh (its caller's stop ends it) or package requeue (its own park
// bound), nor how long records are kept (Options.OwnerIdleTimeout,
// Options.MaxOwners).
func New(source cache.InformerSource, timeout time.Duration) *ReadYourWrites {
	return NewWithOptions(source, Options{Timeout: timeout})
}

// NewWithOptions returns a ReadYourWrites over the informers of source,
// configured by opts.
func NewWithOptions(source cache.InformerSource, opts Options) *ReadYourWrites {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultEnsureFreshTimeout
	}
	if opts.MaxOwners <= 0 {
		opts.MaxOwners = DefaultMaxOwners
	}
	if opts.OwnerIdleTimeout <= 0 {
		opts.OwnerIdleTimeout = DefaultOwnerIdleTimeout
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &ReadYourWrites{
		source:    source,
		timeout:   opts.Timeout,
		resolver:  resources.Mapper{Scheme: opts.Scheme, RESTMapper: opts.RESTMapper},
		clock:     opts.Clock,
		maxOwners: opts.MaxOwners,
		idle:      opts.OwnerIdleTimeout,
		owners:    map[ownerKey]*ownerWrites{},
		lru:       list.New(),
		evicted:   map[schema.GroupKind]map[*cache.FreshInformer]*evictedWrites{},
	}
}
