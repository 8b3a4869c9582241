// Command kcmbench runs kube-controller-manager v1.37.2's own ReplicaSet
// controller (replicaset.NewBaseController, as NewReplicaSetController
// builds it) and Job controller (a copy of pkg/controller/job patched to
// take a store: see package jobcontroller) against a real kube-apiserver and etcd, in three
// configurations on the same workload, one after the other in one run, each
// configuration's controller in a process of its own (so that its CPU time
// is its own):
//
//	P  client-go's informer factory, upstream's NoopConsistencyStore (feature gate off)
//	K  client-go's informer factory, upstream's RealConsistencyStore (the default since 1.36)
//	F  freshinformer's factory and consistency.Store (WithOwnerResource: created owners read once)
//	Fw F without WithOwnerResource: the owners' own writes only, as upstream's store
//	Fk freshinformer's factory under upstream's RealConsistencyStore (the factory alone)
//
// Workload: -rs ReplicaSets scaled up and down in -steps quick steps, each
// step waiting for every ReplicaSet to converge; every fourth step also
// deletes one pod of each behind the controller's back. Watch responses to
// the controller's informers are delayed by each -lag. Jobs: -jobs Jobs
// whose pods the driver marks Succeeded in waves (job.go). It prints a
// Markdown table per controller and lag. Run it with `make kcm-bench` (a throwaway control plane).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/metrics/legacyregistry"
	_ "k8s.io/component-base/metrics/prometheus/workqueue" // workqueue metrics, as kube-controller-manager registers them
	"k8s.io/klog/v2"
	rsmetrics "k8s.io/kubernetes/pkg/controller/replicaset/metrics"

	"github.com/freshinformer/freshinformer/consistency"
)

var (
	podsGR = schema.GroupResource{Resource: "pods"}
	rsGR   = schema.GroupResource{Group: "apps", Resource: "replicasets"}
	jobsGR = schema.GroupResource{Group: "batch", Resource: "jobs"}
)

type config struct {
	rs, steps, workers int
	qps                float32
	burst              int
	maxWait            time.Duration
	convergeTimeout    time.Duration
	probeDelay         time.Duration
	controller         string // rs or job
	jobs               int    // Jobs, of jobParallelism and jobCompletions
	jobParallelism     int
	jobCompletions     int
	round              int // the run's round of -rounds (0: one round), in its namespace's name
}

func main() {
	var c config
	lags := flag.String("lag", "0,200ms", "comma-separated watch lags, each run for every configuration")
	configs := flag.String("configs", "P,K,F", "configurations to run, in order (F@300ms: F with that max wait)")
	flag.IntVar(&c.rs, "rs", 20, "ReplicaSets")
	flag.IntVar(&c.steps, "steps", 15, "scale steps")
	flag.IntVar(&c.workers, "workers", 5, "controller workers")
	qps := flag.Float64("qps", 500, "controller client QPS (kube-controller-manager's default: 20)")
	flag.IntVar(&c.burst, "burst", 1000, "controller client burst (kube-controller-manager's default: 30)")
	flag.DurationVar(&c.maxWait, "max-wait", consistency.DefaultMaxWait, "F: consistency.WithMaxWait")
	flag.DurationVar(&c.probeDelay, "f-probe-delay", 0, "F: cache.WithQuietProbeDelay for the controller's informers (0: the library's default; negative: off)")
	flag.DurationVar(&c.convergeTimeout, "converge-timeout", 60*time.Second, "bound on one step's convergence")
	controllers := flag.String("controllers", "rs,job", "controllers to run: rs (ReplicaSet), job (Job)")
	rounds := flag.Int("rounds", 1, "runs of the configurations per controller and lag, in turn in -configs' order and in reverse (K,F then F,K), so that where a run falls in the sequence (later runs on the same server cost more CPU) weighs alike on every configuration; with more than one, a table of the rounds together follows")
	restores := flag.String("restore", "", "instead of the workloads: the etcd restore scenario (restore.go) for each configuration, in these modes: nobump, bump (comma-separated)")
	restoreTimeout := flag.Duration("restore-timeout", 30*time.Second, "-restore: how long each ReplicaSet may take to converge after the kube-apiserver is back")
	flag.IntVar(&c.jobs, "jobs", 20, "Jobs")
	flag.IntVar(&c.jobParallelism, "job-parallelism", 3, "each Job's parallelism")
	flag.IntVar(&c.jobCompletions, "job-completions", 12, "each Job's completions")
	var ca controllerArgs
	controllerProcess := controllerFlags(&ca)
	flag.Parse()
	c.qps = float32(*qps)
	klog.SetLogger(logr.Discard()) // the controller logs every pod write and its "Unhandled Error"s; the tables say what counts

	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		os.Exit(1)
	}
	if *controllerProcess {
		if err := rsmetrics.Register(legacyregistry.Register); err != nil {
			fmt.Fprintln(os.Stderr, "registering replicaset metrics:", err)
		}
		ca.controller = *controllers
		if ca.lag, err = time.ParseDuration(*lags); err == nil {
			err = controllerProcessMain(cfg, c, ca)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "controller process:", err)
			os.Exit(1)
		}
		return
	}
	fmt.Printf("kcmbench: %d ReplicaSets x %d steps; %d Jobs, parallelism %d, completions %d; %d workers, QPS %.0f burst %d, F max wait %v, F probe delay %v\n\n",
		c.rs, c.steps, c.jobs, c.jobParallelism, c.jobCompletions, c.workers, c.qps, c.burst, c.maxWait, c.probeDelay)
	failed := false
	if *restores != "" {
		c.controller = "rs"
		var rows []restoreResult
		for _, mode := range strings.Split(*restores, ",") {
			for _, name := range strings.Split(*configs, ",") {
				r, err := runRestore(cfg, c, strings.TrimSpace(name), strings.TrimSpace(mode), *restoreTimeout)
				if err != nil {
					fmt.Fprintf(os.Stderr, "restore %s %s: %v\n", mode, name, err)
					failed = true
				}
				rows = append(rows, r)
			}
		}
		printRestoreTable(rows, *restoreTimeout)
		*controllers = ""
	}
	for _, ctl := range strings.Split(*controllers, ",") {
		if ctl == "" {
			continue
		}
		c.controller = strings.TrimSpace(ctl)
		run := runOne
		if c.controller == "job" {
			run = runJobs
		} else if c.controller != "rs" {
			fmt.Fprintln(os.Stderr, "unknown controller", ctl)
			os.Exit(2)
		}
		for _, l := range strings.Split(*lags, ",") {
			lag, err := time.ParseDuration(strings.TrimSpace(l))
			if err != nil {
				fmt.Fprintln(os.Stderr, "lag:", err)
				os.Exit(2)
			}
			var rows []result
			for round := 1; round <= *rounds; round++ {
				names := strings.Split(*configs, ",")
				if round%2 == 0 {
					slices.Reverse(names)
				}
				if *rounds > 1 {
					c.round = round
				}
				for _, name := range names {
					name = strings.TrimSpace(name)
					r, err := run(cfg, c, name, lag)
					if err != nil {
						fmt.Fprintf(os.Stderr, "%s lag %v: %v\n", name, lag, err)
						failed = true
					}
					r.config = name
					if *rounds > 1 {
						r.name = fmt.Sprintf("%s (round %d)", name, round)
					}
					rows = append(rows, r)
				}
			}
			printTable(c.controller, lag, rows)
			if *rounds > 1 {
				printRounds(c.controller, lag, *rounds, rows)
			}
		}
	}
	if failed {
		os.Exit(1)
	}
}

type result struct {
	name                       string // as printed
	config                     string // the configuration (-configs)
	extraCreates, extraDeletes int
	creates, deletes           int
	minCreates, minDeletes     int
	conflicts, requests        int64
	converge                   []time.Duration
	skips                      int
	skipToSync, freshToSync    []time.Duration
	freshUnseen                int
	held                       []time.Duration
	kcmSkips, retries          float64
	cpu, driverCPU             time.Duration // the controller process's; the driver's
	notConverged               int
	storeLost, storeWaited     float64
	requestKinds               string // requests by verb and resource
	conflictClasses            string // the 409s classified (conflictLog)
}

func runOne(base *rest.Config, c config, name string, lag time.Duration) (result, error) {
	res := result{name: name}
	if base, w, ok := strings.Cut(name, "@"); ok { // F@300ms: F with that max wait
		d, err := time.ParseDuration(w)
		if err != nil {
			return res, err
		}
		name, c.maxWait = base, d
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := namespaceFor(c, name, lag)

	driverCfg := rest.CopyConfig(base)
	driverCfg.QPS, driverCfg.Burst = 1000, 2000
	driver := kubernetes.NewForConfigOrDie(driverCfg)
	if _, err := driver.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return res, err
	}
	defer func() { _ = driver.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) }()
	clog := newConflictLog()

	// The driver's own view, without lag.
	dfac := informers.NewSharedInformerFactoryWithOptions(driver, 0, informers.WithNamespace(ns))
	drs := dfac.Apps().V1().ReplicaSets()
	dpods := dfac.Core().V1().Pods()
	dpods.Informer() // registered before Start
	w := newWatcher()
	_, _ = drs.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { w.rsChanged(obj.(*appsv1.ReplicaSet)) },
		AddFunc:    func(obj any) { w.rsChanged(obj.(*appsv1.ReplicaSet)) },
	})
	dfac.Start(ctx.Done())
	dfac.WaitForCacheSync(ctx.Done())

	stopController, err := startControllerProcess(c, name, lag, ns)
	if err != nil {
		return res, err
	}
	driverCPU0 := cpuTime()

	names := make([]string, c.rs)
	current := make([]int32, c.rs)
	for i := range names {
		names[i] = fmt.Sprintf("rs-%d", i)
		rs := newRS(ns, names[i], 0)
		out, err := driver.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{})
		if err != nil {
			_, _ = stopController()
			return res, err
		}
		clog.wrote(names[i], byDriver, out)
	}
	var runErr error
	for step := 1; step <= c.steps; step++ {
		targets := make([]int32, c.rs)
		for i := range targets {
			targets[i] = int32(1 + (step*5+i*3)%8)
			if d := targets[i] - current[i]; d > 0 {
				res.minCreates += int(d)
			} else {
				res.minDeletes += int(-d)
			}
		}
		w.expect(ns, names, targets)
		var wg sync.WaitGroup
		for i := range names {
			wg.Go(func() {
				if err := scale(ctx, driver, ns, names[i], targets[i], clog); err != nil {
					fmt.Fprintln(os.Stderr, "scale:", err)
				}
			})
		}
		wg.Wait()
		res.converge = append(res.converge, w.waitAll(c.convergeTimeout)...)
		copy(current, targets)
		if step%4 == 0 {
			// Delete one pod of each ReplicaSet behind the controller's back,
			// then wait until each has its replicas again.
			for i := range names {
				pods, _ := dpods.Lister().Pods(ns).List(selectorFor(names[i]))
				for _, p := range pods {
					if p.DeletionTimestamp == nil {
						if err := driver.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err == nil {
							res.minCreates++
						}
						break
					}
				}
			}
			if err := settled(ctx, drs.Lister(), dpods.Lister(), ns, names, current, c.convergeTimeout); err != nil {
				res.notConverged++
			}
		}
	}
	// Every ReplicaSet has exactly its replicas.
	if err := settled(ctx, drs.Lister(), dpods.Lister(), ns, names, current, c.convergeTimeout); err != nil {
		runErr = err
	}
	res.driverCPU = cpuTime() - driverCPU0
	res.notConverged += w.timeouts
	cr, err := stopController()
	if err != nil && runErr == nil {
		runErr = err
	}
	res.cpu = cr.CPU
	res.creates, res.deletes = cr.Creates, cr.Deletes
	res.extraCreates, res.extraDeletes = res.creates-res.minCreates, res.deletes-res.minDeletes
	res.conflicts, res.requests = cr.Conflicts, cr.Requests
	clog.add(cr.Writes, cr.Conflicts409)
	res.requestKinds, res.conflictClasses = cr.RequestKinds, clog.String()
	res.skips, res.skipToSync, res.freshToSync, res.freshUnseen, res.held = cr.Skips, cr.SkipToSync, cr.FreshToSync, cr.FreshUnseen, cr.Held
	res.kcmSkips, res.retries = cr.KCMSkips, cr.Retries
	res.storeLost, res.storeWaited = cr.StoreLost, cr.StoreWaited
	return res, runErr
}

func newRS(ns, name string, replicas int32) *appsv1.ReplicaSet {
	labels := map[string]string{"app": name}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/none"}}},
			},
		},
	}
}

func scale(ctx context.Context, client kubernetes.Interface, ns, name string, replicas int32, clog *conflictLog) error {
	for {
		rs, err := client.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		rs.Spec.Replicas = &replicas
		out, err := client.AppsV1().ReplicaSets(ns).Update(ctx, rs, metav1.UpdateOptions{})
		if err == nil {
			clog.wrote(name, byDriver, out)
		}
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}
