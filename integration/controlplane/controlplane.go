// Package controlplane runs a real etcd and kube-apiserver on loopback for
// integration tests and demos.
//
// It wraps controller-runtime's envtest control plane (the ecosystem
// convention for running these binaries) and adds what freshness tests need:
// etcd progress notifications so quiet watches receive bookmarks, a
// kube-apiserver restart that keeps etcd and the client credentials, and etcd
// compaction. The binaries are built from Go modules by `make bins` (see
// integration/README.md); FindBinaries locates them.
//
// Every operation is bounded in time. envtest starts the processes in their
// own process group, so a terminal's Ctrl-C does not reach them: callers must
// call Stop on every exit path (the testenv package does this for tests,
// including on SIGINT/SIGTERM and shortly before `go test -timeout` fires).
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// EnvOutput, when set to "1" or "true", attaches the processes' output to
// this process's stderr (for debugging a failing start or test).
const EnvOutput = "FRESHINFORMER_CONTROLPLANE_OUTPUT"

// Defaults for Options.
const (
	DefaultStartTimeout                = 90 * time.Second
	DefaultStopTimeout                 = 15 * time.Second
	DefaultWatchProgressNotifyInterval = 5 * time.Second

	// processStartTimeout bounds one process's start (envtest's health
	// check); Start retries a failed attempt while its budget allows,
	// because envtest picks ports by probing, which can race.
	processStartTimeout = 30 * time.Second
)

// UncachedResource is the one built-in resource (core/v1 PodTemplates) that
// the kube-apiserver serves without a watch cache. Lists and watches on it
// go straight to etcd, so unlike every other resource: its watches never
// receive BOOKMARK events, and after CompactEtcd a watch from an older
// resource version fails at once with 410 Gone (reason Expired). Watches on
// cached resources (e.g. ConfigMaps) keep replaying from the cache's own
// event window instead; see integration/README.md.
const UncachedResource = "podtemplates"

// Options configures Start. The zero value is usable.
type Options struct {
	// BinDir holds kube-apiserver and etcd. Empty: see FindBinaries.
	BinDir string

	// StartTimeout bounds Start as a whole, in addition to ctx.
	// Default DefaultStartTimeout.
	StartTimeout time.Duration

	// StopTimeout bounds the graceful stop of each process, after which it
	// is killed. Default DefaultStopTimeout.
	StopTimeout time.Duration

	// WatchProgressNotifyInterval is etcd's
	// --watch-progress-notify-interval. The kube-apiserver watch cache turns
	// etcd progress notifications into BOOKMARK events for quiet watches, so
	// a short interval makes bookmarks arrive quickly in tests. Default
	// DefaultWatchProgressNotifyInterval; negative leaves etcd's default
	// (10 minutes).
	WatchProgressNotifyInterval time.Duration

	// EtcdArgs and APIServerArgs add or override process flags (flag name
	// without leading dashes, to values).
	EtcdArgs      map[string][]string
	APIServerArgs map[string][]string

	// Output, if non-nil, receives both processes' stdout and stderr.
	// The environment variable EnvOutput sends them to os.Stderr.
	Output io.Writer
}

func (o Options) withDefaults() Options {
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = DefaultStopTimeout
	}
	if o.WatchProgressNotifyInterval == 0 {
		o.WatchProgressNotifyInterval = DefaultWatchProgressNotifyInterval
	}
	if o.Output == nil {
		if v := os.Getenv(EnvOutput); v == "1" || v == "true" {
			o.Output = os.Stderr
		}
	}
	return o
}

// ControlPlane is a running etcd plus kube-apiserver. Its methods are safe
// for concurrent use; Stop must be called to end the processes.
type ControlPlane struct {
	opts   Options
	binDir string
	// workDir holds etcd's data and the apiserver's certificates. It is
	// ours (not envtest's temporary dirs) so an apiserver restart reuses
	// the serving certificate, keeping every rest.Config valid.
	workDir string

	cp       *envtest.ControlPlane
	cfg      *rest.Config
	admin    *envtest.AuthenticatedUser
	etcdOut  *tailBuffer
	apiOut   *tailBuffer
	children *children

	mu       sync.Mutex
	stopped  bool
	apiUp    bool
	replicas []*Replica // started by StartAPIServerReplica, stopped by Stop
	restores int        // etcd data directories made by RestoreEtcd
	stopOnce sync.Once
	stopErr  error
}

// Start launches etcd and kube-apiserver on random loopback ports and waits
// until the apiserver's /readyz passes and the "default" namespace exists.
// It is bounded by ctx and Options.StartTimeout; a single process start
// cannot be interrupted and may overrun the bound by up to 30s. On error
// nothing is left running.
func Start(ctx context.Context, opts Options) (*ControlPlane, error) {
	opts = opts.withDefaults()
	binDir, err := FindBinaries(opts.BinDir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	var lastErr error
	attempts := 0
	for attempts < 3 && ctx.Err() == nil {
		attempts++
		c, err := startOnce(ctx, opts, binDir)
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	switch {
	case lastErr == nil:
		return nil, fmt.Errorf("controlplane: start: %w", ctx.Err())
	case ctx.Err() != nil:
		return nil, fmt.Errorf("controlplane: start: %w after %d attempt(s); last: %w", ctx.Err(), attempts, lastErr)
	default:
		// The *Error already names the component and operation.
		return nil, fmt.Errorf("%w (%d attempts)", lastErr, attempts)
	}
}

func startOnce(ctx context.Context, opts Options, binDir string) (_ *ControlPlane, retErr error) {
	workDir, err := os.MkdirTemp("", "freshinformer-controlplane-")
	if err != nil {
		return nil, fmt.Errorf("creating work dir: %w", err)
	}
	c := &ControlPlane{
		opts:     opts,
		binDir:   binDir,
		workDir:  workDir,
		etcdOut:  newTailBuffer(16 << 10),
		apiOut:   newTailBuffer(16 << 10),
		children: newChildren(),
	}
	c.children.recordDir(workDir)
	defer func() {
		if retErr != nil {
			_ = c.Stop()
		}
	}()

	etcdDir := filepath.Join(workDir, "etcd")
	certDir := filepath.Join(workDir, "apiserver")
	for _, d := range []string{etcdDir, certDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("creating %s: %w", d, err)
		}
	}

	etcd := &envtest.Etcd{
		Path:         filepath.Join(binDir, etcdBinary),
		DataDir:      etcdDir,
		StartTimeout: processBudget(ctx),
		StopTimeout:  opts.StopTimeout,
		Out:          c.writer(c.etcdOut),
		Err:          c.writer(c.etcdOut),
	}
	ea := etcd.Configure()
	// Tests do not need durability; fsync dominates etcd latency.
	ea.Set("unsafe-no-fsync", "true")
	if opts.WatchProgressNotifyInterval > 0 {
		ea.Set("watch-progress-notify-interval", opts.WatchProgressNotifyInterval.String())
	}
	applyArgs(ea, opts.EtcdArgs)

	api := &envtest.APIServer{
		Path:         filepath.Join(binDir, apiServerBinary),
		CertDir:      certDir,
		StartTimeout: processBudget(ctx),
		StopTimeout:  opts.StopTimeout,
		Out:          c.writer(c.apiOut),
		Err:          c.writer(c.apiOut),
	}
	configureAPIServer(api.Configure(), opts)

	c.cp = &envtest.ControlPlane{Etcd: etcd, APIServer: api}

	before := c.children.running(etcd.Path)
	if err := etcd.Start(); err != nil {
		return nil, &Error{Component: ComponentEtcd, Op: "start", Err: err, Output: c.etcdOut.String()}
	}
	c.children.record(ComponentEtcd, etcd.Path, before)

	// The envtest ControlPlane.Start would also start etcd; we start the
	// apiserver ourselves to keep the two errors apart.
	api.EtcdURL = etcd.URL
	before = c.children.running(api.Path)
	if err := api.Start(); err != nil {
		return nil, &Error{Component: ComponentAPIServer, Op: "start", Err: err, Output: c.apiOut.String()}
	}
	c.children.record(ComponentAPIServer, api.Path, before)
	c.apiUp = true

	user, err := c.cp.AddUser(envtest.User{Name: "freshinformer-admin", Groups: []string{"system:masters"}},
		// Tests hammer the server on purpose; client-side throttling would
		// only add latency noise.
		&rest.Config{QPS: 1000, Burst: 2000})
	if err != nil {
		return nil, &Error{Component: ComponentAPIServer, Op: "provision admin user", Err: err}
	}
	c.admin = user
	c.cfg = user.Config()

	if err := c.waitReady(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// configureAPIServer sets the kube-apiserver flags of the primary and of
// every replica (StartAPIServerReplica), so all serve alike.
func configureAPIServer(aa *envtest.Arguments, opts Options) {
	// Without it the apiserver derives its advertise address from the
	// host's default route and fails to start on a machine without one.
	aa.Set("advertise-address", "127.0.0.1")
	// The "kubernetes" Service endpoints cannot hold a loopback address;
	// the default reconciler would log an error every 10 s.
	aa.Set("endpoint-reconciler-type", "none")
	// On SIGTERM, stop after in-flight short requests drain with a 2 s HTTP
	// shutdown instead of waiting up to --request-timeout (60 s) for open
	// watches: keeps StopAPIServer/RestartAPIServer fast. Open watches are
	// cut, as in a real rolling restart.
	aa.Set("shutdown-send-retry-after", "true")
	// One resource without watch cache, so tests can see what etcd itself
	// does (see UncachedResource).
	aa.Set("watch-cache-sizes", UncachedResource+"#0")
	applyArgs(aa, opts.APIServerArgs)
}

// processBudget is the time one envtest process start may take: the fixed
// per-process bound, shortened to what is left of ctx.
func processBudget(ctx context.Context) time.Duration {
	d := processStartTimeout
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); left < d {
			d = max(left, time.Second)
		}
	}
	return d
}

func applyArgs(a *envtest.Arguments, args map[string][]string) {
	for name, values := range args {
		a.Set(name, values...)
	}
}

func (c *ControlPlane) writer(tail *tailBuffer) io.Writer {
	if c.opts.Output != nil {
		return io.MultiWriter(tail, c.opts.Output)
	}
	return tail
}

// waitReady polls /readyz and then the "default" namespace (created by a
// post-start hook shortly after /readyz can first pass).
func (c *ControlPlane) waitReady(ctx context.Context) error {
	return waitReadyConfig(ctx, c.cfg, ComponentAPIServer, c.apiOut)
}

// waitReadyConfig is waitReady for the apiserver that cfg points at.
func waitReadyConfig(ctx context.Context, cfg *rest.Config, component string, out *tailBuffer) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return &Error{Component: component, Op: "wait for readiness", Err: err}
	}
	var last error
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		last = probe(ctx, func(pctx context.Context) error {
			if _, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(pctx); err != nil {
				return fmt.Errorf("/readyz: %w", err)
			}
			if _, err := cs.CoreV1().Namespaces().Get(pctx, metav1.NamespaceDefault, metav1.GetOptions{}); err != nil {
				return fmt.Errorf("namespace %q: %w", metav1.NamespaceDefault, err)
			}
			return nil
		})
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return &Error{Component: component, Op: "wait for readiness",
				Err: fmt.Errorf("%w (last probe: %w)", ctx.Err(), last), Output: out.String()}
		case <-tick.C:
		}
	}
}

func probe(ctx context.Context, f func(context.Context) error) error {
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return f(pctx)
}

// Config returns a copy of an admin (system:masters) client config. It stays
// valid across RestartAPIServer: the port and certificates are kept.
func (c *ControlPlane) Config() *rest.Config { return rest.CopyConfig(c.cfg) }

// Clientset returns a new clientset for Config.
func (c *ControlPlane) Clientset() (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(c.Config())
}

// APIServerURL is the apiserver's https base URL.
func (c *ControlPlane) APIServerURL() string { return c.cfg.Host }

// EtcdEndpoint is etcd's client URL (plain http on loopback).
func (c *ControlPlane) EtcdEndpoint() string { return c.cp.Etcd.URL.String() }

// BinDir is the directory the binaries were run from.
func (c *ControlPlane) BinDir() string { return c.binDir }

// KubeConfig returns a kubeconfig (YAML) equivalent to Config.
func (c *ControlPlane) KubeConfig() ([]byte, error) {
	return c.admin.KubeConfig()
}

// WriteKubeConfig writes KubeConfig to path with mode 0600.
func (c *ControlPlane) WriteKubeConfig(path string) error {
	b, err := c.KubeConfig()
	if err != nil {
		return fmt.Errorf("controlplane: kubeconfig: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("controlplane: kubeconfig: %w", err)
	}
	return nil
}

// StopAPIServer stops the kube-apiserver, leaving etcd running. Clients see
// connection refused until StartAPIServer. It is bounded by
// Options.StopTimeout, after which the process is killed.
func (c *ControlPlane) StopAPIServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return ErrStopped
	}
	if !c.apiUp {
		return nil
	}
	c.apiUp = false
	err := c.cp.APIServer.Stop()
	c.children.forget(ComponentAPIServer)
	if err != nil {
		return &Error{Component: ComponentAPIServer, Op: "stop", Err: err, Output: c.apiOut.String()}
	}
	return nil
}

// StartAPIServer starts a stopped kube-apiserver on the same port with the
// same certificates and etcd, and waits for readiness (bounded by ctx). Its
// watch cache starts empty at etcd's current revision, so watches from older
// resource versions get 410 Gone.
func (c *ControlPlane) StartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return ErrStopped
	}
	if c.apiUp {
		return nil
	}
	return c.startAPIServerLocked(ctx, "restart")
}

// startAPIServerLocked starts the stopped kube-apiserver and waits for
// readiness; op names the step in errors. c.mu is held.
func (c *ControlPlane) startAPIServerLocked(ctx context.Context, op string) error {
	api := c.cp.APIServer
	api.StartTimeout = processBudget(ctx)
	before := c.children.running(api.Path)
	if err := api.Start(); err != nil {
		// envtest leaves a process that failed its health check running.
		_ = api.Stop()
		return &Error{Component: ComponentAPIServer, Op: op, Err: err, Output: c.apiOut.String()}
	}
	c.children.record(ComponentAPIServer, api.Path, before)
	c.apiUp = true
	return c.waitReady(ctx)
}

// RestartAPIServer is StopAPIServer followed by StartAPIServer.
func (c *ControlPlane) RestartAPIServer(ctx context.Context) error {
	if err := c.StopAPIServer(); err != nil {
		return err
	}
	return c.StartAPIServer(ctx)
}

// Stop stops the kube-apiserver and etcd (each gracefully within
// Options.StopTimeout, then killed) and removes their data. It is
// idempotent and safe to call concurrently; later calls return the first
// call's result.
func (c *ControlPlane) Stop() error {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.stopped = true
		var errs []error
		for _, r := range c.replicas {
			if err := r.stop(); err != nil {
				errs = append(errs, err)
			}
		}
		c.replicas = nil
		if c.cp != nil {
			if c.apiUp && c.cp.APIServer != nil {
				if err := c.cp.APIServer.Stop(); err != nil {
					errs = append(errs, &Error{Component: ComponentAPIServer, Op: "stop", Err: err})
				}
			}
			c.apiUp = false
			if c.cp.Etcd != nil {
				if err := c.cp.Etcd.Stop(); err != nil {
					errs = append(errs, &Error{Component: ComponentEtcd, Op: "stop", Err: err})
				}
			}
		}
		c.children.forgetAll()
		if c.workDir != "" {
			if err := os.RemoveAll(c.workDir); err != nil {
				errs = append(errs, fmt.Errorf("controlplane: removing %s: %w", c.workDir, err))
			} else {
				c.children.forgetDir(c.workDir)
			}
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// Describe is a one-line summary for progress output.
func (c *ControlPlane) Describe() string {
	return fmt.Sprintf("kube-apiserver %s, etcd %s (binaries in %s)", c.APIServerURL(), c.EtcdEndpoint(), c.binDir)
}

// Up reports whether the apiserver answers /readyz right now (2 s bound).
func (c *ControlPlane) Up(ctx context.Context) bool {
	cs, err := kubernetes.NewForConfig(c.cfg)
	if err != nil {
		return false
	}
	return probe(ctx, func(pctx context.Context) error {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(pctx)
		return err
	}) == nil
}

// CreateNamespace creates a namespace with a generated name starting with
// prefix and returns its name.
func (c *ControlPlane) CreateNamespace(ctx context.Context, prefix string) (string, error) {
	cs, err := c.Clientset()
	if err != nil {
		return "", err
	}
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("controlplane: creating namespace %q: %w", prefix, err)
	}
	return ns.Name, nil
}
