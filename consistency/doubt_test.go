package consistency_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/consistency"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/freshtest"
)

// After an apiserver restart or an etcd restore, an informer's cache is in
// doubt until it shows the server did not go back (or relists from the
// restored one). A sync that reads it meanwhile may act on a history the
// server lost: after a restore, the ReplicaSet controller read its pods
// from one cache already relisted and its ReplicaSets from one still
// holding the lost spec, and created pods beyond the minimum. EnsureReady
// holds every owner then, those with nothing recorded too, naming the
// informer in doubt; the sync proceeds once that cache is trusted again.
func TestEnsureReadyHoldsWhileACacheIsInDoubt(t *testing.T) {
	client := freshtest.NewClientset()
	var down atomic.Bool // the apiserver is gone: lists and watches of pods fail
	var mu sync.Mutex
	var streams []watch.Interface
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if down.Load() {
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	client.PrependWatchReactor("pods", func(a k8stesting.Action) (bool, watch.Interface, error) {
		if down.Load() {
			return true, nil, errors.New("connection refused")
		}
		w, err := client.Tracker().Watch(a.GetResource(), a.GetNamespace(), a.(k8stesting.WatchActionImpl).ListOptions)
		if err == nil {
			mu.Lock()
			streams = append(streams, w)
			mu.Unlock()
		}
		return true, w, err
	})
	f := cache.NewSharedInformerFactory(client, 0)
	f.Core().V1().Pods().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	t.Cleanup(func() { cancel(); f.Shutdown() })
	f.WaitForCacheSync(ctx.Done())
	pods := f.FreshInformersForResource(podsGR)[0]

	m := newRecorder()
	var backMu sync.Mutex
	handedBack := map[types.NamespacedName]int{}
	s := consistency.NewStore(f, consistency.WithMetrics(m), consistency.WithMaxWait(10*time.Millisecond),
		consistency.WithOnFresh(func(o types.NamespacedName) { backMu.Lock(); handedBack[o]++; backMu.Unlock() }))
	p, err := client.CoreV1().Pods("ns").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.WroteAt(owner, "uid1", podsGR, p.ResourceVersion)
	eventually(t, "the owner ready once the cache holds its write", func() bool { return s.EnsureReady(owner) == nil })

	// The apiserver goes away: the server ends the stream, and the
	// informer's next requests fail.
	down.Store(true)
	mu.Lock()
	for _, w := range streams {
		w.Stop()
	}
	mu.Unlock()
	eventually(t, "the pod cache in doubt", func() bool { return pods.CheckFreshness(p.ResourceVersion) != nil })

	other := types.NamespacedName{Namespace: "ns", Name: "other"}   // nothing recorded for it
	for _, o := range []types.NamespacedName{owner, other, owner} { // skipped twice: handed back once
		err := s.EnsureReady(o)
		var ce *consistency.ConsistencyError
		if !errors.As(err, &ce) || !errors.Is(err, freshness.ErrNotFresh) {
			t.Fatalf("EnsureReady(%v) = %v while the pod cache is in doubt, want a *ConsistencyError", o, err)
		}
		if ce.InformerName != pods.Name() || ce.GroupResource != podsGR || ce.Owner != o || ce.ReadRV == "" {
			t.Errorf("EnsureReady(%v): %+v, want the pod informer %q named, at the version it shows", o, ce, pods.Name())
		}
	}
	if n := m.count(consistency.OutcomeSkipped); n != 3 {
		t.Errorf("outcomes %v, want three skipped", m.outcomes)
	}

	down.Store(false) // back: the informer relists and is trusted again
	eventually(t, "both owners handed back once the cache is trusted", func() bool {
		backMu.Lock()
		defer backMu.Unlock()
		return handedBack[owner] > 0 && handedBack[other] > 0
	})
	for _, o := range []types.NamespacedName{owner, other} {
		if err := s.EnsureReady(o); err != nil {
			t.Errorf("EnsureReady(%v) = %v once the cache is trusted again", o, err)
		}
	}
	backMu.Lock()
	defer backMu.Unlock()
	if handedBack[owner] != 1 || handedBack[other] != 1 {
		t.Errorf("owners handed back %v, want each once", handedBack)
	}
}

// A cache that never synced holds no history to doubt: a controller's unit
// test that fills its listers by hand and never starts the informers
// syncs at once, as before.
func TestEnsureReadyDoesNotHoldForInformersNeverStarted(t *testing.T) {
	client := freshtest.NewClientset()
	f := cache.NewSharedInformerFactory(client, 0)
	f.Core().V1().Pods().Informer() // never started
	s := consistency.NewStore(f, consistency.WithMaxWait(time.Second))
	s.WroteAt(owner, "uid1", podsGR, "5")
	start := time.Now()
	if err := s.EnsureReady(types.NamespacedName{Namespace: "ns", Name: "other"}); err != nil {
		t.Fatalf("EnsureReady = %v for an owner with nothing recorded, its informers never started", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("EnsureReady took %v", d)
	}
}
