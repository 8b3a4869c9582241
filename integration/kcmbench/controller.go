package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller"
	"k8s.io/kubernetes/pkg/controller/replicaset"
	consistencyutil "k8s.io/kubernetes/pkg/controller/util/consistency"

	"github.com/freshinformer/freshinformer/consistency"
	jobcontroller "github.com/freshinformer/freshinformer/integration/kcmbench/jobcontroller"
	"github.com/freshinformer/freshinformer/metrics"
)

// Each configuration's controller runs in a process of its own (this
// binary, with -controller-process): its CPU time is that process's, with
// none of the driver's, and no metric or goroutine of one configuration
// leaks into the next. The parent drives the workload; the child prints
// "ready" once its informers have synced, runs until its stdin closes,
// then prints its ctlResult as JSON.

// ctlResult is what a controller process measured.
type ctlResult struct {
	Creates, Deletes       int
	Conflicts, Requests    int64
	RequestKinds           string
	Skips                  int
	SkipToSync             []time.Duration
	FreshToSync            []time.Duration
	FreshUnseen            int
	Held                   []time.Duration
	KCMSkips, Retries      float64
	CPU                    time.Duration // the process's CPU time from the controller's start until it stopped
	StoreLost, StoreWaited float64
	Writes                 []rsWrite // its successful ReplicaSet status writes
	Conflicts409           []conflict
}

// controllerArgs are the flags a controller process takes.
type controllerArgs struct {
	name       string // P, K or F
	controller string // rs or job
	lag        time.Duration
	ns         string
}

// countingPodControl counts the controller's pod writes that succeeded.
type countingPodControl struct {
	controller.PodControlInterface
	mu               sync.Mutex
	creates, deletes int
}

func (p *countingPodControl) CreatePods(ctx context.Context, ns string, t *corev1.PodTemplateSpec, obj runtime.Object, ref *metav1.OwnerReference) error {
	err := p.PodControlInterface.CreatePods(ctx, ns, t, obj, ref)
	if err == nil {
		p.mu.Lock()
		p.creates++
		p.mu.Unlock()
	}
	return err
}

func (p *countingPodControl) DeletePod(ctx context.Context, ns, id string, obj runtime.Object) error {
	err := p.PodControlInterface.DeletePod(ctx, ns, id, obj)
	if err == nil {
		p.mu.Lock()
		p.deletes++
		p.mu.Unlock()
	}
	return err
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startControllerProcess starts this binary as configuration name's
// controller process and waits until it is ready; stop ends it and
// returns what it measured.
func startControllerProcess(c config, name string, lag time.Duration, ns string) (stop func() (ctlResult, error), err error) {
	args := []string{"-controller-process", "-controllers", c.controller, "-config", name, "-lag", lag.String(), "-ns", ns,
		"-workers", fmt.Sprint(c.workers), "-qps", fmt.Sprint(c.qps), "-burst", fmt.Sprint(c.burst),
		"-max-wait", c.maxWait.String(), "-f-probe-delay", c.probeDelay.String()}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := bufio.NewReader(out)
	line, err := r.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		_ = in.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("controller process: %q, %v", line, err)
	}
	return func() (ctlResult, error) {
		_ = in.Close()
		var res ctlResult
		derr := json.NewDecoder(r).Decode(&res)
		werr := cmd.Wait()
		if derr != nil {
			return res, fmt.Errorf("controller process result: %w (exit: %v)", derr, werr)
		}
		return res, werr
	}, nil
}

// controllerProcessMain is the controller process: it runs configuration
// a.name's controller until its stdin closes.
func controllerProcessMain(base *rest.Config, c config, a controllerArgs) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop, err := startController(ctx, base, c, a)
	if err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(a)
	if err != nil {
		return err
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it
	stopProfile()
	res := stop()
	cancel()
	return json.NewEncoder(os.Stdout).Encode(res)
}

// startCPUProfile profiles the controller process's CPU from its
// informers' sync until the workload ends, into
// $KCMBENCH_CPUPROFILE/<controller>-<config>-<lag>.pprof when that is set.
func startCPUProfile(a controllerArgs) (stop func(), err error) {
	dir := os.Getenv("KCMBENCH_CPUPROFILE")
	if dir == "" {
		return func() {}, nil
	}
	f, err := os.Create(filepath.Join(dir, a.ns+".pprof")) // the namespace names the controller, configuration, lag and round
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

// startController builds and runs the controller a.controller (the
// ReplicaSet or the Job controller) of configuration a.name, with its
// informers synced; stop ends the measurement and returns it.
func startController(ctx context.Context, base *rest.Config, c config, a controllerArgs) (stop func() ctlResult, err error) {
	name, lag, ns := a.name, a.lag, a.ns
	// The controller's client: counted, its watches delayed by lag.
	var cnt counter
	ctlCfg := rest.CopyConfig(base)
	ctlCfg.QPS, ctlCfg.Burst = c.qps, c.burst
	ctlCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &countingRT{next: &lagRT{next: rt, lag: lag}, c: &cnt}
	})
	clog := newConflictLog()
	var client kubernetes.Interface = recordingClient{Interface: kubernetes.NewForConfigOrDie(ctlCfg), log: clog}

	var store consistencyutil.ConsistencyStore
	var ours *metrics.ConsistencyMetrics
	reg := prometheus.NewRegistry()

	infs := newInformers(name, client, ns, c.probeDelay)
	ownerGR, ownerKind := rsGR, schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}
	var ownerInf toolscache.SharedIndexInformer
	if a.controller == "job" {
		ownerGR, ownerKind = jobsGR, schema.GroupKind{Group: "batch", Kind: "Job"}
		ownerInf = infs.jobs.Informer()
	} else {
		ownerInf = infs.rs.Informer()
	}
	podInf := infs.pods.Informer()
	if g, ok := ownerInf.GetStore().(interface{ LastStoreSyncResourceVersion() string }); ok {
		clog.cacheRV = g.LastStoreSyncResourceVersion
	}
	switch name {
	case "P":
		store = consistencyutil.NewNoopConsistencyStore()
	case "K", "Fk": // Fk: our factory under upstream's store
		store = consistencyutil.NewConsistencyStore(map[schema.GroupResource]consistencyutil.LastSyncRVGetter{
			podsGR:  podInf.GetStore(),
			ownerGR: ownerInf.GetStore(),
		})
	case "F", "Fw":
		m, err := metrics.NewConsistencyMetrics(reg, a.controller)
		if err != nil {
			return nil, err
		}
		ours = m
		opts := []consistency.Option{consistency.WithMaxWait(c.maxWait), consistency.WithMetrics(m), consistency.WithOwnerKind(ownerKind)}
		if name == "F" { // Fw: the owners' own writes only, as upstream's store
			opts = append(opts, consistency.WithOwnerResource(ownerGR))
		}
		store = consistency.NewStore(infs.source, opts...)
	default:
		return nil, fmt.Errorf("unknown configuration %q", name)
	}
	ms := newMeasuredStore(store)
	_, _ = podInf.AddEventHandler(ms.handler(podsGR))
	_, _ = ownerInf.AddEventHandler(ms.handler(ownerGR))

	var run func(ctx context.Context, workers int)
	pc := &countingPodControl{}
	queueName, skipsMetric := "replicaset", "replicaset_controller_stale_sync_skips_total"
	if a.controller == "job" {
		// The Job controller builds its PodControl itself; pods are counted
		// by the driver.
		queueName, skipsMetric = "job", "job_controller_stale_sync_skips_total"
		jc, err := jobcontroller.NewControllerWithConsistencyStore(ctx, client, infs.pods, infs.jobs, ms)
		if err != nil {
			return nil, err
		}
		run = jc.Run
	} else {
		broadcaster := record.NewBroadcaster(record.WithContext(ctx))
		var onWrite func(*corev1.Pod, *metav1.OwnerReference)
		if name != "P" {
			onWrite = func(pod *corev1.Pod, ref *metav1.OwnerReference) {
				if ref == nil {
					return
				}
				ms.WroteAt(types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, ref.UID, podsGR, pod.ResourceVersion)
			}
		}
		pc.PodControlInterface = controller.RealPodControl{
			KubeClient: client,
			Recorder:   broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "replicaset-controller"}),
			OnWrite:    onWrite,
		}
		rsc := replicaset.NewBaseController(klog.Background(), infs.rs, infs.pods, client, 500,
			appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), "replicaset_controller", queueName, pc, broadcaster,
			replicaset.DefaultReplicaSetControllerFeatures(), ms)
		run = rsc.Run
	}
	infs.start(ctx)
	cpu0 := cpuTime()
	go run(ctx, c.workers)

	return func() ctlResult {
		var res ctlResult
		res.CPU = cpuTime() - cpu0
		pc.mu.Lock()
		res.Creates, res.Deletes = pc.creates, pc.deletes
		pc.mu.Unlock()
		res.Conflicts, res.Requests, res.RequestKinds = cnt.conflicts.Load(), cnt.requests.Load(), cnt.breakdown()
		res.Writes, res.Conflicts409 = clog.records()
		ms.mu.Lock()
		res.Skips, res.SkipToSync, res.FreshToSync, res.FreshUnseen, res.Held = ms.skips, ms.skipToSync, ms.freshToSync, ms.freshUnseen, ms.held
		ms.mu.Unlock()
		res.KCMSkips = gatherCounter(skipsMetric, nil)
		res.Retries = gatherCounter("workqueue_retries_total", map[string]string{"name": queueName})
		if ours != nil {
			res.StoreLost = gatherFrom(reg, "freshinformer_consistency_checks_total", map[string]string{"outcome": "lost"})
			res.StoreWaited = gatherFrom(reg, "freshinformer_consistency_checks_total", map[string]string{"outcome": "waited"})
		}
		return res
	}, nil
}

// controllerFlags registers the controller process's own flags.
func controllerFlags(a *controllerArgs) *bool {
	on := flag.Bool("controller-process", false, "internal: run one configuration's controller (the benchmark starts these itself)")
	flag.StringVar(&a.name, "config", "", "internal: the controller process's configuration")
	flag.StringVar(&a.ns, "ns", "", "internal: the controller process's namespace")
	return on
}
