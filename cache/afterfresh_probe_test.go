package cache

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/freshinformer/freshinformer/reflector"
)

// AfterFreshness (and so WhenFresh, requeue and freshctrl's Requeuer) is
// held back while a restore verification probe is in flight, as
// WaitForFreshness is: a write below the cache's resource version that the
// stream never delivered may come from a server restored without
// --bump-revision, and the cache "reached" it only on the lost history.
func TestAfterFreshnessWaitsForRestoreProbe(t *testing.T) {
	for _, restored := range []bool{true, false} {
		t.Run(fmt.Sprintf("restored=%v", restored), func(t *testing.T) {
			regs := newRegressionLog()
			inf, lw, w := startScripted(t, listThenWatch, listResponse{rv: "10"}, WithRegressionHandler(regs.handle), WithQuietProbeDelay(-1))
			w.Add(cm("a", "99"))
			w.Add(cm("b", "100"))
			waitFresh(t, inf, "100")
			release := lw.holdProbes()
			defer release()
			if restored { // etcd restored at revision 50; the new write came back at 55
				lw.queueLists(listResponse{rv: "60", objects: []*corev1.ConfigMap{cm("a", "40"), cm("new", "55")}})
			} else { // a healthy server at 120
				lw.queueLists(listResponse{rv: "120", objects: []*corev1.ConfigMap{cm("a", "99"), cm("b", "100")}})
			}
			if err := inf.RecordWrite("55"); err != nil { // below the cache, never delivered: a probe starts
				t.Fatal(err)
			}
			type firing struct {
				err    error
				cached string
			}
			fired := make(chan firing, 1)
			inf.AfterFreshness("55", func(err error) { fired <- firing{err, cached(inf, "new")} })
			stopped := make(chan error, 1)
			stop := inf.AfterFreshness("55", func(err error) { stopped <- err })
			select {
			case f := <-fired:
				t.Fatalf("AfterFreshness(55) ran (%v) while the restore verification probe was in flight", f.err)
			case <-time.After(100 * time.Millisecond):
			}
			if !stop() {
				t.Fatal("stop() = false for a callback held back by the probe")
			}
			release()
			select {
			case f := <-fired:
				if f.err != nil {
					t.Fatalf("AfterFreshness(55) ran with %v", f.err)
				}
				if restored && f.cached != "55" {
					t.Fatalf("AfterFreshness(55) ran before the write at 55 was cached (cache holds %q)", f.cached)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("AfterFreshness(55) never ran after the probe answered")
			}
			if restored {
				if r := regs.next(t); r.Reason != reflector.RegressionServerBehind {
					t.Fatalf("regression %+v", r)
				}
			}
			select {
			case err := <-stopped:
				t.Fatalf("a stopped callback ran (%v)", err)
			case <-time.After(50 * time.Millisecond):
			}
			if n := inf.Stats().PendingWaiters; n != 0 {
				t.Fatalf("PendingWaiters = %d after the callbacks ended", n)
			}
		})
	}
}
