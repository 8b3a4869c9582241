// Command crcounter is the same counting controller run three (four) ways
// on controller-runtime, side by side against one API server, to measure
// read-your-writes: plain controller-runtime, controller-runtime with
// CacheOptions.EnableReadYourWritesConsistency, freshctrl (blocking
// reads), and freshctrl with FailIfNotFresh and a Requeuer.
//
// Each parent ConfigMap asks for a count (data.target); the controller
// keeps a child ConfigMap counting up to it, one Update per reconcile,
// the child's events re-queueing the parent. A reconcile that reads a
// child older than its own last write of it is a stale read; writing on
// top of it is a 409 Conflict. The manager caches two namespaces (a
// multi-namespace cache) and the parents are spread over both.
//
//	make bins && (cd integration && go build -o bin/withcluster ./cmd/withcluster)
//	KUBEBUILDER_ASSETS=$(integration/hack/build-bins.sh --dir) integration/bin/withcluster -- \
//	  sh -c 'cd examples/crcounter && go run . -parents 20 -target 50'
//
// The freshctrl modes run with the stale-read detector on (package
// stalereads): its reports are counted next to the controller's own count.
// The naive mode is freshctrl with every read opted out of waiting
// (client.DisableReadYourWritesConsistency): what a controller reads
// without read-your-writes, and what the detector reports of it.
//
// It runs against $KUBECONFIG and prints one table row per mode (-json:
// one JSON object per mode).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/freshinformer/freshinformer/freshctrl"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/stalereads"
)

type mode string

const (
	plain        mode = "controller-runtime"
	crRYW        mode = "controller-runtime + EnableReadYourWritesConsistency"
	fresh        mode = "freshctrl"
	freshRequeue mode = "freshctrl + FailIfNotFresh/Requeuer"
	naive        mode = "freshctrl, reads not waiting (DisableReadYourWritesConsistency)"
)

func main() {
	parents := flag.Int("parents", 20, "parent objects (spread over the two cached namespaces)")
	target := flag.Int("target", 50, "count each child up to this")
	workers := flag.Int("workers", 4, "reconcile workers")
	rounds := flag.Int("rounds", 1, "run the modes this many times, interleaved, and report the totals")
	modes := flag.String("modes", "all", "comma-free: all, or one of plain, ryw, fresh, requeue, naive")
	asJSON := flag.Bool("json", false, "print one JSON object per mode instead of the table")
	flag.Parse()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg.QPS, cfg.Burst = -1, 0 // no client-side throttling: measure the caches
	ctrl.SetLogger(logr.Discard())
	all := []mode{plain, crRYW, fresh, freshRequeue, naive}
	short := map[string]mode{"plain": plain, "ryw": crRYW, "fresh": fresh, "requeue": freshRequeue, "naive": naive}
	if m, ok := short[*modes]; ok {
		all = []mode{m}
	}
	if !*asJSON {
		fmt.Printf("| mode | reconciles | conflicts /1000 | stale reads /1000 | stale reads (detector) | reconcile p50 | reconcile p99 | CPU s | wall s | Get after a write outside the selector |\n|---|---|---|---|---|---|---|---|---|---|\n")
	}
	totals := map[mode]*result{}
	for round := range *rounds {
		for i, m := range all {
			r, err := run(context.Background(), cfg, m, round*len(all)+i, *parents, *target, *workers)
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", m, err)
				os.Exit(1)
			}
			if t := totals[m]; t != nil {
				t.add(r)
			} else {
				totals[m] = &r
			}
		}
	}
	for _, m := range all {
		if *asJSON {
			t := totals[m]
			_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"mode": string(m), "reconciles": t.reconciles, "conflicts": t.conflicts, "stale": t.stale, "reported": t.reported})
			continue
		}
		fmt.Println(totals[m])
	}
}

// add merges another round of the same mode into r.
func (r *result) add(o result) {
	r.reconciles += o.reconciles
	r.conflicts += o.conflicts
	r.stale += o.stale
	r.reported += o.reported
	r.cpu += o.cpu
	r.wall += o.wall
	r.latencies = append(r.latencies, o.latencies...)
	if o.outside != r.outside {
		r.outside += "; " + o.outside
	}
}

type result struct {
	mode                         mode
	reconciles, conflicts, stale int64
	reported                     int64 // stale reads the detector reported; -1: not on
	cpu, wall                    time.Duration
	outside                      string
	latencies                    []time.Duration
}

func (r result) percentile(p float64) time.Duration {
	lat := slices.Clone(r.latencies)
	slices.Sort(lat)
	if len(lat) == 0 {
		return 0
	}
	return lat[min(len(lat)-1, int(p*float64(len(lat))))]
}

func errKind(err error) string {
	switch {
	case err == nil:
		return "found"
	case apierrors.IsNotFound(err):
		return "NotFound"
	case errors.Is(err, context.DeadlineExceeded):
		return "context deadline exceeded"
	}
	return err.Error()
}

func (r result) String() string {
	per := func(n int64) string {
		return strconv.FormatFloat(1000*float64(n)/float64(max(r.reconciles, 1)), 'f', 1, 64)
	}
	reported := "-"
	if r.reported >= 0 {
		reported = fmt.Sprintf("%d of %d", r.reported, r.stale)
	}
	return fmt.Sprintf("| %s | %d | %s | %s | %s | %v | %v | %.2f | %.1f | %s |", r.mode, r.reconciles, per(r.conflicts), per(r.stale), reported,
		r.percentile(0.50).Round(time.Microsecond), r.percentile(0.99).Round(time.Microsecond), r.cpu.Seconds(), r.wall.Seconds(), r.outside)
}

type counter struct {
	client   client.Client
	requeuer *freshctrl.Requeuer
	target   int
	noWait   bool // read with client.DisableReadYourWritesConsistency

	mu        sync.Mutex
	written   map[types.NamespacedName]string // last RV this controller wrote per child
	latencies []time.Duration

	reconciles, conflicts, stale atomic.Int64
	done                         atomic.Int64
	doneKeys                     sync.Map
}

func (c *counter) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	start := time.Now()
	defer func() {
		c.mu.Lock()
		c.latencies = append(c.latencies, time.Since(start))
		c.mu.Unlock()
	}()
	c.reconciles.Add(1)
	key := types.NamespacedName{Namespace: req.Namespace, Name: "child-" + req.Name}
	var opts []client.GetOption
	if c.requeuer != nil {
		opts = append(opts, freshctrl.FailIfNotFresh)
	}
	if c.noWait {
		opts = append(opts, client.DisableReadYourWritesConsistency)
	}
	var child corev1.ConfigMap
	if err := c.client.Get(ctx, key, &child, opts...); err != nil {
		if c.requeuer != nil {
			if res, ok := c.requeuer.WhenFresh(req, err); ok {
				return res, nil
			}
		}
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	c.mu.Lock()
	last := c.written[key]
	c.mu.Unlock()
	if last != "" {
		if cmp, err := freshness.Compare(child.ResourceVersion, last); err == nil && cmp < 0 {
			c.stale.Add(1)
		}
	}
	n, _ := strconv.Atoi(child.Data["count"])
	if n >= c.target {
		if _, loaded := c.doneKeys.LoadOrStore(key, true); !loaded {
			c.done.Add(1)
		}
		return reconcile.Result{}, nil
	}
	child.Data = map[string]string{"count": strconv.Itoa(n + 1)}
	if err := c.client.Update(ctx, &child); err != nil {
		if apierrors.IsConflict(err) {
			c.conflicts.Add(1)
		}
		return reconcile.Result{}, err
	}
	c.mu.Lock()
	c.written[key] = child.ResourceVersion
	c.mu.Unlock()
	// Come back at once for the next increment, as a controller with more
	// to do does: the next read races the write's watch event.
	return reconcile.Result{RequeueAfter: time.Nanosecond}, nil
}

func run(ctx context.Context, cfg *rest.Config, m mode, idx, parents, target, workers int) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	setup, err := client.New(cfg, client.Options{})
	if err != nil {
		return result{}, err
	}
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	nss := []string{"crcounter-a-" + suffix, "crcounter-b-" + suffix}
	for _, ns := range nss {
		if err := setup.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return result{}, err
		}
		defer setup.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	opts := ctrl.Options{
		Cache: crcache.Options{
			DefaultNamespaces: map[string]crcache.Config{nss[0]: {}, nss[1]: {}},
			ByObject:          map[client.Object]crcache.ByObject{&corev1.ConfigMap{}: {Label: roles}},
		},
		Metrics: metricsserver.Options{BindAddress: "0"},
	}
	reported := atomic.Int64{}
	reported.Store(-1)
	switch m {
	case crRYW:
		opts.Client.Cache = &client.CacheOptions{EnableReadYourWritesConsistency: ptr.To(true)}
	case fresh, freshRequeue, naive:
		reported.Store(0)
		fo := freshctrl.Options{OnStaleRead: func(stalereads.Report) { reported.Add(1) }} // the stale-read detector on
		opts.NewCache, opts.NewClient = fo.NewCache, fo.NewClient
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return result{}, err
	}
	c := &counter{client: mgr.GetClient(), target: target, written: map[types.NamespacedName]string{}, noWait: m == naive}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(fmt.Sprintf("counter%d", idx)).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers, SkipNameValidation: ptr.To(true)}).
		For(&corev1.ConfigMap{}, builder.WithPredicates(isParent)).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(childToParent))
	if m == freshRequeue {
		c.requeuer = freshctrl.NewRequeuer()
		b = b.WatchesRawSource(c.requeuer)
	}
	if err := b.Complete(c); err != nil {
		return result{}, err
	}
	mctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mgrErr error
	wg.Go(func() { mgrErr = mgr.Start(mctx) })
	defer func() { stop(); wg.Wait() }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return result{}, errors.New("cache did not sync")
	}

	var before syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	start := time.Now()
	for i := range parents {
		ns := nss[i%2]
		name := "p" + strconv.Itoa(i)
		if err := setup.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "child-" + name, Labels: map[string]string{"role": "child"}}, Data: map[string]string{"count": "0"}}); err != nil {
			return result{}, err
		}
		if err := setup.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"role": "parent"}}, Data: map[string]string{"target": strconv.Itoa(target)}}); err != nil {
			return result{}, err
		}
	}
	for c.done.Load() < int64(parents) {
		if ctx.Err() != nil {
			return result{}, fmt.Errorf("not done: %d of %d children (%v)", c.done.Load(), parents, mgrErr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	wall := time.Since(start)
	var after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) * time.Nanosecond
	c.mu.Lock()
	lat := slices.Clone(c.latencies)
	c.mu.Unlock()

	// A write the cache's selector excludes, then a read of it through the
	// manager's client, bounded by a 5s context.
	outside := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nss[0], Name: "unlabelled"}}
	if err := mgr.GetClient().Create(ctx, outside); err != nil {
		return result{}, err
	}
	octx, ocancel := context.WithTimeout(ctx, 5*time.Second)
	ostart := time.Now()
	oerr := mgr.GetClient().Get(octx, client.ObjectKeyFromObject(outside), &corev1.ConfigMap{})
	ocancel()
	outsideResult := fmt.Sprintf("%v: %s", time.Since(ostart).Round(time.Millisecond), errKind(oerr))
	return result{mode: m, reconciles: c.reconciles.Load(), conflicts: c.conflicts.Load(), stale: c.stale.Load(), reported: reported.Load(),
		latencies: lat, cpu: cpu, wall: wall, outside: outsideResult}, nil
}

// roles is the cache's ConfigMap selector: parents and children only.
var roles = labels.SelectorFromSet(labels.Set{}).Add(mustRequirement("role", selection.In, "parent", "child"))

func mustRequirement(key string, op selection.Operator, vals ...string) labels.Requirement {
	r, err := labels.NewRequirement(key, op, vals)
	if err != nil {
		panic(err)
	}
	return *r
}

// isParent admits parent ConfigMaps.
var isParent = predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()["role"] == "parent" })

func childToParent(_ context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetName()
	if len(name) <= len("child-") || name[:len("child-")] != "child-" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name[len("child-"):]}}}
}
