package freshctrl

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fcache "github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/metrics"
)

// offlineConfig points at nothing: the tests here only make informers,
// whose scope probes never leave the process.
func offlineConfig() *rest.Config { return &rest.Config{Host: "http://127.0.0.1:1"} }

func staticMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for _, k := range []string{"ConfigMap", "Secret"} {
		m.Add(corev1.SchemeGroupVersion.WithKind(k), meta.RESTScopeNamespace)
	}
	m.Add(corev1.SchemeGroupVersion.WithKind("Namespace"), meta.RESTScopeRoot)
	return m
}

func informerNames(c *Cache, resource string) []string {
	var out []string
	for _, si := range c.FreshInformers() {
		if si.Resource.Resource == resource {
			out = append(out, string(si.Representation)+"|"+si.Informer.Name())
		}
	}
	sort.Strings(out)
	return out
}

// TestNewCacheScopes checks that every informer controller-runtime makes
// (per namespace, per ByObject selector, cluster-scoped; typed,
// unstructured and metadata-only) is a FreshInformer that knows its scope.
func TestNewCacheScopes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := Options{Registerer: prometheus.NewRegistry()}
	cc, err := o.NewCache(offlineConfig(), crcache.Options{
		Scheme:            scheme.Scheme,
		Mapper:            staticMapper(),
		DefaultNamespaces: map[string]crcache.Config{"team-a": {}, "team-b": {}},
		ByObject: map[client.Object]crcache.ByObject{
			&corev1.Secret{}: {Label: labels.SelectorFromSet(labels.Set{"app": "web"})},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := cc.(*Cache)
	noBlock := crcache.BlockUntilSynced(false)
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	for _, obj := range []client.Object{&corev1.ConfigMap{}, u, m, &corev1.Secret{}, &corev1.Namespace{}} {
		inf, err := c.GetInformer(ctx, obj, noBlock)
		if err != nil {
			t.Fatalf("GetInformer(%T): %v", obj, err)
		}
		if inf == nil {
			t.Fatalf("GetInformer(%T) returned nil", obj)
		}
	}
	got := strings.Join(informerNames(c, "configmaps"), " ")
	want := "metadata|metadata:ns=team-a metadata|metadata:ns=team-b typed|ns=team-a typed|ns=team-b unstructured|unstructured:ns=team-a unstructured|unstructured:ns=team-b"
	if got != want {
		t.Errorf("configmap informers:\n got %s\nwant %s", got, want)
	}
	if got, want := strings.Join(informerNames(c, "secrets"), " "), "typed|ns=team-a,labels=app=web typed|ns=team-b,labels=app=web"; got != want {
		t.Errorf("secret informers:\n got %s\nwant %s", got, want)
	}
	if got, want := strings.Join(informerNames(c, "namespaces"), " "), "typed|*"; got != want {
		t.Errorf("namespace informers: got %s, want %s", got, want)
	}
	for _, si := range c.FreshInformers() {
		if si.Scope.Unknown {
			t.Errorf("%s %s: scope unknown", si.Resource, si.Informer.Name())
		}
		if si.Informer.Resource() != si.Resource {
			t.Errorf("%s: informer resource %v", si.Informer.Name(), si.Informer.Resource())
		}
	}
	// Without namespaces the cache hands out our informer itself.
	single, err := Options{DisableMetrics: true}.NewCache(offlineConfig(), crcache.Options{Scheme: scheme.Scheme, Mapper: staticMapper()})
	if err != nil {
		t.Fatal(err)
	}
	inf, err := single.GetInformer(ctx, &corev1.ConfigMap{}, noBlock)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := inf.(*fcache.FreshInformer); !ok {
		t.Errorf("GetInformer returned a %T, want *cache.FreshInformer", inf)
	}
}

// TestMetricsNamesNeverCollide makes two caches of the same scopes on one
// registry (as two managers in a process, or one restarted) and scrapes:
// no duplicate series, one series per scope whatever the creation order
// (alike informers report together, so names are stable across restarts).
func TestMetricsNamesNeverCollide(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg := prometheus.NewRegistry()
	o := Options{Registerer: reg}
	for range 2 {
		cc, err := o.NewCache(offlineConfig(), crcache.Options{
			Scheme: scheme.Scheme, Mapper: staticMapper(),
			DefaultNamespaces: map[string]crcache.Config{"a": {}, "b": {}, "c": {}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cc.GetInformer(ctx, &corev1.ConfigMap{}, crcache.BlockUntilSynced(false)); err != nil {
			t.Fatal(err)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("scrape failed: %v", err)
	}
	names := map[string]int{}
	for _, f := range families {
		if f.GetName() != "freshinformer_pending_waiters" {
			continue
		}
		for _, m := range f.GetMetric() {
			lv := map[string]string{}
			for _, l := range m.GetLabel() {
				lv[l.GetName()] = l.GetValue()
			}
			if lv["resource"] != "configmaps" {
				t.Errorf("resource label %q", lv["resource"])
			}
			names[lv["name"]]++
		}
	}
	if len(names) != 3 || names["ns=a"] != 1 || names["ns=b"] != 1 || names["ns=c"] != 1 {
		t.Errorf("series per informer name: %v, want ns=a, ns=b and ns=c once each", names)
	}
}

// TestCachesOnOneRegistryShareItsProvider: two managers' caches on one
// registry (controller-runtime's is global) both start, and report into
// the one metrics.Provider the registry holds; nothing else keeps it.
func TestCachesOnOneRegistryShareItsProvider(t *testing.T) {
	reg := prometheus.NewRegistry()
	var providers []*metrics.Provider
	for range 2 {
		cc, err := Options{Registerer: reg}.NewCache(offlineConfig(), crcache.Options{Scheme: scheme.Scheme, Mapper: staticMapper()})
		if err != nil {
			t.Fatal(err)
		}
		providers = append(providers, cc.(*Cache).reg.metrics)
	}
	if providers[0] == nil || providers[0] != providers[1] {
		t.Fatalf("providers %p and %p, want one shared", providers[0], providers[1])
	}
	if _, err := metrics.NewProvider(reg); err == nil {
		t.Fatal("the registry holds no Provider")
	}
}
