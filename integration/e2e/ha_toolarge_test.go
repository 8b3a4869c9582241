package e2e

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/integration/testenv"
)

// A wait for a resource version no server has reached fails with
// freshness.ErrTooLargeResourceVersion also when the informer is small and
// quiet, so that its probe takes the snapshot route and the snapshot
// matches the cache (it proves the cache fresh at the server's resource
// version, and that same consistent read shows the target beyond it).
// Scenario 2 of docs/ha.md found it: after a frozen replica resumed, its
// stream caught up before the probe's list answered, and the wait for an
// unreached resource version waited out its context instead.
func TestWaitBeyondTheServerOnAQuietSmallInformer(t *testing.T) {
	cs := testenv.Clientset(t)
	ns := testenv.Namespace(t)
	ctx := testenv.Context(t, 2*time.Minute)
	for i := range 3 {
		if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s-" + strconv.Itoa(i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	inf := startInformerWith(t, cs, ns)
	l, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	now, err := strconv.ParseUint(l.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	target := strconv.FormatUint(now+1_000_000, 10)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	err = inf.WaitForFreshness(wctx, target)
	if !errors.Is(err, freshness.ErrTooLargeResourceVersion) {
		t.Fatalf("WaitForFreshness(%s) with the server near %d = %v after %v (probes %+v), want ErrTooLargeResourceVersion",
			target, now, err, time.Since(start).Round(time.Millisecond), inf.ProbeStats())
	}
	t.Logf("failed with %v after %v", err, time.Since(start).Round(time.Millisecond))
}
