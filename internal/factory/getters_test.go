package factory_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
)

// Asking for an informer and then registering types in client-go's scheme
// (as every NewController of a process with several controllers does) is
// race-free: a getter leaves nothing running that reads the scheme later.
// Run under -race.
func TestGetterThenSchemeRegistrationIsRaceFree(t *testing.T) {
	client, err := kubernetes.NewForConfig(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		f := cache.NewSharedInformerFactory(client, 0)
		f.Apps().V1().Deployments().Informer()
		f.Core().V1().ConfigMaps().Lister()
		metav1.AddToGroupVersion(scheme.Scheme, schema.GroupVersion{Group: fmt.Sprintf("race%d.getters.example.com", i), Version: "v1"})
	}
}

// runRecorder is an informer whose Run records that someone ran it.
type runRecorder struct {
	toolscache.SharedIndexInformer
	ran *atomic.Int32
}

func (r runRecorder) Run(stop <-chan struct{}) { r.ran.Add(1); r.SharedIndexInformer.Run(stop) }
func (r runRecorder) RunWithContext(ctx context.Context) {
	r.ran.Add(1)
	r.SharedIndexInformer.RunWithContext(ctx)
}

// hangingServer counts the requests it gets and answers none until the
// test ends.
func hangingServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var requests atomic.Int32
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		select {
		case <-done:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(done); srv.CloseClientConnections(); srv.Close() })
	return srv, &requests
}

// The typed factory's InformerFor sends nothing, runs nothing and returns
// at once whatever newFunc does: here it lists through a client of its own,
// pointed at a server that never answers, and a concurrent getter of
// another kind is not held up behind it.
func TestInformerForDoesNoIOAndRunsNothing(t *testing.T) {
	srv, requests := hangingServer(t)
	own, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int32
	ownClient := func(_ kubernetes.Interface, resync time.Duration) toolscache.SharedIndexInformer {
		return runRecorder{coreinformers.NewPodInformer(own, "", resync, toolscache.Indexers{}), &ran}
	}
	handedClient := func(c kubernetes.Interface, resync time.Duration) toolscache.SharedIndexInformer {
		return runRecorder{coreinformers.NewFilteredSecretInformer(c, "ns", resync, toolscache.Indexers{},
			func(o *metav1.ListOptions) { o.LabelSelector = "a=b" }), &ran}
	}
	f := cache.NewSharedInformerFactory(fake.NewClientset(), 0)
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() { f.InformerFor(&corev1.Pod{}, ownClient) })
	wg.Go(func() { f.InformerFor(&corev1.Secret{}, handedClient) })
	wg.Go(func() { f.InformerFor(&crdInClientGoScheme{}, ownClient) })
	wg.Go(func() { f.Core().V1().ConfigMaps().Informer() })
	wg.Wait()
	if d := time.Since(start); d > time.Second {
		t.Errorf("the getters took %v", d)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("the getters sent %d requests", n)
	}
	if n := ran.Load(); n != 0 {
		t.Errorf("the getters ran newFunc's informer %d times", n)
	}
}

// crdInClientGoScheme is a custom resource's type that a program put into
// client-go's scheme, as sample-controller does with samplescheme.AddToScheme.
type crdInClientGoScheme struct{ corev1.ConfigMap }

func init() {
	scheme.Scheme.AddKnownTypeWithName(schema.GroupVersionKind{Group: "getters.example.com", Version: "v1", Kind: "Thing"}, &crdInClientGoScheme{})
}

// The getters of both factories start no goroutine: client-go's start
// nothing until Start either.
func TestGettersStartNoGoroutine(t *testing.T) {
	typed := cache.NewSharedInformerFactory(fake.NewClientset(), 0, cache.WithNamespace("ns"))
	dyn := cache.NewDynamicSharedInformerFactory(dynamicfake.NewSimpleDynamicClient(scheme.Scheme), 0)
	before := goroutineIDs()
	for range 3 {
		typed.Core().V1().Pods().Informer()
		typed.Apps().V1().Deployments().Lister()
		typed.Rbac().V1().ClusterRoles().Informer()
		if _, err := typed.ForResource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}); err != nil {
			t.Fatal(err)
		}
		typed.InformerFor(&appsv1.StatefulSet{}, func(c kubernetes.Interface, resync time.Duration) toolscache.SharedIndexInformer {
			return coreinformers.NewPodInformer(c, "", resync, nil)
		})
		dyn.ForResource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}).Lister()
	}
	for id, stack := range goroutineIDs() {
		if _, ok := before[id]; !ok {
			t.Errorf("a getter started goroutine %s:\n%s", id, stack)
		}
	}
}

// goroutineIDs returns the live goroutines' stacks by ID.
func goroutineIDs() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	ids := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if id, _, ok := strings.Cut(strings.TrimPrefix(g, "goroutine "), " "); ok {
			ids[id] = g
		}
	}
	return ids
}
