package factory_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/freshinformer/freshinformer/cache"
)

// oneResourceServer speaks the API for one resource, in JSON: lists,
// watches from a resource version, and watch-lists (initial events, then
// the bookmark that ends them). It keeps every object ever added as its
// history; objects are never changed or deleted.
type oneResourceServer struct {
	t          *testing.T
	gvr        schema.GroupVersionResource
	apiVersion string
	kind       string

	mu       sync.Mutex
	rv       int
	history  []map[string]any // the objects, in the order added
	watchers map[chan map[string]any]bool
	paths    []string // every request's path, with its Accept header
}

func newOneResourceServer(t *testing.T, gvr schema.GroupVersionResource) *oneResourceServer {
	obj := newObject(t, gvr, "ns", "x")
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &oneResourceServer{t: t, gvr: gvr, apiVersion: gvr.GroupVersion().String(), kind: gvks[0].Kind,
		rv: 10, watchers: map[chan map[string]any]bool{}}
}

// add adds an object named name in namespace ns and returns its resource
// version.
func (s *oneResourceServer) add(name string) string {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(newObject(s.t, s.gvr, "ns", name))
	if err != nil {
		s.t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	rv := strconv.Itoa(s.rv)
	u["apiVersion"], u["kind"] = s.apiVersion, s.kind
	u["metadata"].(map[string]any)["resourceVersion"] = rv
	s.history = append(s.history, u)
	for w := range s.watchers {
		w <- u
	}
	return rv
}

func (s *oneResourceServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.paths = append(s.paths, r.URL.Path+" "+r.Header.Get("Accept"))
	s.mu.Unlock()
	want := "/apis/" + s.gvr.Group + "/" + s.gvr.Version + "/" + s.gvr.Resource
	if r.Method != http.MethodGet || r.URL.Path != want {
		http.Error(w, "not served", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	q := r.URL.Query()
	if q.Get("watch") != "true" {
		s.mu.Lock()
		list := map[string]any{"apiVersion": s.apiVersion, "kind": s.kind + "List",
			"metadata": map[string]any{"resourceVersion": strconv.Itoa(s.rv)}, "items": s.history}
		err := json.NewEncoder(w).Encode(list)
		s.mu.Unlock()
		if err != nil {
			s.t.Error(err)
		}
		return
	}
	events := make(chan map[string]any, 100)
	s.mu.Lock()
	from, _ := strconv.Atoi(q.Get("resourceVersion"))
	var first []map[string]any
	for _, o := range s.history {
		rv, _ := strconv.Atoi(o["metadata"].(map[string]any)["resourceVersion"].(string))
		if q.Get("sendInitialEvents") == "true" || rv > from {
			first = append(first, o)
		}
	}
	current := strconv.Itoa(s.rv)
	s.watchers[events] = true
	s.mu.Unlock()
	defer func() { s.mu.Lock(); delete(s.watchers, events); s.mu.Unlock() }()

	enc := json.NewEncoder(w)
	send := func(typ string, obj map[string]any) bool {
		if err := enc.Encode(map[string]any{"type": typ, "object": obj}); err != nil {
			return false
		}
		w.(http.Flusher).Flush()
		return true
	}
	for _, o := range first {
		send("ADDED", o)
	}
	if q.Get("sendInitialEvents") == "true" {
		send("BOOKMARK", map[string]any{"apiVersion": s.apiVersion, "kind": s.kind, "metadata": map[string]any{
			"resourceVersion": current, "annotations": map[string]any{"k8s.io/initial-events-end": "true"}}})
	}
	w.(http.Flusher).Flush()
	for {
		select {
		case o := <-events:
			if !send("ADDED", o) {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

// A resource outside the factory's table is listed and watched at its own
// group version's path on a real clientset, preferring protobuf as the
// typed clients do, and waits for freshness.
func TestResourcesOutsideTheFloorOverHTTP(t *testing.T) {
	for _, gvr := range served(t) {
		t.Run(gvr.Group, func(t *testing.T) {
			s := newOneResourceServer(t, gvr)
			srv := httptest.NewServer(s)
			defer srv.Close()
			s.add("before")
			client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			f := cache.NewSharedInformerFactory(client, 0)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer func() { cancel(); f.Shutdown(); srv.CloseClientConnections() }()
			generic, err := f.ForResource(gvr)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := cache.FreshInformerOf(generic.Informer()); !ok {
				t.Fatalf("ForResource(%v) is not a FreshInformer", gvr)
			}
			f.Start(ctx.Done())
			for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
				if !ok {
					t.Fatalf("%v did not sync", typ)
				}
			}
			if _, err := generic.Lister().ByNamespace("ns").Get("before"); err != nil {
				t.Fatalf("the listed object is not in the cache: %v", err)
			}
			rv := s.add("after")
			if err := f.WaitForFreshness(ctx, gvr, rv); err != nil {
				t.Fatal(err)
			}
			if _, err := generic.Lister().ByNamespace("ns").Get("after"); err != nil {
				t.Fatalf("fresh at %s but the watched object is not in the cache: %v", rv, err)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, p := range s.paths {
				if !strings.HasPrefix(p, "/apis/"+gvr.Group+"/"+gvr.Version+"/"+gvr.Resource+" ") || !strings.Contains(p, "protobuf") {
					t.Errorf("request %q: want the resource's path, preferring protobuf", p)
				}
			}
		})
	}
}
