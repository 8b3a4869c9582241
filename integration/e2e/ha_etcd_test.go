package e2e

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/integration/controlplane"
	"github.com/freshinformer/freshinformer/integration/testenv"
	"github.com/freshinformer/freshinformer/reflector"
)

var etcdLossHeader = []string{"etcd fault", "member", "writes during it", "failed writes", "plain lister stale", "early wake-ups", "failed waits", "wait p50", "wait p99", "wait max", "wait for an unreached RV", "regressions declared", "watch requests"}

// testHAEtcdMemberLoss is scenario 4 of docs/ha.md: while writes go
// through the load balancer and both factories watch through it, an etcd
// follower is killed (SIGKILL) and restarted, then the leader. No wait
// returns before our lister holds its write, none for a committed write
// fails, no regression is declared, and the wait's p99 across the change
// is reported.
func testHAEtcdMemberLoss(t *testing.T, h *controlplane.HAControlPlane) {
	down := 3 * time.Second
	if haLong() {
		down = 8 * time.Second
	}
	ctx := testenv.Context(t, 8*time.Minute)
	watchCS, watchAt := haClient(t, ctx, h)
	writer, writerAt := writerAvoiding(t, ctx, h, watchAt)
	nsObj, err := writer.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ha-etcd-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns := nsObj.Name
	for i := range 5 {
		if _, err := writer.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "lag-" + strconv.Itoa(i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var regMu sync.Mutex
	var declared []reflector.Regression
	runCtx, stop := context.WithCancel(ctx)
	plain := informers.NewSharedInformerFactoryWithOptions(watchCS, 0, informers.WithNamespace(ns))
	plainLister := plain.Core().V1().ConfigMaps().Lister()
	ours := cache.NewSharedInformerFactoryWithOptions(watchCS, 0, cache.WithNamespace(ns),
		cache.WithInformerOptions(cache.WithRegressionHandler(func(r reflector.Regression) {
			regMu.Lock()
			declared = append(declared, r)
			regMu.Unlock()
		})))
	oursLister := ours.Core().V1().ConfigMaps().Lister()
	plain.Start(runCtx.Done())
	ours.Start(runCtx.Done())
	defer func() {
		stop()
		plain.Shutdown()
		ours.Shutdown()
	}()
	for _, synced := range []map[any]bool{toAny(plain.WaitForCacheSync(ctx.Done())), toAny(ours.WaitForCacheSync(ctx.Done()))} {
		for typ, ok := range synced {
			if !ok {
				t.Fatalf("%v informer did not sync", typ)
			}
		}
	}
	inf := ours.FreshInformersForResource(corev1.Resource("configmaps"))[0]
	t.Logf("informers' connection on kube-apiserver %d, writer on %d", watchAt, writerAt)

	var rows [][]string
	for _, leader := range []bool{false, true} {
		// The member to kill; the writer's replica must not be the one
		// on it (stacked etcd: that replica loses its only member, and
		// writes on its open connection hang).
		l, err := h.EtcdLeader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		member, name := l, "the leader killed (SIGKILL), then restarted"
		if !leader {
			name = "a follower killed (SIGKILL), then restarted"
			// Preferably not the informers' replica's member either.
			for _, avoidWatch := range []bool{true, false} {
				for m := range h.EtcdMembers() {
					if member == l && m != l && m != writerAt%h.EtcdMembers() && (!avoidWatch || m != watchAt%h.EtcdMembers()) {
						member = m
					}
				}
			}
		}
		if writerAt%h.EtcdMembers() == member {
			writer, writerAt = writerAvoiding(t, ctx, h, member)
		}
		ph := lagPhase{name,
			func(int) error { return h.StopEtcdMember(member, true) },
			func(int) error { return h.StartEtcdMember(ctx, member) }}
		before := inf.Stats()
		res := runLagPhase(t, ctx, h, ph, watchAt, writer, ns, down, plainLister, oursLister, inf, nil)
		after := inf.Stats()
		res.regressions = after.Regressions - before.Regressions
		res.watches = after.Watches - before.Watches
		rows = append(rows, []string{ph.name, strconv.Itoa(member), strconv.Itoa(res.writes), strconv.Itoa(len(res.writeErrs)),
			pctOf(res.plainStale, res.writes), strconv.Itoa(res.early), strconv.Itoa(len(res.failed)),
			ms(res.waits.pct(0.5)), ms(res.waits.pct(0.99)), ms(res.waits.max()), res.unreachable,
			strconv.FormatUint(res.regressions, 10), strconv.FormatUint(res.watches, 10)})
		if res.writes == 0 {
			t.Errorf("%s: no write succeeded: %v", ph.name, res.writeErrs)
		}
		if res.early != 0 {
			t.Errorf("%s: %d waits returned nil before our lister held their write", ph.name, res.early)
		}
		if len(res.failed) != 0 {
			t.Errorf("%s: %d waits for committed writes failed, first: %s", ph.name, len(res.failed), res.failed[0])
		}
		if res.unreachable != "ErrTooLargeResourceVersion" {
			t.Errorf("%s: the wait for an unreached resource version ended with %s, want ErrTooLargeResourceVersion", ph.name, res.unreachable)
		}
		if res.regressions != 0 {
			regMu.Lock()
			t.Errorf("%s: %d regressions declared although nothing went back: %v", ph.name, res.regressions, declared)
			regMu.Unlock()
		}
		if len(res.writeErrs) > 0 {
			t.Logf("%s: %d writes failed while the member was down (tolerated), first: %s", ph.name, len(res.writeErrs), res.writeErrs[0])
		}
	}
	t.Logf("scenario 4, etcd members lost (down %v each, writes every 100 ms):%s", down, table(etcdLossHeader, rows))
}
