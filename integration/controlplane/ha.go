package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Defaults for HAOptions.
const (
	DefaultHAAPIServers   = 3
	DefaultHAEtcdMembers  = 3
	DefaultHAStartTimeout = 3 * time.Minute
)

// ComponentHAProxy names the load balancer in errors.
const ComponentHAProxy = "haproxy"

// HAOptions configures StartHA. The zero value is usable once HAProxy is
// installed (`make haproxy`).
type HAOptions struct {
	// BinDir holds kube-apiserver and etcd. Empty: see FindBinaries.
	BinDir string

	// APIServers is the number of kube-apiservers (default 3), EtcdMembers
	// the number of etcd members (default 3). kube-apiserver i talks only
	// to etcd member i mod EtcdMembers, as in kubeadm's stacked topology,
	// so cutting one member off makes one replica's watch cache lag.
	APIServers  int
	EtcdMembers int

	// HAProxy is the haproxy binary; default: haproxy on $PATH.
	HAProxy string

	// StartTimeout bounds StartHA (default DefaultHAStartTimeout);
	// StopTimeout each graceful stop (default DefaultStopTimeout).
	StartTimeout time.Duration
	StopTimeout  time.Duration

	// WatchProgressNotifyInterval: as Options.WatchProgressNotifyInterval.
	WatchProgressNotifyInterval time.Duration

	// EtcdArgs and APIServerArgs add or override flags of every member or
	// replica (flag name without leading dashes, to values).
	EtcdArgs      map[string][]string
	APIServerArgs map[string][]string

	// Output, if non-nil, receives every process's output (EnvOutput
	// sends it to os.Stderr).
	Output io.Writer
}

func (o HAOptions) withDefaults() HAOptions {
	if o.APIServers <= 0 {
		o.APIServers = DefaultHAAPIServers
	}
	if o.EtcdMembers <= 0 {
		o.EtcdMembers = DefaultHAEtcdMembers
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultHAStartTimeout
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

// HAControlPlane is a highly available control plane on loopback: an etcd
// cluster, several kube-apiservers on it sharing their serving
// certificate, client CA and service-account key, and HAProxy in front (TCP
// mode, round robin, health checks on /readyz over HTTPS, as in kubeadm's
// high-availability guide). Each process starts and stops on its own. Its
// methods are safe for concurrent use; Stop must be called to end the
// processes (the reaper, integration/hack/with-reaper.sh, ends them if the
// program dies first).
type HAControlPlane struct {
	opts    HAOptions
	binDir  string
	workDir string
	certs   *haCerts

	etcd      []*etcdMember
	apis      []*haAPIServer
	lb        *proc
	lbPort    int
	lbSocket  string
	children  *children
	cfg       *rest.Config // through the load balancer
	stopOnce  sync.Once
	stopErr   error
	apiCfgs   []*rest.Config
	etcdPeers string // --initial-cluster

	// restoreMu is held by RestoreEtcd for the whole restore and by Stop:
	// a restore stops and starts every process, and Stop must not run
	// in between (it would leave what the restore starts next running).
	// It comes before mu, and both before any proc's mutex.
	restoreMu sync.Mutex

	mu        sync.Mutex // guards stopped and snapshots
	stopped   bool
	snapshots int // snapshot files written by SnapshotEtcd
}

type etcdMember struct {
	name       string
	clientPort int
	peerPort   int
	dataDir    string
	p          *proc
}

func (m *etcdMember) url() string { return "http://127.0.0.1:" + strconv.Itoa(m.clientPort) }

type haAPIServer struct {
	port int
	p    *proc
}

// StartHA starts the etcd members, then the kube-apiservers, then HAProxy,
// and waits until the load balancer passes /readyz and the "default"
// namespace exists. It is bounded by ctx and HAOptions.StartTimeout. On
// error nothing is left running.
func StartHA(ctx context.Context, opts HAOptions) (*HAControlPlane, error) {
	opts = opts.withDefaults()
	binDir, err := FindBinaries(opts.BinDir)
	if err != nil {
		return nil, err
	}
	if opts.HAProxy == "" {
		p, err := exec.LookPath("haproxy")
		if err != nil {
			return nil, &Error{Component: ComponentHAProxy, Op: "find",
				Err: fmt.Errorf("%w: install it with `make haproxy` (Debian package haproxy)", err)}
		}
		opts.HAProxy = p
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	var lastErr error
	for attempt := 0; attempt < 2 && ctx.Err() == nil; attempt++ {
		h, err := startHAOnce(ctx, opts, binDir)
		if err == nil {
			return h, nil
		}
		lastErr = err
	}
	if lastErr == nil {
		lastErr = ctx.Err()
	}
	return nil, fmt.Errorf("controlplane: HA start: %w", lastErr)
}

// freePorts returns n distinct free loopback ports. Another process may
// take one before it is used; StartHA retries once.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func flagArgs(m map[string][]string) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	var out []string
	for _, k := range names {
		for _, v := range m[k] {
			out = append(out, "--"+k+"="+v)
		}
	}
	return out
}

func startHAOnce(ctx context.Context, opts HAOptions, binDir string) (_ *HAControlPlane, retErr error) {
	workDir, err := os.MkdirTemp("", "freshinformer-controlplane-ha-")
	if err != nil {
		return nil, fmt.Errorf("creating work dir: %w", err)
	}
	h := &HAControlPlane{opts: opts, binDir: binDir, workDir: workDir, children: newChildren()}
	h.children.recordDir(workDir)
	defer func() {
		if retErr != nil {
			_ = h.Stop()
		}
	}()
	if h.certs, err = writeHACerts(workDir); err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	ports, err := freePorts(2*opts.EtcdMembers + opts.APIServers + 1)
	if err != nil {
		return nil, fmt.Errorf("ports: %w", err)
	}

	// etcd members; all start at once: the first election needs a quorum.
	var peers []string
	for i := range opts.EtcdMembers {
		m := &etcdMember{name: fmt.Sprintf("etcd-%d", i), clientPort: ports[2*i], peerPort: ports[2*i+1],
			dataDir: filepath.Join(workDir, fmt.Sprintf("etcd-%d", i))}
		h.etcd = append(h.etcd, m)
		peers = append(peers, fmt.Sprintf("%s=http://127.0.0.1:%d", m.name, m.peerPort))
	}
	h.etcdPeers = strings.Join(peers, ",")
	for _, m := range h.etcd {
		m.p = newProc(m.name, filepath.Join(binDir, etcdBinary), h.etcdArgs(m), opts.Output, h.children)
		if err := m.p.start(); err != nil {
			return nil, err
		}
	}
	for i := range h.etcd {
		if err := h.waitEtcd(ctx, i); err != nil {
			return nil, err
		}
	}

	// kube-apiservers, started together and each waited for.
	lbPort := ports[len(ports)-1]
	h.lbPort = lbPort
	for i := range opts.APIServers {
		a := &haAPIServer{port: ports[2*opts.EtcdMembers+i]}
		a.p = newProc(fmt.Sprintf("%s-%d", ComponentAPIServer, i), filepath.Join(binDir, apiServerBinary),
			h.apiServerArgs(i, a.port), opts.Output, h.children)
		h.apis = append(h.apis, a)
		h.apiCfgs = append(h.apiCfgs, h.configFor(a.port))
	}
	for _, a := range h.apis {
		if err := a.p.start(); err != nil {
			return nil, err
		}
	}
	errs := make([]error, len(h.apis))
	var wg sync.WaitGroup
	for i := range h.apis {
		wg.Go(func() { errs[i] = h.waitAPIServer(ctx, i) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	// The load balancer.
	h.lbSocket = filepath.Join(workDir, "haproxy.sock")
	cfgPath := filepath.Join(workDir, "haproxy.cfg")
	if err := os.WriteFile(cfgPath, []byte(h.haproxyConfig()), 0o600); err != nil {
		return nil, err
	}
	h.lb = newProc(ComponentHAProxy, opts.HAProxy, []string{"-db", "-f", cfgPath}, opts.Output, h.children)
	if err := h.lb.start(); err != nil {
		return nil, err
	}
	h.cfg = h.configFor(lbPort)
	if err := waitReadyConfig(ctx, h.cfg, ComponentHAProxy, h.lb.out); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *HAControlPlane) etcdArgs(m *etcdMember) []string {
	a := map[string][]string{
		"name":                        {m.name},
		"data-dir":                    {m.dataDir},
		"listen-client-urls":          {m.url()},
		"advertise-client-urls":       {m.url()},
		"listen-peer-urls":            {fmt.Sprintf("http://127.0.0.1:%d", m.peerPort)},
		"initial-advertise-peer-urls": {fmt.Sprintf("http://127.0.0.1:%d", m.peerPort)},
		"initial-cluster":             {h.etcdPeers},
		"initial-cluster-state":       {"new"},
		"initial-cluster-token":       {filepath.Base(h.workDir)},
		// Tests do not need durability; fsync dominates etcd latency.
		"unsafe-no-fsync": {"true"},
		// Twice etcd's defaults (100 ms, 1 s): the members share a busy
		// 2-core machine with three apiservers, and a missed heartbeat
		// there is load, not a failure worth a new election.
		"heartbeat-interval": {"200"},
		"election-timeout":   {"2000"},
		"log-level":          {"warn"},
	}
	if h.opts.WatchProgressNotifyInterval > 0 {
		a["watch-progress-notify-interval"] = []string{h.opts.WatchProgressNotifyInterval.String()}
	}
	for k, v := range h.opts.EtcdArgs {
		a[k] = v
	}
	return flagArgs(a)
}

func (h *HAControlPlane) apiServerArgs(i, port int) []string {
	c := h.certs
	a := map[string][]string{
		"advertise-address": {"127.0.0.1"},
		"bind-address":      {"127.0.0.1"},
		"secure-port":       {strconv.Itoa(port)},
		"cert-dir":          {filepath.Join(h.workDir, fmt.Sprintf("apiserver-%d", i))},
		// Stacked etcd: each replica on its own member.
		"etcd-servers":                     {h.etcd[i%len(h.etcd)].url()},
		"tls-cert-file":                    {c.servingCert},
		"tls-private-key-file":             {c.servingKey},
		"client-ca-file":                   {c.clientCA},
		"service-account-issuer":           {fmt.Sprintf("https://127.0.0.1:%d", h.lbPort)},
		"service-account-key-file":         {c.serviceAccount},
		"service-account-signing-key-file": {c.serviceAccount},
		"service-cluster-ip-range":         {"10.0.0.0/24"},
		"authorization-mode":               {"RBAC"},
		"allow-privileged":                 {"true"},
		// As envtest: no controller creates the default ServiceAccount.
		"disable-admission-plugins": {"ServiceAccount"},
		// As the single-server plane (configureAPIServer).
		"endpoint-reconciler-type":  {"none"},
		"shutdown-send-retry-after": {"true"},
		"watch-cache-sizes":         {UncachedResource + "#0"},
		// Half the defaults (400, 200): three replicas share two cores.
		"max-requests-inflight":          {"200"},
		"max-mutating-requests-inflight": {"100"},
		// Above the default 100 streams per HTTP/2 connection: a process
		// with more watches opens a second connection, which the load
		// balancer may send to another replica. Side-by-side measures
		// (cmd/restartcost -ha) put both sides on one connection, so
		// that every restart hits them alike.
		"http2-max-streams-per-connection": {"1000"},
	}
	for k, v := range h.opts.APIServerArgs {
		a[k] = v
	}
	return flagArgs(a)
}

// haproxyConfig follows kubeadm's high-availability guide
// (kubernetes/kubeadm docs/ha-considerations.md): TCP passthrough, round
// robin, an HTTPS health check, the guide's 35 s client and server
// timeouts. Those cut only connections idle for 35 s; client-go's HTTP/2
// connections ping after 30 s of silence, so a quiet watch stays open. The
// checks ask /readyz (which fails while a replica's etcd is unreachable)
// every second, and a replica counts as down after 3 failures, up after 2.
func (h *HAControlPlane) haproxyConfig() string {
	var b strings.Builder
	fmt.Fprintf(&b, `global
    maxconn 4096
    stats socket %s mode 600 level admin

defaults
    mode                    tcp
    option                  dontlognull
    option                  redispatch
    retries                 1
    timeout connect         5s
    timeout client          35s
    timeout server          35s
    timeout check           2s

frontend apiserver
    bind 127.0.0.1:%d
    mode tcp
    default_backend apiservers

backend apiservers
    mode tcp
    balance roundrobin
    option httpchk
    http-check connect ssl
    http-check send meth GET uri /readyz
    http-check expect status 200
    default-server inter 1s fall 3 rise 2
`, h.lbSocket, h.lbPort)
	for i, a := range h.apis {
		fmt.Fprintf(&b, "    server apiserver-%d 127.0.0.1:%d check verify none\n", i, a.port)
	}
	return b.String()
}

func (h *HAControlPlane) configFor(port int) *rest.Config {
	return &rest.Config{
		Host: fmt.Sprintf("https://127.0.0.1:%d", port),
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   h.certs.servingCA,
			CertData: h.certs.adminCert,
			KeyData:  h.certs.adminKey,
		},
		// As the single-server plane: tests hammer the server on purpose.
		QPS: 1000, Burst: 2000,
	}
}

// waitEtcd polls member i's /health until the cluster has a leader.
func (h *HAControlPlane) waitEtcd(ctx context.Context, i int) error {
	m := h.etcd[i]
	var last error
	for {
		last = probe(ctx, func(pctx context.Context) error {
			req, _ := http.NewRequestWithContext(pctx, http.MethodGet, m.url()+"/health", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"health":"true"`) {
				return fmt.Errorf("/health: %s %s", resp.Status, b)
			}
			return nil
		})
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return &Error{Component: m.name, Op: "wait for health", Err: fmt.Errorf("%w (last probe: %w)", ctx.Err(), last), Output: m.p.out.String()}
		case <-m.p.exited():
			return &Error{Component: m.name, Op: "start", Err: errors.New("exited"), Output: m.p.out.String()}
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (h *HAControlPlane) waitAPIServer(ctx context.Context, i int) error {
	a := h.apis[i]
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-a.p.exited():
			cancel()
		case <-ctx.Done():
		}
	}()
	return waitReadyConfig(ctx, h.apiCfgs[i], a.p.name, a.p.out)
}

func (h *HAControlPlane) check(op string, i, n int) error {
	h.mu.Lock()
	stopped := h.stopped
	h.mu.Unlock()
	if stopped {
		return ErrStopped
	}
	if i < 0 || i >= n {
		return &Error{Component: op, Op: "index", Err: fmt.Errorf("%d out of range [0, %d)", i, n)}
	}
	return nil
}

// Config returns an admin (system:masters) client config through the load
// balancer. Each rest.Config turned into a client shares client-go's
// transport cache with identical configs: one HTTP/2 connection, hence one
// replica, for all of them. DistinctConnection gives a client its own.
func (h *HAControlPlane) Config() *rest.Config { return rest.CopyConfig(h.cfg) }

// APIServerConfig returns an admin config for kube-apiserver i directly,
// bypassing the load balancer.
func (h *HAControlPlane) APIServerConfig(i int) *rest.Config { return rest.CopyConfig(h.apiCfgs[i]) }

// DistinctConnection makes cfg's clients use a transport of their own
// instead of client-go's shared one, so that they open their own
// connection through the load balancer (and may land on another replica).
func DistinctConnection(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	cfg.Dial = d.DialContext // a config with Dial set is never cached
	return cfg
}

// APIServers is the number of kube-apiservers.
func (h *HAControlPlane) APIServers() int { return len(h.apis) }

// EtcdMembers is the number of etcd members.
func (h *HAControlPlane) EtcdMembers() int { return len(h.etcd) }

// LoadBalancerURL is HAProxy's https URL.
func (h *HAControlPlane) LoadBalancerURL() string { return h.cfg.Host }

// APIServerURL is kube-apiserver i's https URL.
func (h *HAControlPlane) APIServerURL(i int) string { return h.apiCfgs[i].Host }

// EtcdEndpoint is member i's client URL.
func (h *HAControlPlane) EtcdEndpoint(i int) string { return h.etcd[i].url() }

// BinDir is the directory the binaries were run from.
func (h *HAControlPlane) BinDir() string { return h.binDir }

// Describe is a one-line summary for progress output.
func (h *HAControlPlane) Describe() string {
	var apis, members []string
	for i := range h.apis {
		apis = append(apis, h.APIServerURL(i))
	}
	for i := range h.etcd {
		members = append(members, h.EtcdEndpoint(i))
	}
	return fmt.Sprintf("HAProxy %s -> %d kube-apiservers %s on %d etcd members %s (binaries in %s)",
		h.LoadBalancerURL(), len(h.apis), strings.Join(apis, " "), len(h.etcd), strings.Join(members, " "), h.binDir)
}

// KubeConfig returns a kubeconfig (YAML) for Config: through the load
// balancer, admin client certificate.
func (h *HAControlPlane) KubeConfig() ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["ha"] = &clientcmdapi.Cluster{Server: h.cfg.Host, CertificateAuthorityData: h.certs.servingCA}
	kc.AuthInfos["freshinformer-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: h.certs.adminCert, ClientKeyData: h.certs.adminKey}
	kc.Contexts["ha"] = &clientcmdapi.Context{Cluster: "ha", AuthInfo: "freshinformer-admin"}
	kc.CurrentContext = "ha"
	return clientcmd.Write(*kc)
}

// WriteKubeConfig writes KubeConfig to path with mode 0600.
func (h *HAControlPlane) WriteKubeConfig(path string) error {
	b, err := h.KubeConfig()
	if err == nil {
		err = os.WriteFile(path, b, 0o600)
	}
	if err != nil {
		return fmt.Errorf("controlplane: kubeconfig: %w", err)
	}
	return nil
}

// StopAPIServer stops kube-apiserver i (SIGTERM, then SIGKILL after
// StopTimeout); KillAPIServer sends SIGKILL at once. The load balancer
// marks it down within about 3 s; connections it held are cut.
func (h *HAControlPlane) StopAPIServer(i int) error {
	if err := h.check(ComponentAPIServer, i, len(h.apis)); err != nil {
		return err
	}
	return h.apis[i].p.stop(h.opts.StopTimeout, false)
}

// KillAPIServer ends kube-apiserver i with SIGKILL.
func (h *HAControlPlane) KillAPIServer(i int) error {
	if err := h.check(ComponentAPIServer, i, len(h.apis)); err != nil {
		return err
	}
	return h.apis[i].p.stop(h.opts.StopTimeout, true)
}

// StartAPIServer starts a stopped kube-apiserver i on its port and waits for
// its /readyz (bounded by ctx). Its watch cache starts empty.
func (h *HAControlPlane) StartAPIServer(ctx context.Context, i int) error {
	if err := h.check(ComponentAPIServer, i, len(h.apis)); err != nil {
		return err
	}
	a := h.apis[i]
	if !a.p.running() {
		if err := a.p.start(); err != nil {
			return err
		}
	}
	return h.waitAPIServer(ctx, i)
}

// RestartAPIServer is StopAPIServer then StartAPIServer.
func (h *HAControlPlane) RestartAPIServer(ctx context.Context, i int) error {
	if err := h.StopAPIServer(i); err != nil {
		return err
	}
	return h.StartAPIServer(ctx, i)
}

// PauseAPIServer freezes kube-apiserver i with SIGSTOP: its connections
// stay open and silent, its watch cache stops; ResumeAPIServer (SIGCONT)
// lets it catch up from etcd. The load balancer's checks fail meanwhile.
func (h *HAControlPlane) PauseAPIServer(i int) error {
	if err := h.check(ComponentAPIServer, i, len(h.apis)); err != nil {
		return err
	}
	return h.apis[i].p.pause(true)
}

// ResumeAPIServer continues a paused kube-apiserver i.
func (h *HAControlPlane) ResumeAPIServer(i int) error {
	if err := h.check(ComponentAPIServer, i, len(h.apis)); err != nil {
		return err
	}
	return h.apis[i].p.pause(false)
}

// PauseEtcdMember freezes etcd member i with SIGSTOP. The replicas on it
// (kube-apiserver j with j mod EtcdMembers == i) keep serving from their
// watch caches, which stop moving, while the others write through the
// remaining quorum: the lagging replica of k/k issue 97294. ResumeEtcdMember
// continues it; it catches up from the leader.
func (h *HAControlPlane) PauseEtcdMember(i int) error {
	if err := h.check(ComponentEtcd, i, len(h.etcd)); err != nil {
		return err
	}
	return h.etcd[i].p.pause(true)
}

// ResumeEtcdMember continues a paused etcd member i.
func (h *HAControlPlane) ResumeEtcdMember(i int) error {
	if err := h.check(ComponentEtcd, i, len(h.etcd)); err != nil {
		return err
	}
	return h.etcd[i].p.pause(false)
}

// StopEtcdMember stops etcd member i (SIGKILL when kill); its data is kept
// for StartEtcdMember.
func (h *HAControlPlane) StopEtcdMember(i int, kill bool) error {
	if err := h.check(ComponentEtcd, i, len(h.etcd)); err != nil {
		return err
	}
	return h.etcd[i].p.stop(h.opts.StopTimeout, kill)
}

// StartEtcdMember restarts a stopped etcd member i on its data and waits
// until it is healthy (it rejoins the cluster).
func (h *HAControlPlane) StartEtcdMember(ctx context.Context, i int) error {
	if err := h.check(ComponentEtcd, i, len(h.etcd)); err != nil {
		return err
	}
	if !h.etcd[i].p.running() {
		if err := h.etcd[i].p.start(); err != nil {
			return err
		}
	}
	return h.waitEtcd(ctx, i)
}

// withEtcdMembers runs f with a short-lived client of the running members.
func (h *HAControlPlane) withEtcdMembers(ctx context.Context, op string, f func(context.Context, *clientv3.Client) error) error {
	if err := h.check(ComponentEtcd, 0, len(h.etcd)); err != nil {
		return err
	}
	var eps []string
	for _, m := range h.etcd {
		if m.p.running() && !m.p.isPaused() {
			eps = append(eps, m.url())
		}
	}
	return withEtcdClient(ctx, op, eps, f)
}

// EtcdRevision returns the cluster's current revision (a quorum read).
func (h *HAControlPlane) EtcdRevision(ctx context.Context) (int64, error) {
	var rev int64
	err := h.withEtcdMembers(ctx, "get revision", func(ctx context.Context, cli *clientv3.Client) error {
		resp, err := cli.Get(ctx, "/freshinformer-revision-probe", clientv3.WithCountOnly())
		if err == nil {
			rev = resp.Header.Revision
		}
		return err
	})
	return rev, err
}

// EtcdLeader returns the index of the member that leads the cluster.
func (h *HAControlPlane) EtcdLeader(ctx context.Context) (int, error) {
	leader := -1
	err := h.withEtcdMembers(ctx, "find leader", func(ctx context.Context, cli *clientv3.Client) error {
		for i, m := range h.etcd {
			if !m.p.running() || m.p.isPaused() {
				continue
			}
			st, err := cli.Status(ctx, m.url())
			if err != nil {
				continue
			}
			if st.Leader != 0 && st.Leader == st.Header.MemberId {
				leader = i
				return nil
			}
		}
		return errors.New("no member reports itself leader")
	})
	return leader, err
}

// WhichAPIServer returns the index of the kube-apiserver that answers
// requests sent through rc right now: client-go multiplexes a client's
// requests on one HTTP/2 connection, which the load balancer gave to one
// replica. It sends /readyz through rc, notes the connection's local
// address, and asks HAProxy (show sess) which server that session went to;
// a connection straight to a replica is matched by its port. -1 if none
// matches.
func (h *HAControlPlane) WhichAPIServer(ctx context.Context, rc rest.Interface) (int, error) {
	var local, remote net.Addr
	tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		local, remote = info.Conn.LocalAddr(), info.Conn.RemoteAddr()
	}})
	if _, err := rc.Get().AbsPath("/readyz").DoRaw(tctx); err != nil {
		return -1, fmt.Errorf("controlplane: which apiserver: %w", err)
	}
	if local == nil || remote == nil {
		return -1, errors.New("controlplane: which apiserver: the request's connection was not seen")
	}
	if tcp, ok := remote.(*net.TCPAddr); ok {
		for i, a := range h.apis {
			if tcp.Port == a.port {
				return i, nil
			}
		}
	}
	out, err := h.haproxyCommand(ctx, "show sess")
	if err != nil {
		return -1, err
	}
	// One line per session: "0x... : proto=tcpv4 src=127.0.0.1:PORT fe=apiserver be=apiservers srv=apiserver-N ...".
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, " src="+local.String()+" ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if n, ok := strings.CutPrefix(f, "srv=apiserver-"); ok {
				if i, err := strconv.Atoi(n); err == nil && i < len(h.apis) {
					return i, nil
				}
			}
		}
	}
	return -1, nil
}

// haproxyCommand sends one command to HAProxy's stats socket and returns
// the answer.
func (h *HAControlPlane) haproxyCommand(ctx context.Context, cmd string) (string, error) {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, "unix", h.lbSocket)
	if err != nil {
		return "", &Error{Component: ComponentHAProxy, Op: cmd, Err: err}
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Write([]byte(cmd + "\n")); err != nil {
		return "", &Error{Component: ComponentHAProxy, Op: cmd, Err: err}
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		return "", &Error{Component: ComponentHAProxy, Op: cmd, Err: err}
	}
	return string(b), nil
}

// Backends returns HAProxy's view of each kube-apiserver ("UP", "DOWN",
// "UP 1/2" while rising, ...), from its stats socket.
func (h *HAControlPlane) Backends(ctx context.Context) ([]string, error) {
	b, err := h.haproxyCommand(ctx, "show stat")
	if err != nil {
		return nil, err
	}
	out := make([]string, len(h.apis))
	for _, line := range strings.Split(b, "\n") {
		f := strings.Split(line, ",")
		// pxname,svname,...,status is field 17 (0-based).
		if len(f) > 17 && f[0] == "apiservers" {
			if n, ok := strings.CutPrefix(f[1], "apiserver-"); ok {
				if i, err := strconv.Atoi(n); err == nil && i < len(out) {
					out[i] = f[17]
				}
			}
		}
	}
	return out, nil
}

// Ready reports whether the load balancer answers /readyz and the
// "default" namespace (2 s bound).
func (h *HAControlPlane) Ready(ctx context.Context) bool {
	cs, err := kubernetes.NewForConfig(h.cfg)
	if err != nil {
		return false
	}
	return probe(ctx, func(pctx context.Context) error {
		_, err := cs.CoreV1().Namespaces().Get(pctx, metav1.NamespaceDefault, metav1.GetOptions{})
		return err
	}) == nil
}

// Stop stops HAProxy, the kube-apiservers and the etcd members (each
// gracefully within StopTimeout, then killed) and removes their data. It
// is idempotent and safe to call concurrently.
func (h *HAControlPlane) Stop() error {
	h.stopOnce.Do(func() {
		h.restoreMu.Lock()
		defer h.restoreMu.Unlock()
		h.mu.Lock()
		h.stopped = true
		h.mu.Unlock()
		var mu sync.Mutex
		var errs []error
		stopAll := func(ps []*proc) {
			var wg sync.WaitGroup
			for _, p := range ps {
				wg.Go(func() {
					if err := p.stop(h.opts.StopTimeout, false); err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
		}
		if h.lb != nil {
			stopAll([]*proc{h.lb})
		}
		var ps []*proc
		for _, a := range h.apis {
			ps = append(ps, a.p)
		}
		stopAll(ps)
		// One member at a time: a member stopped while all its peers
		// stop too waits about 10 s to hand over its leadership.
		for _, m := range h.etcd {
			if m.p != nil {
				stopAll([]*proc{m.p})
			}
		}
		if err := os.RemoveAll(h.workDir); err != nil {
			errs = append(errs, fmt.Errorf("controlplane: removing %s: %w", h.workDir, err))
		} else {
			h.children.forgetDir(h.workDir)
		}
		h.stopErr = errors.Join(errs...)
	})
	return h.stopErr
}
