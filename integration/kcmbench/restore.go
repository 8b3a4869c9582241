package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
)

// The restore scenario (-restore): an etcd restore from a snapshot under
// each configuration's ReplicaSet controller, as an operator runs it
// (withcluster -control: the kube-apiserver stopped, etcdutl snapshot
// restore, started again). The ReplicaSets are scaled to 3, etcd is
// snapshotted, they are scaled to 6 (the controller's pod creations,
// which its store records, land at revisions past the snapshot), etcd is
// restored, and they are scaled to 4: it reports how long after the
// kube-apiserver was back each ReplicaSet showed its 4 pods, and how many
// did not within -restore-timeout. Without --bump-revision the restored
// revision is below the recorded writes, so a store that waits for its
// caches to pass them waits for new writes to carry the server past them.
const (
	restoreBefore, restoreDuring, restoreAfter = 3, 6, 4
	restoreBump                                = 1_000_000
)

type restoreResult struct {
	name, mode      string
	converged       []time.Duration // from the kube-apiserver being back
	notConverged    int
	restoreTook     time.Duration
	skips           int
	kcmSkips        float64
	storeLost       float64
	requests        int64
	extraPodCreates int
}

// runRestore runs the scenario for one configuration and mode ("nobump"
// or "bump").
func runRestore(base *rest.Config, c config, name, mode string, timeout time.Duration) (restoreResult, error) {
	res := restoreResult{name: name, mode: mode}
	ctl, err := newControlClient()
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := fmt.Sprintf("kcmbench-restore-%s-%s", strings.ToLower(name), mode)
	d, err := newDriver(ctx, base, ns)
	if err != nil {
		return res, err
	}
	defer d.close()
	stopController, err := startControllerProcess(c, name, 0, ns)
	if err != nil {
		return res, err
	}
	names := make([]string, c.rs)
	for i := range names {
		names[i] = fmt.Sprintf("rs-%d", i)
		if _, err := d.client.AppsV1().ReplicaSets(ns).Create(ctx, newRS(ns, names[i], restoreBefore), metav1.CreateOptions{}); err != nil {
			_, _ = stopController()
			return res, err
		}
	}
	fail := func(err error) (restoreResult, error) {
		_, _ = stopController()
		return res, err
	}
	if err := settled(ctx, d.rs, d.pods, ns, names, fill(c.rs, restoreBefore), c.convergeTimeout); err != nil {
		return fail(err)
	}
	var snap struct{ ID int }
	if err := ctl.post("/snapshot", &snap); err != nil {
		return fail(err)
	}
	d.scaleAll(ctx, names, restoreDuring)
	if err := settled(ctx, d.rs, d.pods, ns, names, fill(c.rs, restoreDuring), c.convergeTimeout); err != nil {
		return fail(err)
	}
	bump := 0
	if mode == "bump" {
		bump = restoreBump
	}
	var took struct{ Seconds float64 }
	if err := ctl.post(fmt.Sprintf("/restore?snapshot=%d&bump=%d", snap.ID, bump), &took); err != nil {
		return fail(err)
	}
	back := time.Now()
	res.restoreTook = time.Duration(took.Seconds * float64(time.Second))
	d.scaleAll(ctx, names, restoreAfter)
	res.converged, res.notConverged = d.convergeEach(ctx, names, restoreAfter, back, timeout)
	cr, err := stopController()
	res.skips, res.kcmSkips, res.storeLost, res.requests = cr.Skips, cr.KCMSkips, cr.StoreLost, cr.Requests
	// The controller's creations: 3, then 3 more (which the restore
	// loses), then from the restored 3 to 4, 1.
	res.extraPodCreates = cr.Creates - c.rs*(restoreBefore+restoreDuring-restoreBefore+restoreAfter-restoreBefore)
	return res, err
}

func fill(n int, v int32) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// driver is the scenario's own client and informers, without lag.
type driver struct {
	client kubernetes.Interface
	rs     appslisters.ReplicaSetLister
	pods   corelisters.PodLister
	ns     string
	stop   context.CancelFunc
}

func newDriver(ctx context.Context, base *rest.Config, ns string) (*driver, error) {
	cfg := rest.CopyConfig(base)
	cfg.QPS, cfg.Burst = 1000, 2000
	client := kubernetes.NewForConfigOrDie(cfg)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	ictx, stop := context.WithCancel(ctx)
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	d := &driver{client: client, rs: f.Apps().V1().ReplicaSets().Lister(), pods: f.Core().V1().Pods().Lister(), ns: ns, stop: stop}
	f.Start(ictx.Done())
	f.WaitForCacheSync(ictx.Done())
	return d, nil
}

func (d *driver) close() {
	d.stop()
	_ = d.client.CoreV1().Namespaces().Delete(context.Background(), d.ns, metav1.DeleteOptions{})
}

// scaleAll sets every ReplicaSet's replicas, retrying on conflicts and, for
// a while, on errors (the kube-apiserver just came back).
func (d *driver) scaleAll(ctx context.Context, names []string, replicas int32) {
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Go(func() {
			for end := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				err := scale(ctx, d.client, d.ns, n, replicas, newConflictLog())
				if err == nil || time.Now().After(end) {
					if err != nil {
						fmt.Fprintln(os.Stderr, "scale:", err)
					}
					return
				}
			}
		})
	}
	wg.Wait()
}

// convergeEach waits up to timeout for each ReplicaSet to settle at want
// (its live pods and its status), as consistent reads show it: after a
// restore without --bump-revision, client-go's informers (the driver's
// too) stay at what they saw before until the server's revision passes
// it. It returns the time from back at which each settled, sorted, and
// how many did not.
func (d *driver) convergeEach(ctx context.Context, names []string, want int32, back time.Time, timeout time.Duration) ([]time.Duration, int) {
	done := map[string]time.Duration{}
	last := map[string]string{}
	for end := time.Now().Add(timeout); len(done) < len(names) && time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		rss, err := d.client.AppsV1().ReplicaSets(d.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		pods, err := d.client.CoreV1().Pods(d.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		live := map[string]int32{}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				live[p.Labels["app"]]++
			}
		}
		for _, rs := range rss.Items {
			if _, ok := done[rs.Name]; ok {
				continue
			}
			if live[rs.Name] == want && rs.Status.Replicas == want && rs.Status.ObservedGeneration >= rs.Generation {
				done[rs.Name] = time.Since(back)
			}
			last[rs.Name] = fmt.Sprintf("%d pods, spec %d, status %d, generation %d observed %d (at %s)",
				live[rs.Name], *rs.Spec.Replicas, rs.Status.Replicas, rs.Generation, rs.Status.ObservedGeneration, rss.ResourceVersion)
		}
	}
	var out []time.Duration
	for _, t := range done {
		out = append(out, t)
	}
	slices.Sort(out)
	for _, n := range names {
		if _, ok := done[n]; !ok {
			fmt.Fprintf(os.Stderr, "restore %s: %s not converged after %v: %s\n", d.ns, n, timeout, last[n])
			break
		}
	}
	return out, len(names) - len(done)
}

// controlClient talks to withcluster's control socket.
type controlClient struct{ http *http.Client }

func newControlClient() (*controlClient, error) {
	sock := os.Getenv("WITHCLUSTER_CONTROL")
	if sock == "" {
		return nil, fmt.Errorf("-restore needs withcluster's control socket: run it under `withcluster -control` (make kcm-bench does)")
	}
	return &controlClient{http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}}, nil
}

func (c *controlClient) post(path string, out any) error {
	resp, err := c.http.Post("http://withcluster"+path, "", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var b strings.Builder
		_, _ = fmt.Fprintf(&b, "withcluster %s: %s", path, resp.Status)
		msg := make([]byte, 512)
		n, _ := resp.Body.Read(msg)
		return fmt.Errorf("%s: %s", b.String(), strings.TrimSpace(string(msg[:n])))
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func printRestoreTable(rows []restoreResult, timeout time.Duration) {
	fmt.Printf("\n### RS controller, etcd restored from a snapshot (timeout %v)\n\n", timeout)
	fmt.Println("| config | restore | converged | apiserver back → converged p50 / max (s) | restore took (s) | skips (kcm metric) | lost writes dropped | extra pod creates | API requests |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		conv := "–"
		if len(r.converged) > 0 {
			conv = fmt.Sprintf("%.2f / %.2f", r.converged[len(r.converged)/2].Seconds(), r.converged[len(r.converged)-1].Seconds())
		}
		mode := "without --bump-revision"
		if r.mode == "bump" {
			mode = fmt.Sprintf("--bump-revision %d", restoreBump)
		}
		fmt.Printf("| %s | %s | %d of %d | %s | %.1f | %d (%.0f) | %.0f | %d | %d |\n", r.name, mode, len(r.converged), len(r.converged)+r.notConverged,
			conv, r.restoreTook.Seconds(), r.skips, r.kcmSkips, r.storeLost, r.extraPodCreates, r.requests)
	}
}
