package cache

import (
	"context"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/freshinformer/freshinformer/reflector"
)

// Issue 14: etcd restored without --bump-revision while the informer had no
// watch open (its Reflector was backing off after a stream ended with an
// error; no request had failed, as the apiserver restarted in between). The
// next write comes back at a resource version the old stream delivered:
// the write is verified with a consistent read, the restore is declared,
// and WaitForFreshness does not call it fresh before the relist brings it.
func TestWriteBetweenWatchesIsVerified(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode streamMode) {
		regs := newRegressionLog()
		inf, lw, w := startScripted(t, mode, listResponse{rv: "10"}, WithRegressionHandler(regs.handle))
		w.Add(cm("a", "56"))
		w.Add(cm("b", "100"))
		waitFresh(t, inf, "100")
		// etcd restored at 55: a@40, and the next write, new@56.
		lw.queueLists(listResponse{rv: "56", objects: []*corev1.ConfigMap{cm("a", "40"), cm("new", "56")}})
		// The stream ends with an error (not 410): the Reflector stops it
		// and backs off (800 ms or more) before it lists again.
		w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable, Message: "apiserver shutting down"})
		eventually(t, "the Reflector to stop the stream", w.IsStopped)
		if err := inf.RecordWrite("56"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := inf.WaitForFreshness(ctx, "56"); err != nil {
			t.Fatalf("WaitForFreshness(56) = %v", err)
		}
		if got := cached(inf, "new"); got != "56" {
			t.Fatalf("WaitForFreshness(56) returned nil, but the write at 56 is not cached (new=%q, a=%q, at %s)", got, cached(inf, "a"), inf.LastObservedResourceVersion())
		}
		r := regs.next(t)
		if r.Reason != reflector.RegressionServerBehind || r.Floor != "100" {
			t.Fatalf("regression %+v", r)
		}
		if s := inf.Stats(); s.Regressions != 1 || s.RestoreProbes != 1 {
			t.Fatalf("stats %+v: want one probe, one regression", s)
		}
	})
}
