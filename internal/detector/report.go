package detector

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/stalereads"
)

// The stacks' rate limit, per informer and per transport: a burst, then
// one per second. Only these reports get a stack (the expensive part), and
// only they are logged.
const (
	logBurst      = 10
	logsPerSecond = 1
	maxFrames     = 32
)

// output is where a detector's reports go, and what halt mode does with
// one no handler takes.
type output struct {
	// Handler, if set, receives each report, on the reading (or writing)
	// goroutine. It takes the place of the log: reports are then logged
	// only with LogReports, and the detector does not announce itself.
	Handler    func(stalereads.Report)
	LogReports bool
	// Halt fails at the first report no handler takes, through Fail.
	Halt bool
	// Fail is halt mode's failure, called with the report after it is
	// logged. Nil: panic with the report, as client-go's cache mutation
	// detector does: the library never ends the process itself.
	Fail func(stalereads.Report)
}

// reporter hands every report to the counter and the handler, and a
// sampled few, with their stack, to the log.
type reporter struct {
	out    output
	logs   bool                        // reports are logged: no handler, or LogReports
	count  func(stalereads.Report)     // the owner's counter
	logger atomic.Pointer[klog.Logger] // the informer's run's, once it runs

	announced atomic.Bool // the detector said it is on

	mu         sync.Mutex // guards the fields below; a leaf
	tokens     float64
	last       time.Time
	suppressed int // reports not logged since the last logged one
}

func newReporter(out output, count func(stalereads.Report), logger klog.Logger) *reporter {
	out.Halt = out.Halt && out.Handler == nil
	if out.Fail == nil {
		out.Fail = failByPanic
	}
	r := &reporter{out: out, logs: out.Handler == nil || out.LogReports, count: count, tokens: logBurst}
	r.logger.Store(&logger)
	return r
}

// failByPanic is halt mode's default failure: a panic on the goroutine
// that read or wrote stale, carrying the report, as client-go's cache
// mutation detector panics with the mutation it found.
func failByPanic(rep stalereads.Report) {
	panic(fmt.Sprintf("stalereads=halt (%s): %s", stalereads.EnvVar, rep))
}

// mode names where reports go, for the line announcing the detector.
func (r *reporter) mode() string {
	switch {
	case r.out.Halt:
		return "halt"
	case r.out.Handler != nil:
		return "handler and log"
	}
	return "log"
}

// announce logs, once, that the detector is on, unless a handler takes
// the log's place. kv say what it watches.
func (r *reporter) announce(logger klog.Logger, msg string, kv ...any) {
	if !r.logs || r.announced.Swap(true) {
		return
	}
	logger.Info(msg, append(kv, "mode", r.mode(), "env", stalereads.EnvVar)...)
}

// sample reports whether this report is logged, and how many were not
// since the last one that was.
func (r *reporter) sample(now time.Time) (bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.last.IsZero() {
		r.tokens = min(logBurst, r.tokens+now.Sub(r.last).Seconds()*logsPerSecond)
	}
	r.last = now
	if r.tokens < 1 {
		r.suppressed++
		return false, 0
	}
	r.tokens--
	n := r.suppressed
	r.suppressed = 0
	return true, n
}

// report delivers rep. It runs on the reading (or writing) goroutine,
// holding no lock of the detector's.
func (r *reporter) report(rep stalereads.Report) { r.reportTo(*r.logger.Load(), rep) }

// reportTo delivers rep, logging through logger.
func (r *reporter) reportTo(logger klog.Logger, rep stalereads.Report) {
	r.count(rep)
	// The stacks are sampled whether the log or a handler gets them.
	if sampled, suppressed := r.sample(time.Now()); sampled || r.out.Halt {
		rep.Stack = callerStack()
		if r.logs {
			r.log(logger, rep, suppressed)
		}
	}
	if r.out.Handler != nil {
		r.out.Handler(rep)
		return
	}
	if r.out.Halt {
		logger.Error(nil, "Failing: stalereads=halt", "env", stalereads.EnvVar)
		klog.Flush()
		r.out.Fail(rep)
	}
}

func (r *reporter) log(logger klog.Logger, rep stalereads.Report, suppressed int) {
	msg := "Stale read: the cache returned older state than this process wrote"
	kv := []any{"kind", rep.Kind.String()}
	if rep.Kind == stalereads.WriteOlder {
		// A transport's logger does not name the resource; an informer's does.
		msg = "Stale write: sent on older state than this process wrote"
		kv = append(kv, "resource", rep.Resource.String())
	}
	kv = append(kv, "key", rep.Key, "op", rep.Op,
		"resourceVersion", rep.ResourceVersion, "writtenResourceVersion", rep.WrittenResourceVersion, "sinceWrite", rep.SinceWrite)
	if rep.CacheResourceVersion != "" {
		kv = append(kv, "cacheResourceVersion", rep.CacheResourceVersion)
	}
	if rep.UID != "" {
		kv = append(kv, "uid", rep.UID)
	}
	if suppressed > 0 {
		kv = append(kv, "notLoggedBefore", suppressed)
	}
	logger.Error(nil, msg, append(kv, "stack", rep.Stack)...)
}

// thisPackage returns the prefix of the function names of this package's
// frames, which a stack leaves out: it starts at the caller's read or write.
func thisPackage() string { return reflect.TypeFor[reporter]().PkgPath() + "." }

// callerStack formats the calling goroutine's stack as the race detector
// does, without this package's frames.
func callerStack() string {
	var pcs [maxFrames + 8]uintptr
	n := runtime.Callers(2, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	var b strings.Builder
	prefix := thisPackage()
	for i := 0; i < maxFrames; {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, prefix) {
			fmt.Fprintf(&b, "  %s()\n      %s:%d\n", f.Function, f.File, f.Line)
			i++
		}
		if !more {
			break
		}
	}
	return b.String()
}
