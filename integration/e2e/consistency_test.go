package e2e

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/consistency"
	"github.com/freshinformer/freshinformer/integration/testenv"
)

// outcomes is a consistency.Metrics that counts EnsureReady's outcomes.
type outcomes struct {
	mu sync.Mutex
	n  map[consistency.Outcome]int
}

func (o *outcomes) ObserveEnsureReady(out consistency.Outcome, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n[out]++
}
func (*outcomes) ObserveSkip(schema.GroupResource)    {}
func (*outcomes) ObserveFreshAfterSkip(time.Duration) {}

func (o *outcomes) get(out consistency.Outcome) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[out]
}

// consistency.Store as a controller meets it on the real control plane,
// with its default wait: the drop-in factory's getter, the store, Start,
// and at once a write followed by EnsureReady, without waiting for the
// sync. Each EnsureReady returns nil with the write in the indexer, or a
// *ConsistencyError (a skip); a skipped owner is handed to WithOnFresh
// once the cache holds the write, and its next EnsureReady is nil. A write
// the server never reached (a resource version beyond it, as an etcd
// restore leaves) skips, then is found lost by one consistent read and
// dropped: the owner proceeds instead of being skipped for ever.
func TestConsistencyStoreOnTheRealServer(t *testing.T) {
	cs := testenv.Clientset(t)
	ns := testenv.Namespace(t)
	ctx := testenv.Context(t, time.Minute)
	gr := schema.GroupResource{Resource: "configmaps"}

	factory := cache.NewSharedInformerFactory(cs, 0, cache.WithNamespace(ns))
	informer := factory.Core().V1().ConfigMaps().Informer()
	fresh := make(chan types.NamespacedName, 64)
	m := &outcomes{n: map[consistency.Outcome]int{}}
	store := consistency.NewStore(factory, consistency.WithMetrics(m),
		consistency.WithLostWriteCheck(200*time.Millisecond),
		consistency.WithOnFresh(func(o types.NamespacedName) { fresh <- o }))
	fctx, stopFactory := context.WithCancel(ctx)
	defer factory.Shutdown()
	defer stopFactory() // before Shutdown, which waits for the informers to stop
	factory.Start(fctx.Done())

	for i := range 20 {
		owner := types.NamespacedName{Namespace: ns, Name: "owner-" + strconv.Itoa(i)}
		cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "written-"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		store.WroteAt(owner, types.UID("uid-"+strconv.Itoa(i)), gr, cm.ResourceVersion)
		err = store.EnsureReady(owner)
		var ce *consistency.ConsistencyError
		switch {
		case err == nil:
		case errors.As(err, &ce):
			if ce.WroteRV != cm.ResourceVersion || ce.GroupResource != gr {
				t.Fatalf("skip of %s: %+v, want the write %s of %s", owner, ce, cm.ResourceVersion, gr)
			}
			select {
			case got := <-fresh:
				if got != owner {
					t.Fatalf("WithOnFresh got %s, want %s", got, owner)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("skipped owner %s never handed back", owner)
			}
			if err := store.EnsureReady(owner); err != nil {
				t.Fatalf("EnsureReady(%s) after WithOnFresh = %v, want nil", owner, err)
			}
		default:
			t.Fatalf("EnsureReady(%s) = %v, want nil or a *ConsistencyError", owner, err)
		}
		if _, ok, _ := informer.GetIndexer().GetByKey(ns + "/" + cm.Name); !ok {
			t.Fatalf("EnsureReady(%s) let the sync proceed without %s in the indexer", owner, cm.Name)
		}
	}

	lost := types.NamespacedName{Namespace: ns, Name: "lost"}
	store.WroteAt(lost, "uid-lost", gr, "987654321")
	var ce *consistency.ConsistencyError
	if err := store.EnsureReady(lost); !errors.As(err, &ce) {
		t.Fatalf("EnsureReady for a write beyond the server = %v, want a skip first", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := store.EnsureReady(lost)
		if err == nil {
			break
		}
		if !errors.As(err, &ce) {
			t.Fatalf("EnsureReady for a write beyond the server = %v, want a skip or nil", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("a write beyond the server still skips its owner after 10s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if m.get(consistency.OutcomeLost) != 1 {
		t.Errorf("outcome lost counted %d times, want 1", m.get(consistency.OutcomeLost))
	}
}
