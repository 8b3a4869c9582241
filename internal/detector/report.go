package detector

import (
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/stalereads"
)

// The log's rate limit, per informer and per transport: a burst, then one
// per second. Only logged reports get a stack (the expensive part).
const (
	logBurst      = 10
	logsPerSecond = 1
	maxFrames     = 32
)

// exit ends the process (stalereads=halt); tests replace it.
var exit, osExit = os.Exit, os.Exit

// reporter hands every report to the handler and the counters, and a
// sampled few, with their stack, to the log.
type reporter struct {
	handler func(stalereads.Report) // nil: none
	halt    bool
	logger  klog.Logger

	mu         sync.Mutex // guards the fields below; a leaf
	tokens     float64
	last       time.Time
	suppressed int // reports not logged since the last logged one
}

func newReporter(handler func(stalereads.Report), halt bool, logger klog.Logger) *reporter {
	return &reporter{handler: handler, halt: halt && handler == nil, logger: logger, tokens: logBurst}
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
func (r *reporter) report(rep stalereads.Report) {
	c := CountsFor(rep.Resource)
	if rep.Kind == stalereads.WriteOlder {
		c.Writes.Add(1)
	} else {
		c.Reads.Add(1)
	}
	logged, suppressed := r.sample(time.Now())
	if logged || r.halt {
		rep.Stack = callerStack()
		r.log(rep, suppressed)
	}
	if r.handler != nil {
		r.handler(rep)
		return
	}
	if r.halt {
		r.logger.Error(nil, "Exiting: stalereads=halt", "env", stalereads.EnvVar, "exitStatus", stalereads.HaltExitStatus)
		klog.Flush()
		exit(stalereads.HaltExitStatus)
	}
}

func (r *reporter) log(rep stalereads.Report, suppressed int) {
	msg := "Stale read: the cache returned older state than this process wrote"
	if rep.Kind == stalereads.WriteOlder {
		msg = "Stale write: sent on older state than this process wrote"
	}
	kv := []any{"kind", rep.Kind.String(), "resource", rep.Resource.String(), "key", rep.Key, "op", rep.Op,
		"resourceVersion", rep.ResourceVersion, "writtenResourceVersion", rep.WrittenResourceVersion, "sinceWrite", rep.SinceWrite}
	if rep.Informer != "" {
		kv = append(kv, "informer", rep.Informer)
	}
	if rep.CacheResourceVersion != "" {
		kv = append(kv, "cacheResourceVersion", rep.CacheResourceVersion)
	}
	if rep.UID != "" {
		kv = append(kv, "uid", rep.UID)
	}
	if suppressed > 0 {
		kv = append(kv, "notLoggedBefore", suppressed)
	}
	r.logger.Error(nil, msg, append(kv, "stack", rep.Stack)...)
}

// thisPackage prefixes the function names of this package's frames, which
// a stack leaves out: it starts at the caller's read or write.
var thisPackage = reflect.TypeFor[reporter]().PkgPath() + "."

// callerStack formats the calling goroutine's stack as the race detector
// does, without this package's frames.
func callerStack() string {
	var pcs [maxFrames + 8]uintptr
	n := runtime.Callers(2, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	var b strings.Builder
	for i := 0; i < maxFrames; {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, thisPackage) {
			fmt.Fprintf(&b, "  %s()\n      %s:%d\n", f.Function, f.File, f.Line)
			i++
		}
		if !more {
			break
		}
	}
	return b.String()
}
