package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/freshinformer/freshinformer/integration/testenv"
)

// The stale-read detector's proof on the real control plane: the
// examples' naive controllers, run as their users run them, against this
// package's kube-apiserver. Each counts its own stale reads (a read whose
// resource version is older than the one its own previous write of the
// object returned) and the detector's reports: they must be equal, above
// zero for the naive controller under lag, and zero for every controller
// that waits. Run with -v for the figures (docs/benchmarks.md).

// buildExample builds the main package in dir (relative to the
// repository's root) and returns the binary.
func buildExample(t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the example with")
	}
	out := filepath.Join(t.TempDir(), filepath.Base(dir))
	cmd := exec.Command(goBin, "build", "-o", out, ".")
	cmd.Dir = filepath.Join("..", "..", dir)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", dir, err, b)
	}
	return out
}

// runExample runs bin against the shared plane and returns its standard
// output; its log (the detector's reports) goes to the test log only on
// failure.
func runExample(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := testenv.Plane(t).WriteKubeConfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, tail(stderr.String(), 4000))
	}
	return stdout.Bytes()
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// examples/naivecontroller: a client-go controller that reads from its
// lister right after its own writes.
func TestNaiveControllerStaleReads(t *testing.T) {
	bin := buildExample(t, "examples/naivecontroller")
	type result struct {
		Wait, Lag                        string
		Reads, Writes, Conflicts         int64
		StaleCounted, StaleReported      int64
		StaleMetric, StaleWritesReported int64
	}
	for _, c := range []struct{ wait, lag string }{
		{"none", "0"}, {"none", "20ms"},
		{"freshness", "0"}, {"freshness", "20ms"},
		{"ryw", "0"}, {"ryw", "20ms"},
	} {
		out := runExample(t, bin, "-json", "-namespace", testenv.Namespace(t), "-objects", "5", "-steps", "40", "-wait", c.wait, "-lag", c.lag)
		var r result
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		t.Logf("| %s | %s | %d | %d | %d | %d | %d | %d |", r.Wait, r.Lag, r.Reads, r.StaleCounted, r.StaleReported, r.StaleMetric, r.Conflicts, r.StaleWritesReported)
		switch {
		case r.StaleReported != r.StaleCounted || r.StaleMetric != r.StaleCounted:
			t.Errorf("wait=%s lag=%s: %d stale reads counted, %d reported, %d in the metric", c.wait, c.lag, r.StaleCounted, r.StaleReported, r.StaleMetric)
		case r.Conflicts != r.StaleCounted || r.StaleWritesReported != r.Conflicts:
			t.Errorf("wait=%s lag=%s: %d stale reads, %d conflicts, %d stale writes reported", c.wait, c.lag, r.StaleCounted, r.Conflicts, r.StaleWritesReported)
		case c.wait != "none" && r.StaleCounted != 0:
			t.Errorf("wait=%s lag=%s: %d stale reads after waiting", c.wait, c.lag, r.StaleCounted)
		case c.wait == "none" && c.lag != "0" && r.StaleCounted == 0:
			t.Errorf("wait=none lag=%s: no stale read although the informer was held behind every write", c.lag)
		}
	}
}

// examples/crcounter: a controller-runtime manager on freshctrl's cache
// and client, its reads opted out of waiting (naive) or not (freshctrl).
func TestControllerRuntimeStaleReads(t *testing.T) {
	bin := buildExample(t, "examples/crcounter")
	type result struct {
		Mode                                   string
		Reconciles, Conflicts, Stale, Reported int64
	}
	for _, mode := range []string{"naive", "fresh"} {
		out := runExample(t, bin, "-json", "-modes", mode, "-parents", "6", "-target", "30")
		var r result
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		t.Logf("| %s | %d | %d | %d | %d |", r.Mode, r.Reconciles, r.Stale, r.Reported, r.Conflicts)
		if r.Reported != r.Stale {
			t.Errorf("%s: %d stale reads counted, %d reported", mode, r.Stale, r.Reported)
		}
		if mode == "fresh" && r.Stale != 0 {
			t.Errorf("%s: %d stale reads through freshctrl's client", mode, r.Stale)
		}
	}
}
