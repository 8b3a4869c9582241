package metrics

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
)

// exportedNames lists every series name the Provider exports by default,
// histogram suffixes included, and the stale-read detector's counters: the
// dashboard and alerts must work without WithDetailedMetrics.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	p, err := NewProvider(reg)
	if err != nil {
		t.Fatal(err)
	}
	inf := cache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.ConfigMap{}, 0, nil, cache.WithMetrics(p))
	// And the stale-read detector's counters, which its informers add.
	cache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.ConfigMap{}, 0, nil, cache.WithStaleReadDetection(nil))
	// Give the histograms and waits_total a series, as a wait and a
	// recorded write would.
	p.informers[inf].ObserveWait(cache.WaitFresh, 0)
	p.informers[inf].ObserveWriteVisible(0)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if mf.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[mf.GetName()+s] = true
			}
		}
	}
	// Series that only appear once an informer has a resource version.
	for _, n := range []string{"freshinformer_observed_resource_version", "freshinformer_resource_version_lag", "freshinformer_staleness_seconds"} {
		names[n] = true
	}
	if len(names) < 15 {
		t.Fatalf("only %d names exported: %v", len(names), names)
	}
	return names
}

var metricRef = regexp.MustCompile(`freshinformer_[a-zA-Z0-9_]+`)

func checkRefs(t *testing.T, where, expr string, names map[string]bool) {
	t.Helper()
	refs := metricRef.FindAllString(expr, -1)
	if len(refs) == 0 {
		t.Errorf("%s: expression uses no freshinformer metric: %s", where, expr)
	}
	for _, r := range refs {
		if !names[r] {
			t.Errorf("%s: %s is not a metric this library exports", where, r)
		}
	}
}

type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile("monitoring/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	return d
}

func TestDashboardUsesOnlyExportedMetrics(t *testing.T) {
	names := exportedNames(t)
	d := loadDashboard(t)
	if len(d.Panels) == 0 {
		t.Fatal("dashboard has no panels")
	}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			checkRefs(t, "panel "+p.Title, tg.Expr, names)
		}
	}
}

func TestAlertRulesUseOnlyExportedMetrics(t *testing.T) {
	names := exportedNames(t)
	raw, err := os.ReadFile("monitoring/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for _, r := range metricRef.FindAllString(line, -1) {
			n++
			if !names[r] {
				t.Errorf("alerts.yaml: %s is not a metric this library exports", r)
			}
		}
	}
	if n == 0 {
		t.Fatal("alerts.yaml references no metric")
	}
}

// promtool runs Prometheus's own checks. `make test PROMTOOL=1` installs promtool and
// sets FRESHINFORMER_REQUIRE_PROMTOOL so a missing one fails there; a bare
// `go test` without it skips.
func promtool(t *testing.T, args ...string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("FRESHINFORMER_REQUIRE_PROMTOOL") != "" {
			t.Fatal("promtool not found (make test PROMTOOL=1 installs it: Debian package prometheus)")
		}
		t.Skip("promtool not installed: make test PROMTOOL=1 installs it and runs this check")
	}
	out, err := exec.Command(path, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestAlertRulesWithPromtool(t *testing.T) {
	promtool(t, "check", "rules", "monitoring/alerts.yaml")
	promtool(t, "test", "rules", "monitoring/alerts_test.yaml")
}

// TestDashboardQueriesParse has promtool parse every dashboard query, with
// Grafana's variables filled in, as recording rules.
func TestDashboardQueriesParse(t *testing.T) {
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	vars := strings.NewReplacer("$__rate_interval", "5m", "$job", ".*", "$resource", ".*", "$name", ".*")
	for i, p := range loadDashboard(t).Panels {
		for j, tg := range p.Targets {
			expr, _ := json.Marshal(vars.Replace(tg.Expr))
			fmt.Fprintf(&b, "      - record: dashboard:panel%d:query%d\n        expr: %s\n", i, j, expr)
		}
	}
	file := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	promtool(t, "check", "rules", file)
}

// Two controllers using the library must not merge into one alert: every
// aggregation in the rules keeps job (and namespace, the target's).
func TestAlertAggregationsKeepJob(t *testing.T) {
	raw, err := os.ReadFile("monitoring/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	by := regexp.MustCompile(`by \(([^)]*)\)`)
	found := by.FindAllStringSubmatch(string(raw), -1)
	if len(found) == 0 {
		t.Fatal("alerts.yaml has no aggregation")
	}
	for _, m := range found {
		ls := strings.Split(strings.ReplaceAll(m[1], " ", ""), ",")
		if !slices.Contains(ls, "job") || !slices.Contains(ls, "namespace") {
			t.Errorf("alerts.yaml aggregates %q without job and namespace", m[0])
		}
	}
}
