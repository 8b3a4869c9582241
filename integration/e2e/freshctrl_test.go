package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/freshinformer/freshinformer/freshctrl"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/integration/testenv"
	"github.com/freshinformer/freshinformer/readyourwrites"
)

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestFreshctrlManager opts a controller-runtime manager in with the two
// fields, on a cache of two namespaces and a ByObject label selector, and
// checks on the real apiserver: every cached read after a write through
// the client sees the write (typed and metadata-only, per namespace, and
// through the selector); writes outside the cache fail fast or are not
// waited for; /metrics scrapes cleanly with our series in it.
func TestFreshctrlManager(t *testing.T) {
	nsA, nsB, nsOut := testenv.Namespace(t), testenv.Namespace(t), testenv.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	metricsAddr := freePort(t)
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	mgr, err := ctrl.NewManager(testenv.Config(t), ctrl.Options{
		NewCache:  freshctrl.NewCache,
		NewClient: freshctrl.NewClient,
		Cache: crcache.Options{
			DefaultNamespaces: map[string]crcache.Config{nsA: {}, nsB: {}},
			ByObject:          map[client.Object]crcache.ByObject{&corev1.Secret{}: {Label: web}},
		},
		Metrics: metricsserver.Options{BindAddress: metricsAddr},
	})
	if err != nil {
		t.Fatal(err)
	}
	mgrCtx, stopMgr := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := mgr.Start(mgrCtx); err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	defer func() { stopMgr(); wg.Wait() }()
	c := mgr.GetClient()

	// Make the informers (and their metrics) before the writes.
	for _, obj := range []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	stale := 0
	check := func(what string, got, written string) {
		t.Helper()
		if cmp, err := freshness.Compare(got, written); err != nil || cmp < 0 {
			stale++
			t.Errorf("%s: read resource version %s after writing %s", what, got, written)
		}
	}
	const rounds = 100
	for _, ns := range []string{nsA, nsB} {
		obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "child"}}
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		for i := range rounds {
			obj.Data = map[string]string{"i": strconv.Itoa(i)}
			if err := c.Update(ctx, obj); err != nil {
				t.Fatal(err)
			}
			var got corev1.ConfigMap
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), &got); err != nil {
				t.Fatal(err)
			}
			check("typed Get in "+ns, got.ResourceVersion, obj.ResourceVersion)
			var list corev1.ConfigMapList
			if err := c.List(ctx, &list); err != nil { // both namespaces
				t.Fatal(err)
			}
			for _, item := range list.Items {
				if item.Namespace == ns && item.Name == "child" {
					check("cluster-wide List", item.ResourceVersion, obj.ResourceVersion)
				}
			}
			if i%10 == 0 {
				m := &metav1.PartialObjectMetadata{}
				m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
				if err := c.Get(ctx, client.ObjectKeyFromObject(obj), m); err != nil {
					t.Fatal(err)
				}
				check("metadata-only Get", m.ResourceVersion, obj.ResourceVersion)
			}
		}
	}

	// Through the ByObject selector.
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "web", Labels: map[string]string{"app": "web"}}}
	if err := c.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	for i := range rounds {
		sec.StringData = map[string]string{"i": strconv.Itoa(i)}
		if err := c.Update(ctx, sec); err != nil {
			t.Fatal(err)
		}
		var got corev1.Secret
		if err := c.Get(ctx, client.ObjectKeyFromObject(sec), &got); err != nil {
			t.Fatal(err)
		}
		check("Secret through the selector", got.ResourceVersion, sec.ResourceVersion)
	}
	t.Logf("%d stale reads in %d", stale, 2*rounds*2+rounds)

	// A write outside the selector is not waited for: NotFound at once.
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "db", Labels: map[string]string{"app": "db"}}}
	if err := c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = c.Get(ctx, client.ObjectKeyFromObject(other), &corev1.Secret{})
	if !apierrors.IsNotFound(err) || time.Since(start) > 2*time.Second {
		t.Errorf("Get outside the selector: %v after %v, want NotFound at once", err, time.Since(start))
	}
	// A write in a namespace the cache does not have fails fast.
	out := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsOut, Name: "x"}}
	if err := c.Create(ctx, out); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := c.Get(ctx, client.ObjectKeyFromObject(out), &corev1.ConfigMap{}); err == nil || time.Since(start) > 2*time.Second {
		t.Errorf("Get outside the cache's namespaces: %v after %v, want an error at once", err, time.Since(start))
	}
	// The cache served every read: nothing waits, nothing timed out.
	var nf *readyourwrites.NotFreshError
	if errors.As(err, &nf) {
		t.Errorf("unexpected freshness error: %v", nf)
	}

	// /metrics of the manager: scrapes cleanly, with a series per informer.
	if _, err := crmetrics.Registry.Gather(); err != nil {
		t.Fatalf("gathering controller-runtime's registry: %v", err)
	}
	body := scrape(t, ctx, "http://"+metricsAddr+"/metrics")
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	observed := families["freshinformer_observed_resource_version"]
	if observed == nil {
		t.Fatalf("no freshinformer_observed_resource_version in /metrics")
	}
	want := map[string]bool{
		"configmaps|ns=" + nsA: false, "configmaps|ns=" + nsB: false,
		"secrets|ns=" + nsA + ",labels=app=web": false, "secrets|ns=" + nsB + ",labels=app=web": false,
	}
	for _, m := range observed.GetMetric() {
		lv := map[string]string{}
		for _, l := range m.GetLabel() {
			lv[l.GetName()] = l.GetValue()
		}
		if _, ok := want[lv["resource"]+"|"+lv["name"]]; ok {
			want[lv["resource"]+"|"+lv["name"]] = true
		}
	}
	for k, seen := range want {
		if !seen {
			t.Errorf("no series for informer %s in /metrics", k)
		}
	}
	if waits := families["freshinformer_waits_total"]; waits == nil || len(waits.GetMetric()) == 0 {
		t.Error("no freshinformer_waits_total in /metrics")
	}
}

func scrape(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	var last error
	for range 50 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK {
				return string(b)
			}
			last = fmt.Errorf("status %d: %v", resp.StatusCode, err)
		} else {
			last = err
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("scraping %s: %v", url, last)
	return ""
}
