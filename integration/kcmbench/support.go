package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/freshinformer/freshinformer/cache"
)

// informerSet is a configuration's informers: client-go's factory (P, K)
// or ours (F), scoped to the run's namespace.
type informerSet struct {
	rs     appsinformers.ReplicaSetInformer
	jobs   batchinformers.JobInformer
	pods   coreinformers.PodInformer
	source cache.InformerSource // F only
	start  func(ctx context.Context)
}

func newInformers(name string, client kubernetes.Interface, ns string, probeDelay time.Duration) informerSet {
	if strings.HasPrefix(name, "F") {
		opts := []cache.FactoryOption{cache.WithNamespace(ns)}
		if probeDelay != 0 {
			opts = append(opts, cache.WithInformerOptions(cache.WithQuietProbeDelay(probeDelay)))
		}
		f := cache.NewSharedInformerFactoryWithOptions(client, 0, opts...)
		return informerSet{rs: f.Apps().V1().ReplicaSets(), jobs: f.Batch().V1().Jobs(), pods: f.Core().V1().Pods(), source: f,
			start: func(ctx context.Context) { f.Start(ctx.Done()); f.WaitForCacheSync(ctx.Done()) }}
	}
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	return informerSet{rs: f.Apps().V1().ReplicaSets(), jobs: f.Batch().V1().Jobs(), pods: f.Core().V1().Pods(),
		start: func(ctx context.Context) { f.Start(ctx.Done()); f.WaitForCacheSync(ctx.Done()) }}
}

func selectorFor(name string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{"app": name})
}

// watcher times each ReplicaSet's convergence after a spec change: status
// replicas equal to the spec's, for the spec's generation.
type watcher struct {
	mu       sync.Mutex
	since    time.Time
	want     map[string]int32
	done     map[string]time.Duration
	changed  chan struct{}
	timeouts int
}

func newWatcher() *watcher { return &watcher{changed: make(chan struct{}, 1)} }

func (w *watcher) expect(ns string, names []string, targets []int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.since = time.Now()
	w.want = map[string]int32{}
	w.done = map[string]time.Duration{}
	for i, n := range names {
		w.want[n] = targets[i]
	}
}

func (w *watcher) rsChanged(rs *appsv1.ReplicaSet) {
	w.mu.Lock()
	defer w.mu.Unlock()
	want, ok := w.want[rs.Name]
	if !ok {
		return
	}
	if _, done := w.done[rs.Name]; done {
		return
	}
	if rs.Spec.Replicas == nil || *rs.Spec.Replicas != want || rs.Status.ObservedGeneration < rs.Generation {
		return
	}
	if rs.Status.Replicas == want {
		w.done[rs.Name] = time.Since(w.since)
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}
}

// waitAll waits until every expected ReplicaSet converged, or timeout;
// it returns the convergence times.
func (w *watcher) waitAll(timeout time.Duration) []time.Duration {
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		n, total := len(w.done), len(w.want)
		w.mu.Unlock()
		if n == total {
			break
		}
		select {
		case <-w.changed:
		case <-deadline:
			w.mu.Lock()
			w.timeouts += total - len(w.done)
			w.mu.Unlock()
			return w.times()
		}
	}
	return w.times()
}

func (w *watcher) times() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []time.Duration
	for _, d := range w.done {
		out = append(out, d)
	}
	return out
}

// settled waits until every ReplicaSet has exactly its replicas as pods,
// and its status says so for its generation.
func settled(ctx context.Context, rsl appslisters.ReplicaSetLister, pl corelisters.PodLister, ns string, names []string, want []int32, timeout time.Duration) error {
	var bad string
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		for i, n := range names {
			if bad = unsettled(rsl, pl, ns, n, want[i]); bad != "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("not settled after %v: %s", timeout, bad)
	}
	return nil
}

// unsettled says how ReplicaSet name differs from want live pods with its
// status showing them, or "" when it does not.
func unsettled(rsl appslisters.ReplicaSetLister, pl corelisters.PodLister, ns, name string, want int32) string {
	pods, _ := pl.Pods(ns).List(selectorFor(name))
	live := 0
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			live++
		}
	}
	rs, err := rsl.ReplicaSets(ns).Get(name)
	if err == nil && int32(live) == want && rs.Status.Replicas == want && rs.Status.ObservedGeneration >= rs.Generation {
		return ""
	}
	bad := fmt.Sprintf("%s: %d pods, want %d", name, live, want)
	if rs != nil {
		bad += fmt.Sprintf(", status %d (generation %d observed %d)", rs.Status.Replicas, rs.Generation, rs.Status.ObservedGeneration)
	}
	return bad
}

// gatherCounter sums a counter of kube-controller-manager's registry
// (legacyregistry) over the series whose labels include match.
func gatherCounter(name string, match map[string]string) float64 {
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return 0
	}
	return sumFamilies(mfs, name, match)
}

func gatherFrom(reg *prometheus.Registry, name string, match map[string]string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return 0
	}
	return sumFamilies(mfs, name, match)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d.Microseconds())/1000) }

// namespaceFor names the namespace of one run: the controller, the
// configuration (its max wait apart), the lag and, with -rounds, the round,
// so that no run reuses one an earlier run is still deleting.
func namespaceFor(c config, name string, lag time.Duration) string {
	ns := fmt.Sprintf("kcmbench-%s-%s-%d-%d", c.controller, strings.ToLower(name), c.maxWait.Milliseconds(), lag.Milliseconds())
	if c.round > 0 {
		ns += fmt.Sprintf("-r%d", c.round)
	}
	return ns
}

// ownerName is how the tables name the controller's owners.
func ownerName(controller string) string {
	if controller == "job" {
		return "Job"
	}
	return "RS"
}

// printRounds prints each configuration's runs of -rounds together:
// convergence percentiles over every run's samples, and the sums of what
// the runs counted.
func printRounds(controller string, lag time.Duration, rounds int, rows []result) {
	owner := ownerName(controller)
	var order []string
	byConfig := map[string][]result{}
	for _, r := range rows {
		if _, ok := byConfig[r.config]; !ok {
			order = append(order, r.config)
		}
		byConfig[r.config] = append(byConfig[r.config], r)
	}
	fmt.Printf("%s controller, watch lag %v, %d rounds together (sums, and percentiles over every run's samples):\n\n", owner, lag, rounds)
	fmt.Println("| config | extra pod creates / deletes | converge p50 / p99 (ms) | not converged | " + owner + " status 409s | API requests | skips | held syncs | controller CPU (s) | driver CPU (s) |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, name := range order {
		var sum result
		for _, r := range byConfig[name] {
			sum.extraCreates += r.extraCreates
			sum.extraDeletes += r.extraDeletes
			sum.converge = append(sum.converge, r.converge...)
			sum.notConverged += r.notConverged
			sum.conflicts += r.conflicts
			sum.requests += r.requests
			sum.skips += r.skips
			sum.held = append(sum.held, r.held...)
			sum.cpu += r.cpu
			sum.driverCPU += r.driverCPU
		}
		fmt.Printf("| %s | %d / %d | %s / %s | %d | %d | %d | %d | %d | %.2f | %.2f |\n",
			name, sum.extraCreates, sum.extraDeletes, ms(pct(sum.converge, 50)), ms(pct(sum.converge, 99)), sum.notConverged,
			sum.conflicts, sum.requests, sum.skips, len(sum.held), sum.cpu.Seconds(), sum.driverCPU.Seconds())
	}
	fmt.Println()
}

func printTable(controller string, lag time.Duration, rows []result) {
	owner := ownerName(controller)
	fmt.Printf("### %s controller, watch lag %v\n\n", owner, lag)
	fmt.Println("| config | extra pod creates / deletes | pod creates / deletes (min) | converge p50 / p99 (ms) | not converged | " + owner + " status 409s | API requests | skips (kcm metric) | skip → resync p50 / p99 (ms) | fresh → resync p50 / p99 / max (ms) | held syncs, p50 / p99 (ms) | workqueue retries | controller CPU (s) | driver CPU (s) |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %d / %d | %d / %d (%d / %d) | %s / %s | %d | %d | %d | %d (%.0f) | %s / %s | %s / %s / %s (%d unseen) | %d, %s / %s | %.0f | %.2f | %.2f |\n",
			r.name, r.extraCreates, r.extraDeletes, r.creates, r.deletes, r.minCreates, r.minDeletes,
			ms(pct(r.converge, 50)), ms(pct(r.converge, 99)), r.notConverged, r.conflicts, r.requests,
			r.skips, r.kcmSkips, ms(pct(r.skipToSync, 50)), ms(pct(r.skipToSync, 99)),
			ms(pct(r.freshToSync, 50)), ms(pct(r.freshToSync, 99)), ms(pct(r.freshToSync, 100)), r.freshUnseen,
			len(r.held), ms(pct(r.held, 50)), ms(pct(r.held, 99)), r.retries, r.cpu.Seconds(), r.driverCPU.Seconds())
	}
	fmt.Println()
	for _, r := range rows {
		fmt.Printf("- %s requests: %s\n", r.name, r.requestKinds)
		if controller == "rs" {
			fmt.Printf("- %s RS status 409s: %s\n", r.name, r.conflictClasses)
		}
	}
	fmt.Println()
}
