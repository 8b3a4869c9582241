package e2e

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/integration/controlplane"
	"github.com/freshinformer/freshinformer/integration/testenv"
)

// rolloutCostNamespaces and rolloutCostObjects shape the rollout-cost
// test: one informer per namespace and side, each holding that many
// ConfigMaps.
const (
	rolloutCostNamespaces = 20
	rolloutCostObjects    = 50
)

// countingRT counts a side's requests and the response bytes its clients
// read (watch streams as they flow), and the requests by shape.
type countingRT struct {
	rt             http.RoundTripper
	requests, read atomic.Int64
	last           atomic.Int64 // unix nanos of the last request or byte

	mu     sync.Mutex // guards shapes
	shapes map[string]int
}

func (c *countingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	c.requests.Add(1)
	c.last.Store(time.Now().UnixNano())
	resp, err := c.rt.RoundTrip(req)
	q := req.URL.Query()
	shape := "list"
	if isWatch(req) {
		shape = "watch"
		if q.Get("sendInitialEvents") == "true" {
			shape = "watch-list"
		}
	}
	shape += " rv=" + strconv.Quote(q.Get("resourceVersion"))
	if l := q.Get("limit"); l != "" {
		shape += " limit=" + l
	}
	if err != nil {
		shape += ": error"
	} else {
		shape += ": " + strconv.Itoa(resp.StatusCode)
	}
	c.mu.Lock()
	if c.shapes == nil {
		c.shapes = map[string]int{}
	}
	c.shapes[shape]++
	c.mu.Unlock()
	if resp != nil && resp.Body != nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, c: c}
	}
	return resp, err
}

func (c *countingRT) quietFor() time.Duration { return time.Since(time.Unix(0, c.last.Load())) }

// takeShapes returns the requests by shape since the last call.
func (c *countingRT) takeShapes() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.shapes
	c.shapes = nil
	return s
}

type countingBody struct {
	io.ReadCloser
	c *countingRT
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.c.read.Add(int64(n))
		b.c.last.Store(time.Now().UnixNano())
	}
	return n, err
}

// testHARolloutCost is issue 39's cost requirement for scenario 3, small:
// client-go's factories and ours (one per namespace, ConfigMaps) on one
// connection through the load balancer (client-go's cached transport, as
// in one process; each side counted by a wrapper of its own), every
// kube-apiserver restarted in turn, beginning with the sides' replica
// (SIGTERM; down for a few seconds, as a replica being replaced is, so that
// clients move to the others; started, ready), then one write per
// namespace seen by both. Ours may cost at most 1.2 times
// plain's requests and response bytes from the first stop until both are
// quiet again.
//
// When a restart ends the watches, client-go resumes each from its
// resource version on another replica; ours resume too, and check the
// server with one consistent read of limit 1 per resource, shared by the
// process's factories (cache.ServerReads), sent after the watches were
// taken: what tells a replica lost behind the load balancer from a server
// back from a restored etcd (TestHA/EtcdRestore).
func testHARolloutCost(t *testing.T, h *controlplane.HAControlPlane) {
	ctx := testenv.Context(t, 8*time.Minute)
	writer, _ := haClient(t, ctx, h)
	var nss []string
	for range rolloutCostNamespaces {
		ns, err := writer.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ha-cost-"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nss = append(nss, ns.Name)
		for i := range rolloutCostObjects {
			if _, err := writer.CoreV1().ConfigMaps(ns.Name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "obj-" + strconv.Itoa(i)},
				Data: map[string]string{"v": "x"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Both sides on client-go's one cached transport to the load balancer.
	side := func() (*countingRT, kubernetes.Interface) {
		c := &countingRT{}
		cfg := h.Config()
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { c.rt = rt; return c })
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c, cs
	}
	plainRT, plainCS := side()
	oursRT, oursCS := side()
	runCtx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	var plainListers []corelisters.ConfigMapLister
	var ours []*cache.SharedInformerFactory
	serverReads := new(cache.ServerReads) // shared by the process's factories, as docs/ha.md advises
	for _, ns := range nss {
		pf := informers.NewSharedInformerFactoryWithOptions(plainCS, 0, informers.WithNamespace(ns))
		plainListers = append(plainListers, pf.Core().V1().ConfigMaps().Lister())
		of := cache.NewSharedInformerFactoryWithOptions(oursCS, 0, cache.WithNamespace(ns), cache.WithInformerOptions(cache.WithServerReads(serverReads)))
		of.Core().V1().ConfigMaps().Informer()
		ours = append(ours, of)
		pf.Start(runCtx.Done())
		of.Start(runCtx.Done())
		t.Cleanup(func() { stop(); pf.Shutdown(); of.Shutdown() })
		for typ, ok := range pf.WaitForCacheSync(ctx.Done()) {
			if !ok {
				t.Fatalf("client-go's %v informer did not sync", typ)
			}
		}
		for typ, ok := range of.WaitForCacheSync(ctx.Done()) {
			if !ok {
				t.Fatalf("our %v informer did not sync", typ)
			}
		}
	}
	quiet := func() {
		for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if plainRT.quietFor() > 3*time.Second && oursRT.quietFor() > 3*time.Second {
				return
			}
		}
		t.Logf("still traffic after a minute")
	}
	quiet()

	sides, err := kubernetes.NewForConfig(h.Config()) // the sides' connection
	if err != nil {
		t.Fatal(err)
	}
	p0r, p0b, o0r, o0b := plainRT.requests.Load(), plainRT.read.Load(), oursRT.requests.Load(), oursRT.read.Load()
	plainRT.takeShapes()
	oursRT.takeShapes()
	// The rollout begins with the sides' replica, so that their watches
	// break while the other replicas' watch caches still hold their
	// resource versions (one order a rollout may take; others differ in
	// where the redialled connection lands).
	first, err := h.WhichAPIServer(ctx, sides.CoreV1().RESTClient())
	if err != nil || first < 0 {
		t.Fatalf("which replica holds the sides' connection: %d, %v", first, err)
	}
	hits := 0
	for k := range h.APIServers() {
		i := (first + k) % h.APIServers()
		if at, err := h.WhichAPIServer(ctx, sides.CoreV1().RESTClient()); err == nil && at == i {
			hits++
		}
		if err := h.StopAPIServer(i); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		if err := h.StartAPIServer(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	// One write per namespace, seen by both sides.
	gvr := corev1.SchemeGroupVersion.WithResource("configmaps")
	for n, ns := range nss {
		var out *corev1.ConfigMap
		for attempt := 0; ; attempt++ {
			out, err = writer.CoreV1().ConfigMaps(ns).Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "obj-0"},
				Data: map[string]string{"v": "after"}}, metav1.UpdateOptions{})
			if err == nil || attempt > 50 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		err = ours[n].WaitForFreshness(wctx, gvr, out.ResourceVersion)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", ns, err)
		}
		for end := time.Now().Add(time.Minute); staleIn(plainListers[n], ns, "obj-0", out.ResourceVersion); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: client-go's lister never showed the write", ns)
			}
		}
	}
	quiet()
	pr, pb := plainRT.requests.Load()-p0r, plainRT.read.Load()-p0b
	or, ob := oursRT.requests.Load()-o0r, oursRT.read.Load()-o0b
	t.Logf("requests by shape: plain %v; ours %v", plainRT.takeShapes(), oursRT.takeShapes())
	t.Logf("a rollout of %d kube-apiservers (the sides' replica restarted %d times), %d informers a side of %d ConfigMaps: requests plain %d, ours %d (%.2fx); response bytes plain %d, ours %d (%.2fx)",
		h.APIServers(), hits, len(nss), rolloutCostObjects, pr, or, float64(or)/float64(max(pr, 1)), pb, ob, float64(ob)/float64(max(pb, 1)))
	if float64(or) > 1.2*float64(pr) {
		t.Errorf("our informers sent %d requests across the rollout, more than 1.2 times client-go's %d", or, pr)
	}
	if float64(ob) > 1.2*float64(pb) {
		t.Errorf("our informers read %d response bytes across the rollout, more than 1.2 times client-go's %d", ob, pb)
	}
}
