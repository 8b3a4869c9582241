package main

import (
	"context"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshtest"
	"github.com/freshinformer/freshinformer/readyourwrites"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recordFakeWrites records every configmap write the fake clientset
// answers on behalf of owner: the fake does not go through HTTP, so it
// stands in for the writes transport of a real client.
func recordFakeWrites(t *testing.T, fake *k8stesting.Fake, ryw *readyourwrites.ReadYourWrites, owner func() readyourwrites.Owner) {
	chain := fake.ReactionChain
	gr := schema.GroupResource{Resource: "configmaps"}
	fake.ReactionChain = []k8stesting.Reactor{&k8stesting.SimpleReactor{Verb: "*", Resource: "*",
		Reaction: func(a k8stesting.Action) (bool, runtime.Object, error) {
			for _, r := range chain {
				if !r.Handles(a) {
					continue
				}
				handled, obj, err := r.React(a)
				if !handled {
					continue
				}
				if cm, ok := obj.(*corev1.ConfigMap); ok && err == nil && (a.GetVerb() == "create" || a.GetVerb() == "update") && cm.Labels["role"] != "parent" {
					if err := ryw.Record(owner(), gr, cm); err != nil {
						t.Error(err)
					}
				}
				return handled, obj, err
			}
			return false, nil, nil
		}}}
}

// The controller's unit test on a fake clientset: the fake (freshtest)
// stamps resource versions and answers stale updates with 409 Conflict as
// a server does, so a reconcile that read a stale child would show up as a
// conflict. With read-your-writes there is none, in each mode.
func TestControllerOnFakeClientset(t *testing.T) {
	for _, mode := range []string{"requeue", "ensure", "backoff"} {
		t.Run(mode, func(t *testing.T) {
			const target = 30
			client := freshtest.NewClientset(&corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "parent", Labels: map[string]string{"role": "parent"}},
				Data:       map[string]string{"target": strconv.Itoa(target)},
			})
			factory := cache.NewSharedInformerFactory(client, 0, cache.WithNamespace("ns"))
			ryw := readyourwrites.New(factory, 10*time.Second)
			c, err := newController(client, factory, ryw, mode)
			if err != nil {
				t.Fatal(err)
			}
			defer c.rq.ShutDown()
			recordFakeWrites(t, &client.Fake, ryw, func() readyourwrites.Owner {
				p, err := c.lister.ConfigMaps("ns").Get("parent")
				if err != nil {
					t.Error(err)
					return readyourwrites.Owner{}
				}
				return readyourwrites.OwnerOf(p)
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer func() { cancel(); factory.Shutdown() }()
			factory.Start(ctx.Done())
			if err := factory.WaitForCacheSyncWithContext(ctx).AsError(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				for c.next(ctx) {
				}
			}()
			for {
				child, err := client.CoreV1().ConfigMaps("ns").Get(ctx, "parent-child", metav1.GetOptions{})
				if err == nil && child.Data["count"] == strconv.Itoa(target) {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("the child did not reach %d: %v %v", target, child, err)
				}
				time.Sleep(5 * time.Millisecond)
			}
			c.queue.ShutDown()
			<-done
			if n := c.conflicts.Load(); n != 0 {
				t.Fatalf("%d conflicts (stale reads) with read-your-writes on", n)
			}
			if n := c.writes.Load(); n != target+1 {
				t.Fatalf("%d writes, want %d", n, target+1)
			}
			if mode == "requeue" && c.blockedNanos.Load() != 0 {
				t.Fatal("a worker blocked in requeue mode")
			}
		})
	}
}
