package cache

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/internal/apimodel"
)

// A wait for a resource version committed on another resource, on a small
// quiet informer, is proven by the snapshot route in about one round trip
// (guarantee 5 of the specification), also while another wait, for a
// resource version the server has not committed, stays pending.
//
// Found by the fault suite: the probe's backoff (quietProbe.idle,
// rearmLocked) grew with every probe after which any wait was still
// pending, and a wait that joined later neither reset it nor re-armed the
// timer. With one wait for an uncommitted resource version pending,
// successive waits for committed ones were each answered by the next
// backed-off probe: 20 ms << idle, so about 40, 80, 160, 320, 640 ms, then
// 1.28 s (the bookmark route: up to probe.MaxDelay, 5 s; 30 s once a probe
// found the server behind every target, probe.BehindDelay), although every
// one of those probes advanced the tracker. Now a probe that advances the
// cache resets the backoff, and a wait for a lower target than any pending
// one ends it.
func TestSnapshotProbeNotHeldBackByUncommittedWait(t *testing.T) {
	srv := apimodel.New(apimodel.Options{Seed: 1, Replicas: 1, PageSize: 64})
	defer srv.Close()
	for i := range 10 {
		if _, err := srv.Create(fmt.Sprintf("k%02d", i), "0"); err != nil {
			t.Fatal(err)
		}
	}
	inf := NewSharedIndexInformer(srv, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); inf.RunWithContext(ctx) }()
	defer func() { cancel(); <-stopped }()
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("not synced")
	}
	// A wait for a resource version nobody has committed (made up, or
	// from another etcd) stays pending throughout.
	go func() { _ = inf.WaitForFreshness(ctx, strconv.FormatUint(srv.Rev()+1_000_000, 10)) }()
	for i := range 8 {
		rev, err := srv.WriteElsewhere()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		// Far more than a probe delay and a round trip (about 20 ms on the
		// model), far less than the backoff reaches.
		wctx, wcancel := context.WithTimeout(ctx, time.Second)
		err = inf.WaitForFreshness(wctx, strconv.FormatUint(rev, 10))
		wcancel()
		if err != nil {
			t.Fatalf("wait %d for %d, committed elsewhere: %v after %s (ProbeStats %+v)", i, rev, err, time.Since(start).Round(time.Millisecond), inf.ProbeStats())
		}
		t.Logf("wait %d for %d: fresh in %s", i, rev, time.Since(start).Round(time.Millisecond))
	}
}
