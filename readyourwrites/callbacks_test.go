package readyourwrites

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/reflector"
)

// Freshness callbacks (AfterFreshness, and so WhenFresh and package
// requeue) run where user code may record writes: Record and Wrote called
// from one at RV 11 return, and the informer goes on applying events (13)
// afterwards.
func TestRecordFromAFreshnessCallback(t *testing.T) {
	calls := map[string]func(inf *cache.FreshInformer) error{
		"Record": func(inf *cache.FreshInformer) error {
			ryw := New(cache.InformerList{inf}, time.Second)
			return ryw.Record(Owner{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "owner"}}, configMapsResource, cm("b", "12"))
		},
		"Wrote": func(inf *cache.FreshInformer) error {
			ryw := New(cache.InformerList{inf}, time.Second)
			return ryw.Wrote(Owner{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "owner"}}, cm("b", "12"), nil)
		},
		"CheckFresh": func(inf *cache.FreshInformer) error {
			ryw := New(cache.InformerList{inf}, time.Second)
			o := owner("p", "1")
			if err := ryw.Record(o, configMapsResource, cm("a", "11")); err != nil {
				return err
			}
			return ryw.CheckFresh(o)
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			inf, _, w := startScripted(t, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5")}})
			result := make(chan error, 1)
			inf.AfterFreshness("11", func(err error) {
				if err != nil {
					result <- err
					return
				}
				result <- call(inf)
			})
			w.Modify(cm("a", "11"))
			select {
			case err := <-result:
				if err != nil {
					t.Fatalf("%s from the callback: %v", name, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s from a freshness callback did not return: the informer is wedged", name)
			}
			w.Modify(cm("a", "13"))
			waitFresh(t, inf, "13")
			if got := cached(inf, "a"); got != "13" {
				t.Fatalf("a cached at %q after the event at 13", got)
			}
		})
	}
}

// Record reports each write's key to its informers, so writes recorded
// through it (and through the writes transport and freshctrl, which use
// it) are declared when a restore loses them.
func TestRecordedWritesAreDeclaredLost(t *testing.T) {
	regs := make(chan reflector.Regression, 4)
	inf, lw, w := startScripted(t, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5")}},
		cache.WithRegressionHandler(func(r reflector.Regression) { regs <- r }), cache.WithQuietProbeDelay(-1))
	ryw := New(cache.InformerList{inf}, 20*time.Second)
	o := Owner{GroupKind: schema.GroupKind{Kind: "Owner"}, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "o"}, UID: "u"}
	if err := ryw.Record(o, configMapsResource, cm("a", "300")); err != nil {
		t.Fatal(err)
	}
	lw.queueLists(listResponse{rv: "1000000400", objects: []*corev1.ConfigMap{cm("a", "5")}})
	gone := apierrors.NewResourceExpired("too old resource version").Status()
	w.Error(&gone)
	select {
	case r := <-regs:
		if r.Reason != reflector.RegressionWritesLost || r.WritesLost != 1 {
			t.Fatalf("regression %+v", r)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no regression declared")
	}
}
