package cache

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// Freshness callbacks (AfterFreshness, and so WhenFresh and requeue) run
// where user code may call back into the informer: each entry point a
// callback may reasonably call is called from one at RV 11, and the
// informer must go on applying events (13) afterwards.
func TestFreshnessCallbacksMayCallBackIntoTheInformer(t *testing.T) {
	calls := map[string]func(t *testing.T, inf *FreshInformer) error{
		"RecordWrite": func(_ *testing.T, inf *FreshInformer) error { return inf.RecordWrite("12") },
		"RecordWrittenObject": func(_ *testing.T, inf *FreshInformer) error {
			return inf.RecordWrittenObject(cm("b", "12"))
		},
		"AddEventHandler": func(_ *testing.T, inf *FreshInformer) error {
			_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{})
			return err
		},
		"AddIndexers": func(_ *testing.T, inf *FreshInformer) error {
			return inf.AddIndexers(toolscache.Indexers{"by-ns": toolscache.MetaNamespaceIndexFunc})
		},
		"WaitForFreshness of a reached RV": func(_ *testing.T, inf *FreshInformer) error {
			return inf.WaitForFreshness(context.Background(), "11")
		},
		"AfterFreshness": func(_ *testing.T, inf *FreshInformer) error {
			var inner error = errors.New("not run")
			inf.AfterFreshness("11", func(err error) { inner = err })
			return inner
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			inf, _, w := startScripted(t, listThenWatch, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5")}})
			result := make(chan error, 1)
			inf.AfterFreshness("11", func(err error) {
				if err != nil {
					result <- err
					return
				}
				result <- call(t, inf)
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

// A panic while applying (here a user's IndexFunc) must not leave the
// informer's apply lock held: with utilruntime.ReallyCrash off, client-go's
// process loop reports it and goes on, and so must the informer, and
// RecordWrite (every write through the writes transport) must not block.
func TestPanicWhileApplyingDoesNotWedgeTheInformer(t *testing.T) {
	panics := withoutReallyCrash(t)
	inf, _, w := startScripted(t, listThenWatch, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5")}})
	err := inf.AddIndexers(toolscache.Indexers{"explodes": func(obj any) ([]string, error) {
		if name(obj) == "boom" {
			panic("index function panics on boom")
		}
		return nil, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	w.Add(cm("boom", "11"))
	// The batch that panicked is lost, as with client-go's informer; what
	// comes after it must be applied.
	deadline := time.Now().Add(10 * time.Second)
	for len(panics()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("panic handlers never heard of the IndexFunc's panic")
		}
		time.Sleep(5 * time.Millisecond)
	}
	w.Modify(cm("a", "12"))
	waitFresh(t, inf, "12")
	if got := cached(inf, "a"); got != "12" {
		t.Fatalf("a cached at %q after the panic, want 12", got)
	}
	recorded := make(chan error, 1)
	go func() { recorded <- inf.RecordWrite("20") }()
	select {
	case err := <-recorded:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RecordWrite blocked after a panic while applying")
	}
}
