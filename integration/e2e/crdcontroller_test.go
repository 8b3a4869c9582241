package e2e

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/freshinformer/freshinformer/examples/crdcontroller/controller"
	"github.com/freshinformer/freshinformer/integration/testenv"
)

// TestCRDControllerPlainVsFresh runs the example CRD controller (informers
// and listers of a code-generated factory, over CRDs) on the real server,
// with the generated informers as they are (plain) and made fresh with one
// call per kind, and counts the reconciles that read a Counter older than
// the controller's own last write of it. It does so straight to the
// apiserver, and with every watch event 5 ms late (a loaded network or
// server). Made fresh, no read is stale and no write conflicts; plain, the
// late events make reads stale (the straight run's count depends on the
// machine's load: it is logged, not asserted).
func TestCRDControllerPlainVsFresh(t *testing.T) {
	const counters, target, workers = 20, 50, 4
	for _, lag := range []time.Duration{0, 5 * time.Millisecond} {
		for _, fresh := range []bool{false, true} {
			cfg := testenv.Config(t)
			cfg.QPS, cfg.Burst = 500, 1000
			if lag > 0 {
				cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return lateWatches{rt, lag} })
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			stats, elapsed, err := controller.CountUp(ctx, cfg, testenv.Namespace(t), counters, target, workers, fresh)
			cancel()
			mode := map[bool]string{false: "plain", true: "fresh"}[fresh]
			t.Logf("%s, watch events %v late: %d counters to %d by %d workers in %s: %v (%.1f stale reads per 1000 reconciles)", mode, lag, counters, target, workers,
				elapsed.Round(time.Millisecond), stats, 1000*float64(stats.StaleReads)/float64(max(1, stats.Reconciles)))
			switch {
			case err != nil:
				t.Fatalf("%s: %v", mode, err)
			case stats.Writes != counters*target:
				t.Fatalf("%s: %d writes, want %d", mode, stats.Writes, counters*target)
			case fresh && (stats.StaleReads != 0 || stats.Conflicts != 0):
				t.Fatalf("fresh: %v", stats)
			case !fresh && lag > 0 && stats.StaleReads == 0:
				t.Fatalf("plain, watch events %v late: no stale read; the test cannot tell fresh from plain", lag)
			}
		}
	}
}

// lateWatches delivers what watch responses read lag late.
type lateWatches struct {
	rt  http.RoundTripper
	lag time.Duration
}

func (l lateWatches) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(r)
	if err == nil && r.URL.Query().Get("watch") == "true" {
		resp.Body = lateBody{resp.Body, l.lag}
	}
	return resp, err
}

type lateBody struct {
	io.ReadCloser
	lag time.Duration
}

func (b lateBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		time.Sleep(b.lag)
	}
	return n, err
}
