// Command restartcost measures what a kube-apiserver restart costs a
// process of informers (issue 28, "What an apiserver rollout costs, at
// scale"): plain client-go's informer factory and ours
// (cache.NewSharedInformerFactory), side by side in one process and one run,
// on a real kube-apiserver and etcd. It prints Markdown tables (for
// docs/benchmarks.md, "An apiserver restart: what it costs").
//
// The scenario: -namespaces namespaces × the -kinds (five namespaced core
// kinds by default), -sizes objects of each kind in each namespace, and per
// side one factory per namespace (WithNamespace), one informer per kind:
// 100 informers a side at the defaults, each holding -sizes objects. Plain
// is informers.NewSharedInformerFactoryWithOptions, ours
// cache.NewSharedInformerFactory, both with client-go's defaults otherwise
// (its typed clients ask for protobuf; watch-list as its feature gates
// say). Each side talks to the apiserver through a counting reverse proxy
// of its own (proxy.go): every request, and every byte sent and received on
// the side's connections (headers, bodies, watch streams as they flow) is
// counted and every request logged. The proxies follow the apiserver: down
// while its port refuses connections, so that clients see what they would
// see without a proxy.
//
// Per size, -rounds times for each -write-at: both sides start and sync
// (one side after the other), the process waits until neither side's proxy
// has carried a byte for -settle, writes a ConfigMap in a namespace no
// informer watches (-write-elsewhere: the restarted apiserver's watch cache
// then starts past every informer's resource version, as on any cluster
// where something else writes), and the apiserver is killed (-stop kill:
// SIGKILL; graceful: SIGTERM) and started again on its port
// (controlplane.KillAPIServer or StopAPIServer, then StartAPIServer, which
// returns once /readyz passes: "back"). Then one write per informer, all at
// once (a merge patch of an annotation on obj-000000 of that namespace and
// kind, through a direct client that is neither side's), made once the
// apiserver is back (-write-at ready) or as soon as its port accepts
// connections, retried until it takes them (-write-at port: the waits are
// then pending while the informers recover). Each side's informers then
// show it:
//
//   - plain: the first notification of client-go's informer (sent after its
//     indexer, so its lister, holds the object) with the written object at
//     or past the write's resource version;
//   - ours, lister: the same on our informer;
//   - ours, wait: WaitForFreshness(ctx, writtenRV), started as soon as the
//     write returned, and checked: once it returns nil, the indexer must
//     hold the written object at or past the write's resource version.
//
// All three are timed from the moment the write returned. The window ends
// when every wait has returned, every write has been seen, and neither
// proxy has carried a byte for -quiet (bounded by -max-wait): the traffic
// from the kill to then is the restart's cost. The request mix (lists with
// their resourceVersion, resourceVersionMatch and limit; watches; watch-list
// streams) is printed per side, with the requests' timeline, when each
// side's watch-lists delivered their initial events (the proxy spots the
// k8s.io/initial-events-end bookmark in the stream) and our informers'
// counter deltas (Stats, ProbeStats), so that extra requests can be traced
// to the informer's relists, probes and restore checks. -log FILE writes
// every request of every window as TSV (with when its headers and, for a
// watch-list, its initial events' end came), -write-log FILE every write.
//
// With -ha the control plane is the highly available one of docs/ha.md
// (integration/controlplane.StartHA: 3 kube-apiservers on 3 etcd members
// behind HAProxy), and the restart is a rollout (scenario 3 of issue 39):
// every kube-apiserver in turn is stopped (-stop graceful, the default
// with -ha: SIGTERM, as a rollout does; kill: SIGKILL) and started again,
// waited for before the next. The two sides' proxies reach the load
// balancer on one HTTP/2 connection at a time (oneConnection; the HA
// plane allows 1000 streams on it), so they land on one replica and
// every restart hits both sides alike; the writer has a connection of its
// own. Our side's factories share one cache.ServerReads, as those of one
// process should. The proxies never go down (the load balancer's port
// stays open). The writes are made once the rollout is over (-write-at
// ready) or right after the first replica was stopped (-write-at during:
// the waits are pending while the rollout goes on).
//
// Client-side throttling is client-go's token bucket at -qps/-burst per side
// (one clientset per side, as in one process); the time requests spent in
// it is printed. Timings are reported, never asserted.
//
// `make restart-cost` runs it; RESTARTCOST_ARGS passes flags (-help lists
// them), for example:
//
//	make restart-cost                                    # 50 and 500 objects, 2 restarts each per -write-at
//	make restart-cost RESTARTCOST_ARGS='-sizes 50 -rounds 1 -write-at ready'
//	make restart-cost RESTARTCOST_ARGS='-stop graceful -log /tmp/restartcost.tsv -write-log /tmp/writes.tsv'
//
// Run time on 2 cores at the defaults: about 4 minutes (1 to 2 minutes to
// create the 50 000 objects of the 500 size, 15 to 30 s per restart).
//
// The tables go to stdout, with the command line, Go and server versions,
// the library's commit and the machine's load average; progress goes to
// stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	clientgoinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/integration/controlplane"
	"github.com/freshinformer/freshinformer/integration/internal/runinfo"
)

var (
	sizesFlag     = flag.String("sizes", "50,500", "objects per kind per namespace (each informer holds this many), one measurement per size, ascending (the namespaces are grown)")
	namespaces    = flag.Int("namespaces", 20, "namespaces (one factory per namespace and side)")
	kindsFlag     = flag.String("kinds", "configmaps,secrets,serviceaccounts,services,endpoints", "namespaced core kinds, one informer each per namespace and side")
	rounds        = flag.Int("rounds", 2, "restarts per size and -write-at (fresh informers and proxies for each)")
	writeAtFlag   = flag.String("write-at", "ready,port", "when the writes after the restart are made, one restart each: ready (once /readyz passes, as controlplane.StartAPIServer returns) and/or port (as soon as the apiserver's port accepts connections, retried until the apiserver takes them: the waits are then pending while the informers recover)")
	stopMode      = flag.String("stop", "kill", "how the apiserver goes away: kill (SIGKILL, controlplane.KillAPIServer) or graceful (SIGTERM, controlplane.StopAPIServer)")
	settle        = flag.Duration("settle", 2*time.Second, "before the restart: both sides synced and no byte through either proxy for this long")
	quiet         = flag.Duration("quiet", 5*time.Second, "after the restart: the window ends once every wait returned, every write was seen and no byte went through either proxy for this long")
	maxWait       = flag.Duration("max-wait", 3*time.Minute, "bound on the window after the apiserver is back")
	waitTimeout   = flag.Duration("wait-timeout", 2*time.Minute, "bound on each WaitForFreshness")
	qps           = flag.Float64("qps", 50, "each side's client-side QPS (client-go's token bucket; negative: none)")
	burst         = flag.Int("burst", 100, "each side's client-side burst")
	payloadBytes  = flag.Int("object-bytes", 64, "payload per ConfigMap and Secret")
	createWorkers = flag.Int("create-parallel", 16, "concurrent creates when populating")
	elsewhere     = flag.Bool("write-elsewhere", true, "right before the restart, write a ConfigMap in a namespace no informer watches, so that etcd's revision (where the restarted apiserver's watch cache starts) is past every informer's last resource version, as on any cluster where something else writes (leases do every 10 s); false leaves it to chance")
	logFile       = flag.String("log", "", "write every request of every window to this file (TSV)")
	writeLog      = flag.String("write-log", "", "write every write after a restart, with when each side showed it, to this file (TSV)")
	haFlag        = flag.Bool("ha", false, "run on the highly available control plane (3 kube-apiservers on 3 etcd members behind HAProxy, docs/ha.md) and roll every kube-apiserver in turn instead of restarting the one; -write-at then takes ready and/or during (default both)")
	clientLogs    = flag.Bool("client-logs", false, "show client-go's and the library's informational logs (every informer logs its broken watch); errors show either way")
)

const target = "obj-000000" // the object each write changes

// never marks a write a side's handlers never saw.
const never = time.Duration(-1 << 63)

func main() {
	klog.InitFlags(nil)
	flag.Parse()
	if !*clientLogs {
		_ = flag.Set("logtostderr", "false")
		_ = flag.Set("alsologtostderr", "false")
		_ = flag.Set("stderrthreshold", "FATAL")
		klog.SetOutput(io.Discard)
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "restartcost:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[restartcost %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// kind is one resource every namespace holds.
type kind struct {
	resource string
	create   func(ctx context.Context, cs kubernetes.Interface, ns, name string) error
}

func (k kind) gvr() schema.GroupVersionResource {
	return schema.GroupVersionResource{Version: "v1", Resource: k.resource}
}

var allKinds = map[string]kind{
	"configmaps": {"configmaps", func(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name},
			Data: map[string]string{"v": payload()}}, metav1.CreateOptions{})
		return err
	}},
	"secrets": {"secrets", func(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
		_, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
			Data: map[string][]byte{"v": []byte(payload())}}, metav1.CreateOptions{})
		return err
	}},
	"serviceaccounts": {"serviceaccounts", func(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
		_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		return err
	}},
	// Headless, so that no cluster IP is allocated (the service range is
	// a /24 here).
	"services": {"services", func(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
		_, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": name},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}, metav1.CreateOptions{})
		return err
	}},
	"endpoints": {"endpoints", func(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
		_, err := cs.CoreV1().Endpoints(ns).Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name}, //nolint:staticcheck // v1 Endpoints: deprecated, still served and cheap
			Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.1.2.3"}}, //nolint:staticcheck
				Ports: []corev1.EndpointPort{{Name: "http", Port: 80}}}}}, metav1.CreateOptions{}) //nolint:staticcheck
		return err
	}},
	"podtemplates": {"podtemplates", func(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
		_, err := cs.CoreV1().PodTemplates(ns).Create(ctx, &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: name},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}, metav1.CreateOptions{})
		return err
	}},
}

func payload() string { return strings.Repeat("x", max(0, *payloadBytes)) }

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sizes, err := intList("-sizes", *sizesFlag)
	if err != nil {
		return err
	}
	slices.Sort(sizes)
	var kinds []kind
	for _, f := range splitList(*kindsFlag) {
		k, ok := allKinds[f]
		if !ok {
			return fmt.Errorf("-kinds: unknown %q", f)
		}
		kinds = append(kinds, k)
	}
	if *namespaces < 1 || len(kinds) == 0 || *rounds < 1 || len(sizes) == 0 || sizes[0] < 1 {
		return errors.New("-namespaces, -kinds, -rounds and -sizes must be at least 1")
	}
	writeAts := splitList(*writeAtFlag)
	if *haFlag && !flagGiven("write-at") {
		writeAts = []string{"ready", "during"}
	}
	for _, at := range writeAts {
		switch {
		case at == "ready":
		case at == "port" && !*haFlag:
		case at == "during" && *haFlag:
		case *haFlag:
			return fmt.Errorf("-write-at: %q is neither ready nor during (with -ha)", at)
		default:
			return fmt.Errorf("-write-at: %q is neither ready nor port", at)
		}
	}
	if len(writeAts) == 0 {
		return errors.New("-write-at: none given")
	}
	if *haFlag && !flagGiven("stop") {
		*stopMode = "graceful" // a rollout terminates each replica
	}
	if *stopMode != "kill" && *stopMode != "graceful" {
		return fmt.Errorf("-stop: %q is neither kill nor graceful", *stopMode)
	}
	var tsv *os.File
	if *logFile != "" {
		if tsv, err = os.Create(*logFile); err != nil {
			return err
		}
		defer tsv.Close()
		fmt.Fprintln(tsv, "size\twrite_at\tround\tside\tstart_ms_after_kill\tstart_ms_after_back\tduration_ms\theaders_ms_after_kill\tinitial_events_end_ms_after_kill\tmethod\tpath\tquery\tshape\toutcome\tresponse_body_bytes\tcontent_encoding\terror")
	}
	var wtsv *os.File
	if *writeLog != "" {
		if wtsv, err = os.Create(*writeLog); err != nil {
			return err
		}
		defer wtsv.Close()
		fmt.Fprintln(wtsv, "size\twrite_at\tround\tnamespace\tresource\trv\tattempts\twritten_ms_after_kill\twritten_ms_after_back\tplain_lister_ms\tours_lister_ms\tours_wait_ms\twait_error\twith_write\twrite_error")
	}

	b := &bench{kinds: kinds, log: &requestLog{}, tsv: tsv, wtsv: wtsv}
	var admin *rest.Config
	if *haFlag {
		logf("starting an HA control plane")
		h, err := controlplane.StartHA(ctx, controlplane.HAOptions{})
		if err != nil {
			return err
		}
		defer h.Stop()
		logf("%s", h.Describe())
		b.ha = h
		// The writer on a connection of its own. The two sides' proxies
		// share one connection (oneConnection), so one replica, as the
		// factories of one process share client-go's cached transport;
		// every restart of a rollout then hits both sides alike (or
		// neither).
		b.upstream = h.Config()
		if b.upstreamRT, err = oneConnection(b.upstream); err != nil {
			return err
		}
		admin = controlplane.DistinctConnection(h.Config())
	} else {
		logf("starting a control plane")
		cp, err := controlplane.Start(ctx, controlplane.Options{})
		if err != nil {
			return err
		}
		defer cp.Stop()
		logf("%s", cp.Describe())
		b.cp = cp
		admin = cp.Config()
	}
	admin.QPS, admin.Burst = 1000, 2000
	admin.WarningHandler = rest.NoWarnings{}
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(admin)
	if err != nil {
		return err
	}
	serverVersion := "unknown"
	if v, err := cs.Discovery().ServerVersion(); err == nil {
		serverVersion = v.GitVersion
	}
	apiURL, err := url.Parse(admin.Host)
	if err != nil {
		return err
	}

	b.cs, b.dyn, b.admin, b.apiAddr = cs, dyn, admin, apiURL.Host
	if b.upstream == nil {
		b.upstream = admin
	}
	prefix := "rc-" + strconv.FormatInt(time.Now().Unix()%1e6, 36)
	for i := range *namespaces {
		ns := fmt.Sprintf("%s-%02d", prefix, i)
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		b.namespaces = append(b.namespaces, ns)
	}

	b.elsewhere = prefix + "-elsewhere"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: b.elsewhere}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := cs.CoreV1().ConfigMaps(b.elsewhere).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}}, metav1.CreateOptions{}); err != nil {
		return err
	}

	began, loadStart, rev := time.Now(), runinfo.LoadAvg(), runinfo.Revision()
	var results []*roundResult
	have := 0
	for _, n := range sizes {
		if err := b.populate(ctx, have, n); err != nil {
			return err
		}
		have = n
		for r := range *rounds {
			for _, at := range writeAts {
				res, err := b.round(ctx, n, r+1, at, len(results))
				if err != nil {
					return fmt.Errorf("size %d, restart %d (writes at %s): %w", n, r+1, at, err)
				}
				results = append(results, res)
			}
		}
	}

	fmt.Printf("\n`%s`\n\n", commandLine())
	fmt.Printf("%s, GOMAXPROCS %d, kube-apiserver %s, %s to %s, library at %s\n", runtime.Version(), runtime.GOMAXPROCS(0), serverVersion,
		began.UTC().Format(time.RFC3339), time.Now().UTC().Format(time.RFC3339), rev)
	fmt.Printf("load average (1, 5, 15 min) at start: %s; at end: %s\n", loadStart, runinfo.LoadAvg())
	var names []string
	for _, k := range kinds {
		names = append(names, k.resource)
	}
	fmt.Printf("%d namespaces × %d kinds (%s) = %d informers a side; apiserver %s; client QPS %v, burst %d a side; response content types: %s\n",
		*namespaces, len(kinds), strings.Join(names, ", "), *namespaces*len(kinds), stopWord(), *qps, *burst, strings.Join(b.contentTypes(), ", "))
	if *haFlag {
		fmt.Println("With -ha, \"apiserver gone → port open → /readyz\" is the whole rollout (the load balancer's port never closes: port open reads 0), " +
			"\"after the apiserver was back\" means after the rollout was over, and writes at during were made right after the first replica went away.")
		var hits []string
		for _, r := range results {
			hits = append(hits, fmt.Sprintf("%d/%s/%d: %d", r.size, r.writeAt, r.round, r.sidesHit))
		}
		fmt.Printf("Restarts of the replica the sides' connection was on, per rollout (objects/writes at/round: restarts): %s\n", strings.Join(hits, ", "))
	}
	printReport(results)
	return nil
}

func stopWord() string {
	if *haFlag {
		if *stopMode == "kill" {
			return "rolled behind HAProxy: every kube-apiserver in turn killed (SIGKILL) and started again, waited for before the next"
		}
		return "rolled behind HAProxy: every kube-apiserver in turn stopped (SIGTERM) and started again, waited for before the next"
	}
	if *stopMode == "kill" {
		return "killed (SIGKILL) and started again on its port"
	}
	return "stopped (SIGTERM) and started again on its port"
}

type bench struct {
	cp         *controlplane.ControlPlane   // nil with -ha
	ha         *controlplane.HAControlPlane // -ha
	cs         kubernetes.Interface
	dyn        dynamic.Interface
	admin      *rest.Config      // the writer's and populate's
	upstream   *rest.Config      // the proxies' way to the apiserver (or load balancer)
	upstreamRT http.RoundTripper // with -ha: the one connection both proxies share (oneConnection)
	apiAddr    string
	kinds      []kind
	namespaces []string
	elsewhere  string // a namespace no informer watches
	log        *requestLog
	tsv        *os.File
	wtsv       *os.File

	ctMu   sync.Mutex
	cTypes map[string]bool
}

func (b *bench) contentTypes() []string {
	b.ctMu.Lock()
	defer b.ctMu.Unlock()
	var out []string
	for ct := range b.cTypes {
		out = append(out, ct)
	}
	slices.Sort(out)
	return out
}

// writeElsewhere updates a ConfigMap in a namespace of its own.
func (b *bench) writeElsewhere(ctx context.Context) error {
	_, err := b.cs.CoreV1().ConfigMaps(b.elsewhere).Update(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: b.elsewhere},
		Data:       map[string]string{"at": time.Now().Format(time.RFC3339Nano)},
	}, metav1.UpdateOptions{})
	return err
}

// populate grows every namespace's kinds from obj-<from> to obj-<to-1>.
func (b *bench) populate(ctx context.Context, from, to int) error {
	if to <= from {
		return nil
	}
	total := (to - from) * len(b.kinds) * len(b.namespaces)
	logf("creating %d objects (%d per kind and namespace)", total, to-from)
	start := time.Now()
	type job struct {
		k    kind
		ns   string
		name string
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	var done atomic.Int64
	for range max(1, *createWorkers) {
		wg.Go(func() {
			for j := range jobs {
				if firstErr != nil {
					continue
				}
				var err error
				for attempt := 0; attempt < 5; attempt++ {
					if err = j.k.create(ctx, b.cs, j.ns, j.name); err == nil || apierrors.IsAlreadyExists(err) {
						err = nil
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("creating %s %s/%s: %w", j.k.resource, j.ns, j.name, err) })
				}
				if d := done.Add(1); d%10000 == 0 {
					logf("  %d/%d", d, total)
				}
			}
		})
	}
	for i := from; i < to && ctx.Err() == nil; i++ {
		for _, ns := range b.namespaces {
			for _, k := range b.kinds {
				jobs <- job{k, ns, fmt.Sprintf("obj-%06d", i)}
			}
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		return firstErr
	}
	logf("created in %v", time.Since(start).Round(time.Millisecond))
	return nil
}

// sightings records when an informer's handlers saw the target object, at
// which resource version.
type sightings struct {
	mu    sync.Mutex
	armed bool
	seen  []sighting
}

type sighting struct {
	rv string
	at time.Time
}

func (s *sightings) handler() toolscache.ResourceEventHandler {
	add := func(obj any) {
		m, err := meta.Accessor(obj)
		if err != nil || m.GetName() != target {
			return
		}
		now := time.Now()
		s.mu.Lock()
		if s.armed {
			s.seen = append(s.seen, sighting{m.GetResourceVersion(), now})
		}
		s.mu.Unlock()
	}
	return toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) { add(obj) }, UpdateFunc: func(_, obj any) { add(obj) }}
}

func (s *sightings) arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.seen = true, nil
}

// first is the first sighting at or past rv.
func (s *sightings) first(rv string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.seen {
		if c, err := freshness.Compare(x.rv, rv); err == nil && c >= 0 {
			return x.at, true
		}
	}
	return time.Time{}, false
}

// pair is one namespace and kind: its informer on each side.
type pair struct {
	ns          string
	kind        kind
	plain       toolscache.SharedIndexInformer
	ours        *cache.FreshInformer
	plainSeen   *sightings
	oursSeen    *sightings
	write       writeResult
	writeDone   chan struct{}
	statsBefore cache.Stats
	probeBefore cache.ProbeStats
}

// writeResult is one write after the restart and what each side made of
// it; durations are from the moment the write returned, never when never.
type writeResult struct {
	ns, resource            string
	rv                      string
	writtenAt               time.Time     // when the write returned
	afterBack               time.Duration // the same, after the apiserver was back (/readyz)
	attempts                int
	err                     error
	plainSeen, oursSeen     time.Duration
	oursWait                time.Duration
	waitErr                 error
	cached                  bool // the wait returned nil with the write in the indexer
	waitReturnedBeforeWrite bool // the wait returned nil without it
}

// side is one side's client: its proxy, clientset and throttle.
type side struct {
	name    string
	proxy   *countingProxy
	cs      kubernetes.Interface
	limiter *timedLimiter
}

func (b *bench) newSide(name string) (*side, error) {
	rt := b.upstreamRT
	if rt == nil {
		var err error
		if rt, err = rest.TransportFor(b.upstream); err != nil {
			return nil, err
		}
	}
	p, err := newCountingProxy(name, b.upstream, rt, b.log)
	if err != nil {
		return nil, err
	}
	cfg := &rest.Config{Host: p.URL(), UserAgent: "restartcost-" + name, WarningHandler: rest.NoWarnings{}}
	s := &side{name: name, proxy: p}
	if *qps > 0 {
		s.limiter = &timedLimiter{RateLimiter: flowcontrol.NewTokenBucketRateLimiter(float32(*qps), *burst)}
		cfg.RateLimiter = s.limiter
	} else {
		cfg.QPS = -1
	}
	if s.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		p.close()
		return nil, err
	}
	return s, nil
}

// timedLimiter is client-go's token bucket, timing the waits in it.
type timedLimiter struct {
	flowcontrol.RateLimiter
	waited    atomic.Int64 // nanoseconds, summed
	throttled atomic.Uint64
	longest   atomic.Int64
}

func (l *timedLimiter) Wait(ctx context.Context) error {
	t := time.Now()
	err := l.RateLimiter.Wait(ctx)
	l.note(time.Since(t))
	return err
}

func (l *timedLimiter) Accept() {
	t := time.Now()
	l.RateLimiter.Accept()
	l.note(time.Since(t))
}

func (l *timedLimiter) note(d time.Duration) {
	if d < time.Millisecond {
		return
	}
	l.waited.Add(int64(d))
	l.throttled.Add(1)
	for {
		m := l.longest.Load()
		if int64(d) <= m || l.longest.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

type throttle struct {
	waited, longest time.Duration
	throttled       uint64
}

func (l *timedLimiter) snapshot() throttle {
	if l == nil {
		return throttle{}
	}
	return throttle{waited: time.Duration(l.waited.Load()), longest: time.Duration(l.longest.Load()), throttled: l.throttled.Load()}
}

// roundResult is one restart's measurement.
type roundResult struct {
	size, round      int
	writeAt          string // ready or port
	plain, ours      totals
	plainEnd         time.Duration // the side's last byte, after the apiserver was back
	oursEnd          time.Duration
	outage           time.Duration // kill to back (/readyz)
	portOpen         time.Duration // kill to the apiserver's port accepting again
	plainThrottle    throttle
	oursThrottle     throttle
	stats            statsDelta
	writes           []writeResult
	reqs             []*request
	kill, back       time.Time
	endedQuiet       bool
	startRetries     int // apiserver starts that failed before the one that came up
	sidesHit         int // -ha: restarts of the replica the sides' connection was on
	syncPlain, syncO time.Duration
}

// statsDelta sums our informers' counters over the window.
type statsDelta struct {
	lists, watches, staleRefused, floorRaised, regressions, watchesStopped, restoreProbes, outOfOrder, bookmarks uint64
	probes, probeRequests, snapshots, snapshotMatches, probeRelists, advances                                    uint64
}

func (d *statsDelta) add(a, b cache.Stats, pa, pb cache.ProbeStats) {
	d.lists += a.Lists - b.Lists
	d.watches += a.Watches - b.Watches
	d.staleRefused += a.StaleListsRefused - b.StaleListsRefused
	d.floorRaised += a.FloorRaised - b.FloorRaised
	d.regressions += a.Regressions - b.Regressions
	d.watchesStopped += a.WatchesStopped - b.WatchesStopped
	d.restoreProbes += a.RestoreProbes - b.RestoreProbes
	d.outOfOrder += a.OutOfOrderRejected - b.OutOfOrderRejected
	d.bookmarks += a.Bookmarks - b.Bookmarks
	d.probes += pa.Probes - pb.Probes
	d.probeRequests += pa.Requests - pb.Requests
	d.snapshots += pa.Snapshots - pb.Snapshots
	d.snapshotMatches += pa.SnapshotMatches - pb.SnapshotMatches
	d.probeRelists += pa.Relists - pb.Relists
	d.advances += pa.Advances - pb.Advances
}

// round starts both sides on every namespace, syncs them, restarts the
// apiserver and measures.
func (b *bench) round(ctx context.Context, size, round int, writeAt string, nth int) (*roundResult, error) {
	res := &roundResult{size: size, round: round, writeAt: writeAt}
	plain, err := b.newSide("plain")
	if err != nil {
		return nil, err
	}
	defer plain.proxy.close()
	ours, err := b.newSide("ours")
	if err != nil {
		return nil, err
	}
	defer ours.proxy.close()

	ictx, cancel := context.WithCancel(ctx)
	var shutdowns []func()
	defer func() {
		cancel()
		for _, s := range shutdowns {
			s()
		}
	}()
	var pairs []*pair
	var plainFactories []clientgoinformers.SharedInformerFactory
	var ourFactories []*cache.SharedInformerFactory
	serverReads := new(cache.ServerReads) // one process, one cluster: its factories share the reads that check a resumed watch
	for _, ns := range b.namespaces {
		pf := clientgoinformers.NewSharedInformerFactoryWithOptions(plain.cs, 0, clientgoinformers.WithNamespace(ns))
		of := cache.NewSharedInformerFactory(ours.cs, 0, cache.WithNamespace(ns), cache.WithInformerOptions(cache.WithServerReads(serverReads)))
		plainFactories = append(plainFactories, pf)
		ourFactories = append(ourFactories, of)
		for _, k := range b.kinds {
			pg, err := pf.ForResource(k.gvr())
			if err != nil {
				return nil, err
			}
			og, err := of.ForResource(k.gvr())
			if err != nil {
				return nil, err
			}
			fi, ok := cache.FreshInformerOf(og.Informer())
			if !ok {
				return nil, fmt.Errorf("%s in %s: our factory's informer is not a FreshInformer", k.resource, ns)
			}
			p := &pair{ns: ns, kind: k, plain: pg.Informer(), ours: fi, plainSeen: &sightings{}, oursSeen: &sightings{}, writeDone: make(chan struct{})}
			if _, err := p.plain.AddEventHandler(p.plainSeen.handler()); err != nil {
				return nil, err
			}
			if _, err := p.ours.AddEventHandler(p.oursSeen.handler()); err != nil {
				return nil, err
			}
			pairs = append(pairs, p)
		}
	}
	logf("size %d, restart %d, writes at %s: starting %d informers a side", size, round, writeAt, len(pairs))
	syncSide := func(start func(), synced func() bool) time.Duration {
		t0 := time.Now()
		start()
		for !synced() && ictx.Err() == nil && time.Since(t0) < 5*time.Minute {
			time.Sleep(10 * time.Millisecond)
		}
		return time.Since(t0)
	}
	// One side at a time, so that neither's sync competes with the other's.
	res.syncPlain = syncSide(func() {
		for _, f := range plainFactories {
			f.Start(ictx.Done())
			shutdowns = append(shutdowns, f.Shutdown)
		}
	}, func() bool {
		return !slices.ContainsFunc(pairs, func(p *pair) bool { return !p.plain.HasSynced() })
	})
	res.syncO = syncSide(func() {
		for _, f := range ourFactories {
			f.StartWithContext(ictx)
			shutdowns = append(shutdowns, f.Shutdown)
		}
	}, func() bool {
		return !slices.ContainsFunc(pairs, func(p *pair) bool { return !p.ours.HasSynced() })
	})
	if ictx.Err() != nil {
		return nil, ictx.Err()
	}
	for _, p := range pairs {
		if !p.plain.HasSynced() || !p.ours.HasSynced() {
			return nil, fmt.Errorf("%s in %s: informers did not sync within 5 minutes", p.kind.resource, p.ns)
		}
		if a, o := len(p.plain.GetStore().ListKeys()), len(p.ours.GetStore().ListKeys()); a != size || o != size {
			return nil, fmt.Errorf("%s in %s: synced with %d (plain) and %d (ours) objects, want %d", p.kind.resource, p.ns, a, o, size)
		}
	}
	logf("synced: plain in %v, ours in %v; waiting for %v without traffic", res.syncPlain.Round(time.Millisecond), res.syncO.Round(time.Millisecond), *settle)
	if !waitQuiet(ctx, *settle, time.Minute, plain.proxy, ours.proxy) {
		logf("still traffic after a minute; restarting anyway")
	}

	if *elsewhere {
		if err := b.writeElsewhere(ctx); err != nil {
			return nil, err
		}
	}

	// The window: from the kill.
	for _, p := range pairs {
		p.plainSeen.arm()
		p.oursSeen.arm()
		p.statsBefore, p.probeBefore = p.ours.Stats(), p.ours.ProbeStats()
	}
	b.log.begin()
	p0, o0 := plain.proxy.snapshot(), ours.proxy.snapshot()
	pt0, ot0 := plain.limiter.snapshot(), ours.limiter.snapshot()
	mctx, stopMirror := context.WithCancel(ctx)
	var mirror sync.WaitGroup
	defer func() { stopMirror(); mirror.Wait() }()
	// Which proxy follows the apiserver first alternates between restarts.
	proxies := []*countingProxy{plain.proxy, ours.proxy}
	if nth%2 == 1 {
		slices.Reverse(proxies)
	}
	// One write per informer, all at once, each followed by our wait.
	writes := func() {
		for i, p := range pairs {
			go func() {
				defer close(p.writeDone)
				b.write(ctx, p, fmt.Sprintf("%d-%d-%s-%d", size, round, writeAt, i))
			}()
		}
	}
	if b.ha != nil {
		res.kill = time.Now()
		if err := b.rollout(ctx, res, writeAt, writes); err != nil {
			return nil, err
		}
		res.back = time.Now()
		res.outage = res.back.Sub(res.kill)
		if writeAt == "ready" {
			logf("rollout over after %v; one write per informer", res.outage.Round(time.Millisecond))
			writes()
		} else {
			logf("rollout over after %v", res.outage.Round(time.Millisecond))
		}
	} else {
		res.kill = time.Now()
		if *stopMode == "kill" {
			for _, p := range proxies {
				p.down()
			}
			if err := b.cp.KillAPIServer(); err != nil {
				return nil, err
			}
			mirror.Go(func() { mirrorAPIServer(mctx, b.apiAddr, true, proxies...) })
		} else {
			mirror.Go(func() { mirrorAPIServer(mctx, b.apiAddr, false, proxies...) })
			if err := b.cp.StopAPIServer(); err != nil {
				return nil, err
			}
		}
		logf("apiserver %s; starting it again", map[string]string{"kill": "killed", "graceful": "stopped"}[*stopMode])
		started := make(chan error, 1)
		go func() {
			// On a loaded machine the apiserver can miss envtest's 30 s start
			// bound; try again (twice at most) and say so in the tables.
			var err error
			for attempt := 1; attempt <= 3; attempt++ {
				if err = b.cp.StartAPIServer(ctx); err == nil || ctx.Err() != nil {
					break
				}
				res.startRetries++
				logf("apiserver start failed (attempt %d of 3): %v", attempt, firstLine(err.Error()))
			}
			started <- err
		}()

		if writeAt == "port" {
			waitPort(ctx, b.apiAddr)
			logf("port open after %v; one write per informer", time.Since(res.kill).Round(time.Millisecond))
			writes()
		}
		if err := <-started; err != nil {
			return nil, err
		}
		res.back = time.Now()
		res.outage = res.back.Sub(res.kill)
		if writeAt == "ready" {
			logf("back after %v; one write per informer", res.outage.Round(time.Millisecond))
			writes()
		} else {
			logf("back after %v", res.outage.Round(time.Millisecond))
		}
	}

	// Until every wait returned, every write was seen, and both sides went quiet.
	deadline := res.back.Add(*maxWait)
	allSeen := func() bool {
		for _, p := range pairs {
			select {
			case <-p.writeDone:
			default:
				return false
			}
			if p.write.err != nil {
				continue
			}
			if _, ok := p.plainSeen.first(p.write.rv); !ok {
				return false
			}
			if _, ok := p.oursSeen.first(p.write.rv); !ok {
				return false
			}
		}
		return true
	}
	for {
		if allSeen() && plain.proxy.quietFor() >= *quiet && ours.proxy.quietFor() >= *quiet {
			res.endedQuiet = true
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			logf("window bound (%v after back) reached: all seen %v, plain quiet for %v, ours for %v", *maxWait, allSeen(),
				plain.proxy.quietFor().Round(time.Millisecond), ours.proxy.quietFor().Round(time.Millisecond))
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if up := plain.proxy.upSince(); up.After(res.kill) {
		res.portOpen = up.Sub(res.kill)
	}
	res.plain, res.ours = plain.proxy.snapshot().sub(p0), ours.proxy.snapshot().sub(o0)
	res.plainEnd = time.Unix(0, plain.proxy.lastActive.Load()).Sub(res.back)
	res.oursEnd = time.Unix(0, ours.proxy.lastActive.Load()).Sub(res.back)
	res.plainThrottle, res.oursThrottle = plain.limiter.snapshot().sub(pt0), ours.limiter.snapshot().sub(ot0)
	res.reqs = b.log.end()
	for _, p := range pairs {
		<-p.writeDone // the patches and the wait are bounded
		w := p.write
		w.plainSeen, w.oursSeen = never, never
		written := w.writtenAt
		w.afterBack = written.Sub(res.back)
		if w.err == nil {
			if t, ok := p.plainSeen.first(w.rv); ok {
				w.plainSeen = t.Sub(written)
			}
			if t, ok := p.oursSeen.first(w.rv); ok {
				w.oursSeen = t.Sub(written)
			}
		}
		res.writes = append(res.writes, w)
		res.stats.add(p.ours.Stats(), p.statsBefore, p.ours.ProbeStats(), p.probeBefore)
	}
	b.noteContentTypes(res.reqs)
	b.writeTSV(res)
	logf("size %d, restart %d: plain %d requests, %s; ours %d requests, %s; traffic ended %v (plain) and %v (ours) after back",
		size, round, res.plain.requests, mb(res.plain.bytes()), res.ours.requests, mb(res.ours.bytes()),
		res.plainEnd.Round(time.Millisecond), res.oursEnd.Round(time.Millisecond))
	return res, nil
}

// write makes p's write (retrying until the apiserver takes it, at most
// -wait-timeout), then waits for it on our informer and checks what the
// wait returned with.
func (b *bench) write(ctx context.Context, p *pair, value string) {
	w := &p.write
	w.ns, w.resource = p.ns, p.kind.resource
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"restartcost/write":%q}}}`, value)
	giveUp := time.Now().Add(*waitTimeout)
	for w.attempts = 1; ; w.attempts++ {
		obj, err := b.dyn.Resource(p.kind.gvr()).Namespace(p.ns).Patch(ctx, target, types.MergePatchType, patch, metav1.PatchOptions{})
		if err == nil {
			w.rv = obj.GetResourceVersion()
			break
		}
		if time.Now().After(giveUp) || ctx.Err() != nil {
			w.err = err
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	w.writtenAt = time.Now()
	wctx, cancel := context.WithTimeout(ctx, *waitTimeout)
	defer cancel()
	w.waitErr = p.ours.WaitForFreshness(wctx, w.rv)
	w.oursWait = time.Since(w.writtenAt)
	if w.waitErr == nil {
		if obj, ok, _ := p.ours.GetIndexer().GetByKey(p.ns + "/" + target); ok {
			if m, err := meta.Accessor(obj); err == nil {
				c, err := freshness.Compare(m.GetResourceVersion(), w.rv)
				w.cached = err == nil && c >= 0
			}
		}
		w.waitReturnedBeforeWrite = !w.cached
	}
}

// rollout restarts every kube-apiserver of the HA plane in turn (-stop:
// SIGTERM or SIGKILL), each started again and waited for (/readyz) before
// the next; with -write-at during, the writes start right after the first
// one went away.
func (b *bench) rollout(ctx context.Context, res *roundResult, writeAt string, writes func()) error {
	sides, err := kubernetes.NewForConfig(b.upstream) // the proxies' connection
	if err != nil {
		return err
	}
	for i := range b.ha.APIServers() {
		if at, err := b.ha.WhichAPIServer(ctx, sides.CoreV1().RESTClient()); err == nil {
			logf("both sides' connection on kube-apiserver %d", at)
			if at == i {
				res.sidesHit++
			}
		}
		var err error
		if *stopMode == "kill" {
			err = b.ha.KillAPIServer(i)
		} else {
			err = b.ha.StopAPIServer(i)
		}
		if err != nil {
			return err
		}
		logf("kube-apiserver %d %s after %v; starting it again", i, map[string]string{"kill": "killed", "graceful": "stopped"}[*stopMode],
			time.Since(res.kill).Round(time.Millisecond))
		if i == 0 && writeAt == "during" {
			writes()
		}
		// On a loaded machine a start can take long; try again (twice at
		// most) and say so in the tables.
		for attempt := 1; attempt <= 3; attempt++ {
			if err = b.ha.StartAPIServer(ctx, i); err == nil || ctx.Err() != nil {
				break
			}
			res.startRetries++
			logf("kube-apiserver %d: start failed (attempt %d of 3): %v", i, attempt, firstLine(err.Error()))
			_ = b.ha.StopAPIServer(i)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// flagGiven reports whether the named flag was set on the command line.
func flagGiven(name string) bool {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// waitPort returns once addr accepts a TCP connection (polled every 5 ms).
func waitPort(ctx context.Context, addr string) {
	for ctx.Err() == nil {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (t throttle) sub(o throttle) throttle {
	return throttle{waited: t.waited - o.waited, throttled: t.throttled - o.throttled, longest: t.longest} // longest: since the side began
}

// waitQuiet waits until no proxy has carried a byte for d, at most bound.
func waitQuiet(ctx context.Context, d, bound time.Duration, ps ...*countingProxy) bool {
	end := time.Now().Add(bound)
	for time.Now().Before(end) && ctx.Err() == nil {
		if !slices.ContainsFunc(ps, func(p *countingProxy) bool { return p.quietFor() < d }) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

func (b *bench) noteContentTypes(reqs []*request) {
	b.ctMu.Lock()
	defer b.ctMu.Unlock()
	if b.cTypes == nil {
		b.cTypes = map[string]bool{}
	}
	for _, r := range reqs {
		ct, enc, _, _ := r.info()
		if ct != "" {
			b.cTypes[ct] = true
		}
		if enc != "" {
			b.cTypes["Content-Encoding "+enc] = true
		}
	}
}

func (b *bench) writeTSV(res *roundResult) {
	if b.wtsv != nil {
		cell := func(d time.Duration) string {
			if d == never {
				return "never"
			}
			return fmt.Sprintf("%.1f", ms(d))
		}
		errString := func(err error) string {
			if err == nil {
				return ""
			}
			return strings.ReplaceAll(err.Error(), "\t", " ")
		}
		for _, w := range res.writes {
			fmt.Fprintf(b.wtsv, "%d\t%s\t%d\t%s\t%s\t%s\t%d\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%v\t%s\n", res.size, res.writeAt, res.round, w.ns, w.resource, w.rv, w.attempts,
				ms(w.writtenAt.Sub(res.kill)), ms(w.afterBack), cell(w.plainSeen), cell(w.oursSeen), cell(w.oursWait), errString(w.waitErr), w.cached, errString(w.err))
		}
	}
	if b.tsv == nil {
		return
	}
	for _, r := range res.reqs {
		_, enc, failed, _ := r.info()
		end := time.Unix(0, r.ended.Load())
		dur := "open"
		if r.ended.Load() != 0 {
			dur = fmt.Sprintf("%.1f", ms(end.Sub(r.started)))
		}
		at := func(unixNanos int64) string {
			if unixNanos == 0 {
				return ""
			}
			return fmt.Sprintf("%.1f", ms(time.Unix(0, unixNanos).Sub(res.kill)))
		}
		fmt.Fprintf(b.tsv, "%d\t%s\t%d\t%s\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", res.size, res.writeAt, res.round, r.side,
			ms(r.started.Sub(res.kill)), ms(r.started.Sub(res.back)), dur, at(r.headers.Load()), at(r.initialEnd.Load()), r.method, r.path, r.query.Encode(), r.shape(), r.outcome(),
			r.body.Load(), enc, strings.ReplaceAll(failed, "\t", " "))
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func intList(name, s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s: %q is not a size", name, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// commandLine is how this run was started, flags as given.
func commandLine() string {
	args := []string{"restartcost"}
	for _, a := range os.Args[1:] {
		if strings.ContainsAny(a, " \t'\"$") {
			a = strconv.Quote(a)
		}
		args = append(args, a)
	}
	return strings.Join(args, " ")
}
