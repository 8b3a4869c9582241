package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
)

// The Job workload: -jobs Jobs of -job-parallelism and -job-completions.
// In each wave the driver marks every running pod of every unfinished Job
// Succeeded (as a kubelet would report it), then waits until each Job's
// status counts them and shows its next pods active; the time from the
// marking until then is a convergence sample. Pods created beyond the
// completions are the extra creates (no pod fails, so none is needed).

func runJobs(base *rest.Config, c config, name string, lag time.Duration) (result, error) {
	res := result{name: name}
	if base, w, ok := strings.Cut(name, "@"); ok {
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

	// The driver's view, without lag: every pod a Job ever had is counted.
	dfac := informers.NewSharedInformerFactoryWithOptions(driver, 0, informers.WithNamespace(ns))
	djobs := dfac.Batch().V1().Jobs()
	dpods := dfac.Core().V1().Pods()
	djobs.Informer()
	var mu sync.Mutex
	created, deleted := map[string]bool{}, 0
	_, _ = dpods.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			mu.Lock()
			created[string(obj.(*corev1.Pod).UID)] = true
			mu.Unlock()
		},
		DeleteFunc: func(any) {
			mu.Lock()
			deleted++
			mu.Unlock()
		},
	})
	dfac.Start(ctx.Done())
	dfac.WaitForCacheSync(ctx.Done())

	stopController, err := startControllerProcess(c, name, lag, ns)
	if err != nil {
		return res, err
	}
	driverCPU0 := cpuTime()

	names := make([]string, c.jobs)
	marked := map[string]int{} // pods marked Succeeded, per Job
	done := map[string]bool{}  // pod UIDs marked
	for i := range names {
		names[i] = fmt.Sprintf("job-%d", i)
		if _, err := driver.BatchV1().Jobs(ns).Create(ctx, newJob(ns, names[i], int32(c.jobParallelism), int32(c.jobCompletions)), metav1.CreateOptions{}); err != nil {
			_, _ = stopController()
			return res, err
		}
	}
	res.minCreates = c.jobs * c.jobCompletions
	var runErr error
	// The first wave: every Job has its pods running.
	if _, err := jobsConverged(ctx, djobs.Lister().Jobs(ns).Get, names, marked, c, time.Now(), c.convergeTimeout); err != nil {
		runErr = err
	}
	for runErr == nil {
		start := time.Now()
		n := 0
		for _, j := range names {
			if marked[j] >= c.jobCompletions {
				continue
			}
			pods, _ := dpods.Lister().Pods(ns).List(labels.SelectorFromSet(labels.Set{batchv1.JobNameLabel: j}))
			for _, p := range pods {
				if done[string(p.UID)] || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodPending || marked[j] >= c.jobCompletions {
					continue
				}
				p = p.DeepCopy()
				p.Status.Phase = corev1.PodSucceeded
				if _, err := driver.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err == nil {
					done[string(p.UID)] = true
					marked[j]++
					n++
				}
			}
		}
		if n == 0 {
			break // every Job has all its completions
		}
		times, err := jobsConverged(ctx, djobs.Lister().Jobs(ns).Get, names, marked, c, start, c.convergeTimeout)
		res.converge = append(res.converge, times...)
		if err != nil {
			res.notConverged++
			runErr = err
		}
	}
	res.driverCPU = cpuTime() - driverCPU0
	cr, err := stopController()
	if err != nil && runErr == nil {
		runErr = err
	}
	mu.Lock()
	res.creates, res.deletes = len(created), deleted
	mu.Unlock()
	res.extraCreates, res.extraDeletes = res.creates-res.minCreates, res.deletes
	res.cpu = cr.CPU
	res.conflicts, res.requests = cr.Conflicts, cr.Requests
	res.requestKinds = cr.RequestKinds
	res.skips, res.skipToSync, res.freshToSync, res.freshUnseen, res.held = cr.Skips, cr.SkipToSync, cr.FreshToSync, cr.FreshUnseen, cr.Held
	res.kcmSkips, res.retries = cr.KCMSkips, cr.Retries
	res.storeLost, res.storeWaited = cr.StoreLost, cr.StoreWaited
	return res, runErr
}

// jobsConverged waits until every Job's status counts the pods marked
// Succeeded and shows its next pods active (and, once all are marked, the
// Job complete); it returns, per Job, how long after start that was.
func jobsConverged(ctx context.Context, get func(string) (*batchv1.Job, error), names []string, marked map[string]int, c config, start time.Time, timeout time.Duration) ([]time.Duration, error) {
	took := map[string]time.Duration{}
	var bad string
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		for _, n := range names {
			if _, ok := took[n]; ok {
				continue
			}
			j, err := get(n)
			if err != nil {
				bad = err.Error()
				return false, nil
			}
			want := int32(min(c.jobParallelism, c.jobCompletions-marked[n]))
			if j.Status.Succeeded < int32(marked[n]) || j.Status.Active != want {
				bad = fmt.Sprintf("%s: succeeded %d (want %d), active %d (want %d)", n, j.Status.Succeeded, marked[n], j.Status.Active, want)
				return false, nil
			}
			took[n] = time.Since(start)
		}
		return true, nil
	})
	var out []time.Duration
	for _, d := range took {
		out = append(out, d)
	}
	if err != nil {
		return out, fmt.Errorf("jobs not converged after %v: %s", timeout, bad)
	}
	return out, nil
}

func newJob(ns, name string, parallelism, completions int32) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.JobSpec{
			Parallelism:  &parallelism,
			Completions:  &completions,
			BackoffLimit: &completions,
			Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "c", Image: "example.invalid/none"}},
				},
			},
		},
	}
}
