package e2e

import (
	"strconv"
	"testing"
	"time"

	"github.com/freshinformer/freshinformer/integration/controlplane"
	"github.com/freshinformer/freshinformer/integration/testenv"
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
	sb := startSideBySide(t, ctx, watchCS, writer, "ha-etcd-", nil)
	ns, plainLister, oursLister, inf := sb.ns, sb.plainLister, sb.oursLister, sb.inf
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
		sb.check(t, ph.name, res)
		if len(res.writeErrs) > 0 {
			t.Logf("%s: %d writes failed while the member was down (tolerated), first: %s", ph.name, len(res.writeErrs), res.writeErrs[0])
		}
	}
	t.Logf("scenario 4, etcd members lost (down %v each, writes every 100 ms):%s", down, table(etcdLossHeader, rows))
}
