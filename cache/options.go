package cache

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/freshinformer/freshinformer/internal/probe"
	"github.com/freshinformer/freshinformer/internal/resources"
	"github.com/freshinformer/freshinformer/internal/scope"
	"github.com/freshinformer/freshinformer/reflector"
	"github.com/freshinformer/freshinformer/stalereads"
)

// Options configure a FreshInformer. The first fields mirror client-go's
// SharedIndexInformerOptions; the rest are freshinformer's own.
type Options struct {
	// ResyncPeriod is the default resync period of handlers added without
	// one. Zero: no resync.
	ResyncPeriod time.Duration
	// Indexers are the indexer's initial indexers.
	Indexers toolscache.Indexers
	// ObjectDescription names the objects in logs, as client-go's does;
	// it defaults to the example object's type.
	ObjectDescription string

	// Name names the informer in logs (and, with the metrics package, in
	// metric labels).
	Name string
	// AcceptRegressionAfter bounds how long lists older than the cache are
	// refused before one is accepted as a declared regression. Zero means
	// reflector.DefaultAcceptRegressionAfter.
	AcceptRegressionAfter time.Duration
	// OnRegression, if set, is called once for every declared regression
	// (Regression.Reason says which kind: stale lists past the bound, a
	// consistent list below the floor, keys a newer list moved back, or a
	// server found behind the cache by a probe). It runs on the goroutine
	// that detected it, outside the informer's locks: it may call the
	// informer but must be quick and must not block.
	OnRegression func(reflector.Regression)
	// Clock drives resyncs, the regression bound and staleness; tests set
	// a fake one. Request pacing and timeouts use the real clock.
	Clock clock.Clock
	// Resource names the listed resource in metrics ("group/resource").
	// When empty it is guessed from the example object's kind.
	Resource schema.GroupResource
	// Metrics, if set, receives the informer's measurements.
	Metrics MetricsProvider

	// InitialFloor, if set, is a resource version the informer's first
	// list must reach (fresh on start): for example the newest resource
	// version a predecessor acted on, persisted in its leader-election
	// lease. A first list older than it is refused and retried with
	// resourceVersionMatch=NotOlderThan at it, and after
	// AcceptRegressionAfter accepted as a declared regression, like any
	// relist older than the cache; a consistent first list older than it
	// proves a restore and is declared at once. A malformed value is
	// ignored and logged at error level when the informer starts.
	InitialFloor string
	// ConsistentInitialList makes the first list a consistent read
	// (resourceVersion "", served from etcd's current revision) instead of
	// client-go's "0" (whatever the API server's watch cache holds, which
	// may be older than what a predecessor saw). It costs one quorum read
	// per start.
	ConsistentInitialList bool

	// Identifier names the informer in client-go's informer metrics (the
	// store's resource version, the queue's depth and latency), as
	// client-go's SharedIndexInformerOptions.Identifier does; the factories
	// set it from WithInformerName.
	Identifier toolscache.InformerNameAndResource

	// Selector says what the ListerWatcher lists, so that ReadYourWrites
	// reports a write the informer cannot see instead of waiting for it.
	// The factories set it; the zero Selector admits everything.
	Selector Selector

	resourceMapper resources.Mapper // WithScheme
	// QuietProbeDelay is how long pending waits see no progress before
	// the informer probes the server (see WithQuietProbeDelay). Zero:
	// DefaultQuietProbeDelay; negative: off.
	QuietProbeDelay time.Duration
	// SnapshotProbeLimit is the largest informer, in cached objects, that
	// a probe proves fresh from a consistent list compared key by key with
	// the cache (see WithSnapshotProbeLimit). Zero:
	// DefaultSnapshotProbeLimit; negative: off.
	SnapshotProbeLimit int

	// ServerReads, if set, is shared with other informers of the cluster.
	ServerReads *ServerReads

	// DetectStaleReads turns the stale-read detector on (package
	// stalereads): reads through the indexer and listers are checked
	// against this process's recorded writes. Off, reads cost nothing
	// more; the environment variable stalereads.EnvVar turns it on too.
	DetectStaleReads bool
	// OnStaleRead, if set, receives each stale read the detector finds
	// (besides the counter), in place of the log: reports are then not
	// logged, nor is the line saying the detector is on, unless
	// LogStaleReads. It runs on the reading goroutine and must not block.
	// It takes the report from stalereads=halt.
	OnStaleRead func(stalereads.Report)
	// LogStaleReads logs the stale-read reports through klog even with
	// OnStaleRead set (without it, they always are).
	LogStaleReads bool

	// internal holds what only the package's tests set.
	internal internalOptions
}

// internalOptions are settings only the package's tests make.
type internalOptions struct {
	// restoreCheckByRV has the restore check compare the server's
	// resource version only, where the snapshot route is off: for
	// scripted servers that answer lists in turn and know no current
	// state.
	restoreCheckByRV bool
	// streamClock times watch streams against their timeouts (see
	// guard.Options.StreamClock); nil: the real clock.
	streamClock clock.PassiveClock
	// listCompressedBytes replaces listCompressedBytes (zero: it).
	listCompressedBytes int
	// startGrace replaces defaultStartGrace (zero: it).
	startGrace time.Duration
}

// Selector is what an informer's ListerWatcher lists: one namespace (or
// all), and label and field selectors. Field selectors are checked only on
// metadata.name and metadata.namespace, the fields every object has.
type Selector struct {
	Namespace string
	Labels    labels.Selector
	Fields    fields.Selector
}

// SelectorOf derives a Selector from a namespace and a list options tweak.
func SelectorOf(namespace string, tweak func(*metav1.ListOptions)) Selector {
	return Selector(scope.Of(namespace, tweak))
}

// WithSelector tells the informer what its ListerWatcher lists.
func WithSelector(s Selector) Option { return func(o *Options) { o.Selector = s } }

// ServerReads lets the informers of one cluster share the consistent
// reads (limit 1) that check the server's resource version: after a watch
// resumed on a stream the server ended early (in a rollout an apiserver
// ends every watch it served at once), and in probes. Informers of one
// resource take the answer of any read sent after they asked: a rollout
// costs one read per resource, not one per informer. Give one to the
// factories of a process (WithInformerOptions). The zero value is ready.
type ServerReads struct{ reads probe.SharedReads }

// WithServerReads has the informer share r's reads (see ServerReads).
func WithServerReads(r *ServerReads) Option { return func(o *Options) { o.ServerReads = r } }

// Option sets a field of Options, for NewSharedIndexInformer.
type Option func(*Options)

// WithName names the informer in logs and metrics.
func WithName(name string) Option { return func(o *Options) { o.Name = name } }

// WithObjectDescription names the informer's objects in logs.
func WithObjectDescription(d string) Option {
	return func(o *Options) { o.ObjectDescription = d }
}

// WithAcceptRegressionAfter sets how long older lists are refused before one
// is accepted as a declared regression.
func WithAcceptRegressionAfter(d time.Duration) Option {
	return func(o *Options) { o.AcceptRegressionAfter = d }
}

// WithRegressionHandler sets a callback for declared regressions.
func WithRegressionHandler(f func(reflector.Regression)) Option {
	return func(o *Options) { o.OnRegression = f }
}

// WithResource names the listed resource for metrics.
func WithResource(gr schema.GroupResource) Option { return func(o *Options) { o.Resource = gr } }

// WithClock sets the clock for resyncs, the regression bound and staleness
// (Staleness, and the lag metrics). Request pacing and timeouts stay on the
// real clock.
func WithClock(c clock.Clock) Option { return func(o *Options) { o.Clock = c } }

// WithInitialFloor sets a resource version the first list must reach (see
// Options.InitialFloor).
func WithInitialFloor(rv string) Option { return func(o *Options) { o.InitialFloor = rv } }

// WithConsistentInitialList makes the first list a consistent read (see
// Options.ConsistentInitialList).
func WithConsistentInitialList() Option {
	return func(o *Options) { o.ConsistentInitialList = true }
}

// WithStaleReadDetection turns the stale-read detector on for the informer
// (see Options.DetectStaleReads). With onReport nil, reports are logged
// (and counted), and the informer logs one line when it starts saying the
// detector is on. With onReport, each report goes to it instead of the
// log (WithStaleReadLogging logs them too). Through a factory:
// WithInformerOptions(WithStaleReadDetection(nil)).
func WithStaleReadDetection(onReport func(stalereads.Report)) Option {
	return func(o *Options) { o.DetectStaleReads, o.OnStaleRead = true, onReport }
}

// WithStaleReadLogging logs the stale-read detector's reports even when a
// handler (WithStaleReadDetection(onReport)) receives them
// (Options.LogStaleReads). It does not turn the detector on.
func WithStaleReadLogging() Option {
	return func(o *Options) { o.LogStaleReads = true }
}

// ErrUnknownResource is matched by the error of a lookup that cannot tell
// which resource an object belongs to: its kind is in no scheme it was
// given, or no RESTMapper maps it. Pass the scheme and RESTMapper that know
// the type (WithScheme), or name the resource explicitly (Record,
// WithResource).
var ErrUnknownResource = resources.ErrUnknown

// WithScheme tells the informer (or, through WithInformerOptions, a
// factory and the ReadYourWrites over it) how to name the resource of
// types that client-go's scheme does not know: kubebuilder CRD structs, say.
// The kind comes from s (then from client-go's scheme), the resource from
// mapper when it is not nil (else from the kind's lower-case plural, as
// client-go guesses it). Either may be nil.
func WithScheme(s *runtime.Scheme, mapper meta.RESTMapper) Option {
	return func(o *Options) { o.resourceMapper = resources.Mapper{Scheme: s, RESTMapper: mapper} }
}

// withDefaults fills in what o leaves unset: the one place an informer's
// defaults are set. The probe delay's default depends on the route a probe
// takes at the time (probeDelay), and the regression bound's is the
// Guard's (reflector.DefaultAcceptRegressionAfter).
func (o Options) withDefaults(exampleObject runtime.Object) Options {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.ObjectDescription == "" {
		o.ObjectDescription = fmt.Sprintf("%T", exampleObject)
	}
	if o.Resource.Empty() {
		o.Resource = exampleResource(exampleObject, o)
	}
	if o.SnapshotProbeLimit == 0 {
		o.SnapshotProbeLimit = DefaultSnapshotProbeLimit
	}
	if o.ServerReads == nil {
		o.ServerReads = new(ServerReads) // shared with nobody
	}
	if o.internal.listCompressedBytes == 0 {
		o.internal.listCompressedBytes = listCompressedBytes
	}
	if o.internal.startGrace == 0 {
		o.internal.startGrace = defaultStartGrace
	}
	return o
}

// defaultStartGrace is how long a wait on an informer whose Run has not
// begun waits for it before failing with freshness.ErrNotStarted. The
// client-go idiom `go inf.RunWithContext(ctx)` followed by a wait races
// the Run goroutine's first instructions: it runs within microseconds,
// and within tens of milliseconds on a loaded machine (a GC pause, the
// race detector), so a second is far beyond any scheduling delay, while
// an informer really never started is reported within about the time a
// user would wait for a first answer anyway.
const defaultStartGrace = time.Second

// listCompressedBytes is the response size from which the apiserver
// compresses a list (defaultGzipThresholdBytes in k8s.io/apiserver's
// responsewriters). After a failed request, an informer whose objects take
// that much relists with a list, not client-go's watch-list: right after
// an outage the apiserver streams a watch-list's initial events at its
// busiest, and for a kind its registry decorates (Services, PVCs) through
// one more goroutine per event, each event flushed and compressed on its
// own (measured: 3.7 s and 228 KiB for 500 Services, against a list's 20
// KiB answered at once); a write made meanwhile reaches the informer only
// after them. Below the threshold the list would go uncompressed, and the
// watch-list costs fewer bytes (docs/benchmarks.md, "An apiserver
// restart").
const listCompressedBytes = 128 << 10

// exampleResource names an informer's resource from its example object;
// the zero GroupResource when it cannot, never a Go type name.
func exampleResource(obj runtime.Object, o Options) schema.GroupResource {
	gvr, err := o.resourceMapper.ResourceFor(obj)
	if err != nil {
		return schema.GroupResource{}
	}
	return gvr.GroupResource()
}
