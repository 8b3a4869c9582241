package fake_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/freshinformer/freshinformer/freshctrl"
	"github.com/freshinformer/freshinformer/freshctrl/fake"
	"github.com/freshinformer/freshinformer/stalereads"
)

// counter counts a child ConfigMap up by one per reconcile. The naive one
// reads the child from the cache itself right after its own writes
// (reader: the manager's GetCache), so it never waits for them; the
// careful one reads through freshctrl's client, which does.
type counter struct {
	client.Client               // writes: recorded by freshctrl's client
	reader        client.Reader // reads
	conflicts     int
}

func (r *counter) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var child corev1.ConfigMap
	err := r.reader.Get(ctx, req.NamespacedName, &child)
	switch {
	case apierrors.IsNotFound(err):
		child = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name}, Data: map[string]string{"count": "0"}}
		err = r.Create(ctx, &child)
	case err == nil:
		n, _ := strconv.Atoi(child.Data["count"])
		child.Data = map[string]string{"count": strconv.Itoa(n + 1)}
		err = r.Update(ctx, &child)
	}
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		r.conflicts++ // it read stale state: the server says so
		return reconcile.Result{RequeueAfter: time.Millisecond}, nil
	}
	return reconcile.Result{}, err
}

type collected struct {
	mu  sync.Mutex
	got []stalereads.Report
}

func (c *collected) add(r stalereads.Report) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, r)
}

func (c *collected) take() []stalereads.Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.got
	c.got = nil
	return g
}

// With the informers paused, every reconcile of the naive counter after
// its first write reads the child it wrote before, older: the detector
// reports each one (and the server answers each update with a conflict);
// the counter that reads through freshctrl's client, with the informers
// resumed, reads nothing stale.
func TestNaiveReconcilerStaleWithPausedInformers(t *testing.T) {
	ctx := waitCtx(t)
	got := &collected{}
	c := newClient(t, fake.NewClientBuilder().WithOptions(freshctrl.Options{DisableMetrics: true, OnStaleRead: got.add}))
	req := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "child"}}
	naive := &counter{Client: c, reader: c.Cache()}
	if _, err := naive.Reconcile(ctx, req); err != nil { // creates it
		t.Fatal(err)
	}
	var written corev1.ConfigMap
	if err := c.Get(ctx, req.NamespacedName, &written); err != nil { // waits: the cache holds the create
		t.Fatal(err)
	}
	c.PauseInformers()
	if _, err := naive.Reconcile(ctx, req); err != nil { // reads the create, writes count=1
		t.Fatal(err)
	}
	if r := got.take(); len(r) != 0 {
		t.Fatalf("the read of a write the cache had applied was reported: %v", r)
	}
	var updated corev1.ConfigMap
	if err := c.Server().Get(ctx, req.NamespacedName, &updated); err != nil {
		t.Fatal(err)
	}
	const stale = 3
	for range stale {
		if _, err := naive.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	reports := got.take()
	if len(reports) != stale || naive.conflicts != stale {
		t.Fatalf("%d reports and %d conflicts for %d stale reads: %v", len(reports), naive.conflicts, stale, reports)
	}
	for _, r := range reports {
		if r.Kind != stalereads.ReadOlder || r.Key != "ns/child" || r.ResourceVersion != written.ResourceVersion || r.WrittenResourceVersion != updated.ResourceVersion {
			t.Errorf("report: %s", r)
		}
	}

	c.ResumeInformers()
	careful := &counter{Client: c, reader: c}
	for range 5 {
		if _, err := careful.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if r := got.take(); len(r) != 0 || careful.conflicts != 0 {
		t.Fatalf("reading through freshctrl's client: %d conflicts, reports %v", careful.conflicts, r)
	}
}

// PauseInformersFor lags the cache for a while, then lets it catch up by
// itself.
func TestPauseInformersFor(t *testing.T) {
	ctx := waitCtx(t)
	got := &collected{}
	c := newClient(t, fake.NewClientBuilder().WithObjects(configMap("ns", "cm", nil)).WithOptions(freshctrl.Options{DisableMetrics: true, OnStaleRead: got.add}))
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "cm"}, &cm); err != nil {
		t.Fatal(err)
	}
	c.PauseInformersFor(300 * time.Millisecond)
	cm.Data = map[string]string{"k": "v"}
	if err := c.Update(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	var read corev1.ConfigMap
	if err := c.Cache().Get(ctx, client.ObjectKeyFromObject(&cm), &read); err != nil {
		t.Fatal(err)
	}
	if r := got.take(); len(r) != 1 || read.Data["k"] == "v" {
		t.Fatalf("while paused: read %v, reports %v", read.Data, r)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(&cm), &read); err != nil || read.Data["k"] != "v" { // waits for the resume
		t.Fatalf("after the pause: %v, %v", read.Data, err)
	}
}

// fakeTB records what FailOnStaleReads does with a test.
type fakeTB struct {
	testing.TB
	mu       sync.Mutex
	errors   []string
	cleanups []func()
}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

func TestFailOnStaleReads(t *testing.T) {
	ctx := waitCtx(t)
	tb := &fakeTB{TB: t}
	c := newClient(t, fake.NewClientBuilder().WithObjects(configMap("ns", "cm", nil)).FailOnStaleReads(tb))
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "cm"}, &cm); err != nil {
		t.Fatal(err)
	}
	c.PauseInformers()
	cm.Data = map[string]string{"k": "v"}
	if err := c.Update(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	var list corev1.ConfigMapList
	if err := c.Cache().List(ctx, &list, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	tb.mu.Lock()
	errs := tb.errors
	tb.mu.Unlock()
	if len(errs) != 1 || !strings.Contains(errs[0], "WARNING: STALE READ") || !strings.Contains(errs[0], "ByIndex of configmaps ns/cm") {
		t.Fatalf("test errors: %q", errs)
	}
	c.ResumeInformers()
}
