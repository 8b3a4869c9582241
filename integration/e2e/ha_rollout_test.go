package e2e

import (
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/informers"

	"github.com/freshinformer/freshinformer/integration/controlplane"
	"github.com/freshinformer/freshinformer/integration/testenv"
)

var rolloutHeader = []string{"replica", "writes while down", "failed writes", "plain lister stale", "early wake-ups", "failed waits", "wait p50", "wait p99", "wait max", "plain lister shows p99", "wait for an unreached RV", "regressions declared", "watch requests"}

// testHARollout is scenario 3 of docs/ha.md, in a reduced form: while
// writes go through the load balancer and both factories watch through it,
// every kube-apiserver is restarted in turn (SIGTERM, writes for a few
// seconds, start, ready), as a rollout does. Clients whose connection it
// held reconnect through HAProxy to another replica. No wait returns
// before our lister holds its write, none for a committed write fails, no
// regression is declared; the wait's p99 across each restart is reported.
// (Not measured here: 100 informers and the requests and bytes against
// client-go's, which integration/cmd/restartcost measures for a single
// server.)
func testHARollout(t *testing.T, h *controlplane.HAControlPlane) {
	down := 3 * time.Second
	ctx := testenv.Context(t, 8*time.Minute)
	watchCS, watchAt := haClient(t, ctx, h)
	writer, writerAt := writerAvoiding(t, ctx, h, watchAt)
	var arrivals *plainArrivals
	sb := startSideBySide(t, ctx, watchCS, writer, "ha-rollout-", func(plain informers.SharedInformerFactory) {
		arrivals = watchPlain(t, plain.Core().V1().ConfigMaps().Informer())
	})
	ns, plainLister, oursLister, inf := sb.ns, sb.plainLister, sb.oursLister, sb.inf
	t.Logf("informers' connection on kube-apiserver %d, writer on %d", watchAt, writerAt)

	var phases []lagPhase
	for i := range h.APIServers() {
		phases = append(phases, lagPhase{"kube-apiserver " + strconv.Itoa(i) + " restarted",
			func(int) error { return h.StopAPIServer(i) },
			func(int) error { return h.StartAPIServer(ctx, i) }})
	}
	var rows [][]string
	for _, ph := range phases {
		before := inf.Stats()
		res := runLagPhase(t, ctx, h, ph, watchAt, writer, ns, down, plainLister, oursLister, inf, arrivals)
		after := inf.Stats()
		res.regressions = after.Regressions - before.Regressions
		res.watches = after.Watches - before.Watches
		rows = append(rows, []string{ph.name, strconv.Itoa(res.writes), strconv.Itoa(len(res.writeErrs)),
			pctOf(res.plainStale, res.writes), strconv.Itoa(res.early), strconv.Itoa(len(res.failed)),
			ms(res.waits.pct(0.5)), ms(res.waits.pct(0.99)), ms(res.waits.max()), ms(res.plainShows.pct(0.99)), res.unreachable,
			strconv.FormatUint(res.regressions, 10), strconv.FormatUint(res.watches, 10)})
		sb.check(t, ph.name, res)
		if len(res.writeErrs) > 0 {
			t.Logf("%s: %d writes failed while it restarted (tolerated), first: %s", ph.name, len(res.writeErrs), res.writeErrs[0])
		}
	}
	t.Logf("scenario 3 (reduced), a rollout (each kube-apiserver stopped, %v of writes every 100 ms, started):%s", down, table(rolloutHeader, rows))
}
