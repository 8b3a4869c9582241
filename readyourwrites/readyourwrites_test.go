package readyourwrites

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
)

func TestReadYourWritesCheckAndEnsure(t *testing.T) {
	inf, _, w := startScripted(t, listResponse{rv: "10"}, cache.WithResource(configMapsResource))
	ryw := New(cache.InformerList{inf}, 0)
	o := owner("parent", "u1")

	if err := ryw.CheckFresh(o); err != nil {
		t.Fatalf("nothing written yet: %v", err)
	}
	if err := ryw.Record(o, configMapsResource, cm("child", "30")); err != nil {
		t.Fatal(err)
	}
	if err := ryw.Record(o, configMapsResource, cm("child", "20")); err != nil { // older: the newest stays
		t.Fatal(err)
	}
	err := ryw.CheckFresh(o)
	var nf *NotFreshError
	if !errors.Is(err, freshness.ErrNotFresh) || !errors.As(err, &nf) || nf.Written != "30" || nf.Observed != "10" || nf.Resource != configMapsResource {
		t.Fatalf("CheckFresh before the write is cached = %v", err)
	}

	done := make(chan error, 1)
	go func() { done <- ryw.EnsureFresh(context.Background(), o) }()
	w.Add(cm("child", "20"))
	select {
	case err := <-done:
		t.Fatalf("EnsureFresh returned %v at 20, before the newest write at 30", err)
	case <-time.After(50 * time.Millisecond):
	}
	w.Modify(cm("child", "30"))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if cached(inf, "child") != "30" {
		t.Fatal("EnsureFresh returned without the write in the cache")
	}
	if err := ryw.CheckFresh(o); err != nil {
		t.Fatalf("CheckFresh after catching up: %v", err)
	}
}

func TestReadYourWritesRecreatedOwnerDoesNotWait(t *testing.T) {
	inf, _, _ := startScripted(t, listResponse{rv: "10"}, cache.WithResource(configMapsResource))
	ryw := New(cache.InformerList{inf}, 0)
	if err := ryw.Record(owner("p", "old"), configMapsResource, cm("c", "99")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := ryw.EnsureFresh(ctx, owner("p", "new")); err != nil {
		t.Fatalf("a recreated owner waited for its predecessor: %v", err)
	}
	if err := ryw.CheckFresh(owner("p", "old")); err != nil {
		t.Fatalf("the predecessor's record survived the new owner: %v", err)
	}
	// Forget drops records.
	if err := ryw.Record(owner("q", "1"), configMapsResource, cm("c", "99")); err != nil {
		t.Fatal(err)
	}
	ryw.Forget(owner("q", "1"))
	if err := ryw.CheckFresh(owner("q", "1")); err != nil {
		t.Fatalf("after Forget: %v", err)
	}
}

func TestReadYourWritesDeletes(t *testing.T) {
	// The quiet-resource probe is off: it would ask the server once a wait
	// made no progress for its delay, and the delete's own wait is tested.
	inf, lw, w := startScripted(t, listResponse{rv: "10", objects: []*corev1.ConfigMap{withUID(cm("gone", "5"), "g1"), withUID(cm("late", "6"), "l1")}},
		cache.WithResource(configMapsResource), cache.WithQuietProbeDelay(-1))
	ryw := New(cache.InformerList{inf}, 0)
	o := owner("p", "1")

	ryw.RecordDelete(o, configMapsResource, withUID(cm("gone", ""), "g1"))
	var nf *NotFreshError
	if err := ryw.CheckFresh(o); !errors.As(err, &nf) || !nf.Deleted || nf.Key.Name != "gone" {
		t.Fatalf("CheckFresh with the deleted object cached = %v", err)
	}
	w.Delete(withUID(cm("gone", "12"), "g1"))
	waitFresh(t, inf, "12")
	if err := ryw.CheckFresh(o); err != nil {
		t.Fatalf("CheckFresh after the delete event: %v", err)
	}

	// The delete event has not arrived: EnsureFresh waits for it, without
	// asking the server for anything.
	ryw.RecordDelete(o, configMapsResource, withUID(cm("late", ""), "l1"))
	lists := lw.listCount()
	done := make(chan error, 1)
	go func() { done <- ryw.EnsureFresh(context.Background(), o) }()
	for inf.Stats().PendingWaiters == 0 { // waiting for the next change
		time.Sleep(time.Millisecond)
	}
	// The event comes later than the default probe delay, as it may on a
	// loaded machine, where the probe is on.
	time.Sleep(2 * cache.DefaultQuietProbeDelay)
	w.Delete(withUID(cm("late", "19"), "l1"))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if cached(inf, "late") != "" {
		t.Fatal("EnsureFresh returned with the deleted object cached")
	}
	if lw.listCount() != lists {
		t.Fatal("the delete wait asked the server for its resource version")
	}
}

func TestReadYourWritesErrors(t *testing.T) {
	inf, _, _ := startScripted(t, listResponse{rv: "10"}, cache.WithResource(configMapsResource),
		cache.WithSelector(cache.Selector{Namespace: "ns", Labels: labels.SelectorFromSet(labels.Set{"app": "x"})}))
	ryw := New(cache.InformerList{inf}, 30*time.Millisecond)
	o := owner("p", "1")

	labelled := func(c *corev1.ConfigMap) *corev1.ConfigMap { c.Labels = map[string]string{"app": "x"}; return c }
	if err := ryw.Record(o, configMapsResource, cm("c", "abc")); !errors.Is(err, freshness.ErrIncomparable) {
		t.Fatalf("malformed RV: %v", err)
	}
	if err := ryw.Record(o, configMapsResource, cm("unlabelled", "11")); !errors.Is(err, cache.ErrNotWatched) {
		t.Fatalf("object outside the label selector: %v", err)
	}
	other := labelled(cm("elsewhere", "11"))
	other.Namespace = "other"
	if err := ryw.Record(o, configMapsResource, other); !errors.Is(err, cache.ErrNotWatched) {
		t.Fatalf("object outside the namespace: %v", err)
	}
	if err := ryw.Record(o, schema.GroupResource{Resource: "secrets"}, labelled(cm("c", "11"))); !errors.Is(err, cache.ErrNoInformer) {
		t.Fatalf("resource without informer: %v", err)
	}
	if err := ryw.Wrote(o, nil, errors.New("conflict")); err == nil || err.Error() != "conflict" {
		t.Fatalf("Wrote with a failed write = %v", err)
	}

	// The default timeout bounds EnsureFresh; the error names what was waited for.
	if err := ryw.Record(o, configMapsResource, labelled(cm("c", "50"))); err != nil {
		t.Fatal(err)
	}
	err := ryw.EnsureFresh(context.Background(), o)
	var we *freshness.WaitError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &we) || we.Target != "50" || we.Current != "10" {
		t.Fatalf("EnsureFresh past the default timeout = %v", err)
	}
}

func TestReadYourWritesConcurrentOwners(t *testing.T) {
	inf, _, w := startScripted(t, listResponse{rv: "10"}, cache.WithResource(configMapsResource))
	ryw := New(cache.InformerList{inf}, 5*time.Second)
	const owners = 20
	var wg sync.WaitGroup
	for i := range owners {
		wg.Go(func() {
			o := owner(fmt.Sprintf("p%d", i), "u")
			rv := fmt.Sprint(11 + i)
			if err := ryw.Record(o, configMapsResource, cm(fmt.Sprintf("c%d", i), rv)); err != nil {
				t.Error(err)
				return
			}
			if err := ryw.EnsureFresh(context.Background(), o); err != nil {
				t.Error(err)
				return
			}
			if got := cached(inf, fmt.Sprintf("c%d", i)); got != rv {
				t.Errorf("owner %d fresh without its write (cached %q)", i, got)
			}
		})
	}
	for i := range owners {
		w.Add(cm(fmt.Sprintf("c%d", i), fmt.Sprint(11+i)))
	}
	wg.Wait()
}

// TestReadYourWritesKeepsDeletesRecordedWhileChecking: a delete recorded
// between a check and its settling must survive it.
func TestReadYourWritesKeepsDeletesRecordedWhileChecking(t *testing.T) {
	inf, _, _ := startScripted(t, listResponse{rv: "10", objects: []*corev1.ConfigMap{withUID(cm("kept", "5"), "k1")}},
		cache.WithResource(configMapsResource))
	ryw := New(cache.InformerList{inf}, 0)
	o := owner("p", "1")
	ryw.RecordDelete(o, configMapsResource, withUID(cm("already-gone", ""), "g1"))
	p := ryw.pending(o) // what a check sees
	ryw.RecordDelete(o, configMapsResource, withUID(cm("kept", ""), "k1"))
	ryw.settled(o, p) // the check found its delete fresh
	var nf *NotFreshError
	if err := ryw.CheckFresh(o); !errors.As(err, &nf) || !nf.Deleted || nf.Key.Name != "kept" {
		t.Fatalf("the delete recorded during the check was lost: %v", err)
	}
}
