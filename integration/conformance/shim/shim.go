// Package shim is what the conformance runner (../cmd/conformance) puts in
// place of upstream's constructors when it ports upstream's own test files:
// client-go's shared informer constructors, controller-runtime's cache.New
// and client.New, and envtest's Environment.Start. Each function builds
// freshinformer's implementation, or upstream's when the environment
// variable EnvImpl is "upstream" (the control run), so that one compiled
// test binary serves both runs.
package shim

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	fcache "github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshctrl"
)

// EnvImpl selects the implementation under test: "upstream" for
// client-go's and controller-runtime's own, anything else (or unset) for
// freshinformer's.
const EnvImpl = "FRESHINFORMER_CONFORMANCE_IMPL"

// Upstream reports whether this is the control run.
func Upstream() bool { return os.Getenv(EnvImpl) == "upstream" }

// NewSharedInformer stands in for client-go's function of the same name.
func NewSharedInformer(lw toolscache.ListerWatcher, exampleObject runtime.Object, resync time.Duration) toolscache.SharedInformer {
	if Upstream() {
		return toolscache.NewSharedInformer(lw, exampleObject, resync)
	}
	return fcache.NewSharedIndexInformer(lw, exampleObject, resync, toolscache.Indexers{})
}

// NewSharedIndexInformer stands in for client-go's function of the same name.
func NewSharedIndexInformer(lw toolscache.ListerWatcher, exampleObject runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	if Upstream() {
		return toolscache.NewSharedIndexInformer(lw, exampleObject, resync, indexers)
	}
	return fcache.NewSharedIndexInformer(lw, exampleObject, resync, indexers)
}

// NewSharedIndexInformerWithOptions stands in for client-go's function of
// the same name. Identifier and InformerMetricsProvider (client-go's FIFO
// metrics) have no counterpart: a FreshInformer reports its own metrics.
func NewSharedIndexInformerWithOptions(lw toolscache.ListerWatcher, exampleObject runtime.Object, o toolscache.SharedIndexInformerOptions) toolscache.SharedIndexInformer {
	if Upstream() {
		return toolscache.NewSharedIndexInformerWithOptions(lw, exampleObject, o)
	}
	return fcache.NewSharedIndexInformerWithOptions(lw, exampleObject, fcache.Options{
		ResyncPeriod:      o.ResyncPeriod,
		Indexers:          o.Indexers,
		ObjectDescription: o.ObjectDescription,
	})
}

// NewCache stands in for controller-runtime's cache.New (a
// cache.NewCacheFunc, as freshctrl.NewCache is).
func NewCache(config *rest.Config, opts crcache.Options) (crcache.Cache, error) {
	if Upstream() {
		return crcache.New(config, opts)
	}
	return freshctrl.NewCache(config, opts)
}

// NewClient stands in for controller-runtime's client.New (a
// client.NewClientFunc, as freshctrl.NewClient is).
func NewClient(config *rest.Config, options client.Options) (client.Client, error) {
	if Upstream() {
		return client.New(config, options)
	}
	return freshctrl.NewClient(config, options)
}

// StartEnvtest stands in for env.Start() in upstream's suite files. It also
// records the etcd and kube-apiserver envtest started in
// $FRESHINFORMER_PID_DIR, in the format integration/hack/with-reaper.sh
// reads, so that a test binary that dies before its AfterSuite leaves no
// process behind (envtest runs each binary in a process group of its own).
func StartEnvtest(env *envtest.Environment) (*rest.Config, error) {
	cfg, err := env.Start()
	recordChildren()
	return cfg, err
}

// recordChildren writes one file per child process of ours, named by its
// PID and holding its executable's path.
func recordChildren() {
	dir := os.Getenv("FRESHINFORMER_PID_DIR")
	if dir == "" {
		return
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	self := os.Getpid()
	for _, stat := range procs {
		b, err := os.ReadFile(stat)
		if err != nil {
			continue
		}
		// The fields after the command name (which may hold spaces and
		// parentheses) start after its last ')': state, then ppid.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 2 || fields[1] != strconv.Itoa(self) {
			continue
		}
		pidDir := filepath.Dir(stat)
		exe, err := os.Readlink(filepath.Join(pidDir, "exe"))
		if err != nil {
			continue
		}
		name := filepath.Base(pidDir)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(exe+"\n"), 0o600); err != nil {
			fmt.Fprintf(os.Stderr, "conformance: recording child %s: %v\n", name, err)
		}
	}
}
