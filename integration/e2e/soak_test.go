package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/freshinformer/freshinformer/integration/controlplane"
	"github.com/freshinformer/freshinformer/integration/testenv"
)

// Environment of TestSoakCluster (`make soak-cluster` sets them).
const (
	// EnvSoak is how long the soak runs (a Go duration); unset: skipped.
	envSoak = "FRESHINFORMER_SOAK"
	// EnvSoakSeed fixes the fault sequence (default: time-based, logged).
	envSoakSeed = "FRESHINFORMER_SOAK_SEED"
	// EnvSoakFaults "safe" leaves out restores without --bump-revision.
	envSoakFaults = "FRESHINFORMER_SOAK_FAULTS"
)

// TestSoakCluster injects random faults into its own real control plane for
// $FRESHINFORMER_SOAK while two writers run: kill -9 of the apiserver,
// graceful restarts, etcd compactions, and etcd snapshot restores with
// --bump-revision --mark-compacted and without bump. At
// the end the usual checks: no write fresh before the indexer held it
// (unless a regression was declared since), no key back without a declared
// regression, exactly one declared regression per restore, and the cache
// equal to the server.
func TestSoakCluster(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv(envSoak))
	if err != nil || d <= 0 {
		t.Skipf("set %s to a duration (make soak-cluster) to run the soak", envSoak)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(envSoakSeed); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s: %v", envSoakSeed, err)
		}
	}
	noBump := os.Getenv(envSoakFaults) != "safe"
	t.Logf("soak for %v, seed %d (rerun with %s=%d), restores without bump: %v", d, seed, envSoakSeed, seed, noBump)
	rng := rand.New(rand.NewPCG(seed, 0))

	cp := testenv.NewPlane(t, controlplane.Options{})
	cs, err := cp.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t, d+5*time.Minute)
	ns, err := cp.CreateNamespace(ctx, "soak-")
	if err != nil {
		t.Fatal(err)
	}
	r := newFaultRig(t, ctx, cs, ns, rigOptions{listWatch: rng.IntN(2) == 0})
	const keys = 24
	r.round(keys)
	const writers, pause = 2, 10 * time.Millisecond
	stop := r.runWriters(writers, keys, pause)
	defer func() { stop() }()

	var snap *controlplane.Snapshot
	restores, maxDeclared := 0, 0
	counts := map[string]int{}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && !t.Failed() {
		time.Sleep(time.Duration(1000+rng.IntN(3000)) * time.Millisecond)
		var fault, detail string
		switch rng.IntN(7) {
		case 0:
			fault = "kill-9"
			if err := cp.KillAPIServer(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(200+rng.IntN(2000)) * time.Millisecond)
			if err := cp.StartAPIServer(ctx); err != nil {
				t.Fatal(err)
			}
		case 1:
			fault = "restart"
			if err := cp.RestartAPIServer(ctx); err != nil {
				t.Fatal(err)
			}
		case 2, 3:
			fault = "compact"
			if _, err := cp.CompactEtcd(ctx); err != nil {
				t.Fatal(err)
			}
		default:
			if snap == nil {
				fault = "snapshot"
				s, err := cp.SnapshotEtcd(ctx)
				if err != nil {
					t.Fatal(err)
				}
				snap = &s
				break
			}
			// etcdutl 3.6 takes --bump-revision only with --mark-compacted.
			opts := controlplane.RestoreOptions{BumpRevision: int64(1000 + rng.IntN(1_000_000)), MarkCompacted: true}
			fault = "restore --bump-revision --mark-compacted"
			if noBump && rng.IntN(3) == 0 {
				opts, fault = controlplane.RestoreOptions{}, "restore (no bump)"
			}
			// The writers pause across the restore, so the informer sees
			// the restored (older) state before new writes overwrite it.
			stop()
			back0, declared0, lists0 := r.wentBack(), r.regressions(), r.inf.Stats().Lists
			if err := cp.RestoreEtcd(ctx, *snap, opts); err != nil {
				t.Fatal(err)
			}
			snap = nil
			restores++
			// A bumped restore shows in the relist after the 410; one
			// without bump only once a write comes back below the cache.
			for end := time.Now().Add(20 * time.Second); time.Now().Before(end) && r.regressions() == declared0; time.Sleep(100 * time.Millisecond) {
				if opts.BumpRevision > 0 && r.inf.Stats().Lists > lists0 {
					break
				}
			}
			stop = r.runWriters(writers, keys, pause)
			if opts.BumpRevision == 0 {
				for end := time.Now().Add(60 * time.Second); time.Now().Before(end) && r.regressions() == declared0; {
					time.Sleep(100 * time.Millisecond)
				}
			} else {
				time.Sleep(time.Second) // let the handlers see the relist
			}
			// One restore, at most one declaration, and exactly one if a
			// cached key went back. (A restore can be invisible: when the
			// informer had not seen the writes the snapshot lacks.)
			back, declared := r.wentBack()-back0, r.regressions()-declared0
			if declared > 1 || (back > 0 && declared != 1) {
				t.Errorf("%s: %d keys went back, %d regressions declared; want exactly one declaration when keys go back, at most one otherwise", fault, back, declared)
			}
			detail = fmt.Sprintf(" (%d keys back, %d declared)", back, declared)
			maxDeclared++
		}
		counts[fault]++
		t.Logf("%s: %s%s (informer at %s)", time.Now().Format("15:04:05.000"), fault, detail, r.inf.LastObservedResourceVersion())
	}
	stop()
	r.round(keys)
	r.converge(2 * time.Minute)
	r.verifyRange(0, maxDeclared)
	t.Logf("faults: %v", counts)
}
