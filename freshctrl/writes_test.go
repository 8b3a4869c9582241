package freshctrl

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/freshinformer/freshinformer/readyourwrites"
)

// TestApplyIsRecorded: a server-side apply's response (filled into the
// apply configuration) is recorded like any write: a later Get waits for
// its resource version, keyed, labelled and scoped as the object.
func TestApplyIsRecorded(t *testing.T) {
	// Only writes labelled app=web are seen: the apply's labels route it.
	inf := startInformer(t, Scope{Namespace: "a", Labels: labels.SelectorFromSet(labels.Set{"app": "web"})}, "900")
	c := newTestClient(t, time.Hour, []*testInformer{inf})
	ac := corev1ac.ConfigMap("x", "a").WithResourceVersion("1234").WithLabels(map[string]string{"app": "web"})
	c.recordApplied(ac)
	err := c.Get(context.Background(), types.NamespacedName{Namespace: "a", Name: "x"}, &corev1.ConfigMap{}, FailIfNotFresh)
	var nf *readyourwrites.NotFreshError
	if !errors.As(err, &nf) || nf.Written != "1234" {
		t.Fatalf("got %v, want the cache behind 1234", err)
	}
}

// TestDeleteAllOfWaitsForTheServersVersion: DeleteAllOf returns no
// resource version; the client asks the server for its current one and
// later reads in that namespace wait for it, reads elsewhere do not.
func TestDeleteAllOfWaitsForTheServersVersion(t *testing.T) {
	nsA := startInformer(t, Scope{Namespace: "a"}, "900")
	nsB := startInformer(t, Scope{Namespace: "b"}, "900")
	c := newTestClient(t, time.Hour, []*testInformer{nsA, nsB}, cm("a", "x", "", nil), cm("a", "y", "", nil))
	nsA.lw.setRV("4000")
	if err := c.DeleteAllOf(context.Background(), &corev1.ConfigMap{}, client.InNamespace("a")); err != nil {
		t.Fatal(err)
	}
	err := c.List(context.Background(), &corev1.ConfigMapList{}, client.InNamespace("a"), FailIfNotFresh)
	var nf *readyourwrites.NotFreshError
	if !errors.As(err, &nf) || nf.Written != "4000" || nf.Name != "ns=a" {
		t.Fatalf("List in a: got %v, want ns=a behind 4000", err)
	}
	if err := c.List(context.Background(), &corev1.ConfigMapList{}, client.InNamespace("b"), FailIfNotFresh); err != nil {
		t.Fatalf("List in b: %v", err)
	}
	bm := &corev1.ConfigMap{}
	bm.ResourceVersion = "4000"
	nsA.lw.w.Action(watch.Bookmark, bm)
	if err := c.List(waitCtx(t), &corev1.ConfigMapList{}, client.InNamespace("a")); err != nil {
		t.Fatalf("List in a after the bookmark: %v", err)
	}
}

// TestDeleteAllOfProbeIsBounded: the server's resource version after a
// DeleteAllOf is asked for within the client's timeout, even when the
// caller's context has no deadline.
func TestDeleteAllOfProbeIsBounded(t *testing.T) {
	nsA := startInformer(t, Scope{Namespace: "a"}, "900")
	c := newTestClient(t, 100*time.Millisecond, []*testInformer{nsA}, cm("a", "x", "", nil))
	nsA.lw.blockLists()
	done := background(func() error {
		return c.DeleteAllOf(context.Background(), &corev1.ConfigMap{}, client.InNamespace("a"))
	})
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want the probe's deadline", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("DeleteAllOf still asking an unresponsive server")
	}
}
