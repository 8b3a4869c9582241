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
	// And the stale-read detector's counters, which the Provider's
	// detecting informers add.
	cache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.ConfigMap{}, 0, nil, cache.WithMetrics(p), cache.WithName("detecting"), cache.WithStaleReadDetection(nil))
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
	Panels []dashboardPanel `json:"panels"`
}

type dashboardPanel struct {
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Targets     []struct {
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
}

// detailedRow is the title of the dashboard's row of panels that need
// WithDetailedMetrics (docs/metrics.md).
const detailedRow = "Percentiles (need metrics.WithDetailedMetrics)"

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
		if p.Type == "row" {
			if len(p.Targets) != 0 {
				t.Errorf("row %q has queries", p.Title)
			}
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			checkRefs(t, "panel "+p.Title, tg.Expr, names)
		}
	}
}

// The default histograms have one bucket (le="1"), where a percentile only
// says whether it is under a second (histogram_quantile answers about
// 990 ms for waits of microseconds). Percentiles are only in the row of
// panels that need WithDetailedMetrics, and each keeps only histograms with
// more than one finite bucket, so that without them the panel shows no data
// rather than a made-up figure (make dashboard-check checks both on a real
// Prometheus).
func TestDashboardPercentilesOnlyWithDetailedBuckets(t *testing.T) {
	guard := regexp.MustCompile(`and on \([^)]*\) \(count without \(le\) \(freshinformer_[a-z_]+_bucket\{[^}]*\}\) > 2\)`)
	row, percentiles := "", 0
	for _, p := range loadDashboard(t).Panels {
		if p.Type == "row" {
			row = p.Title
			continue
		}
		for _, tg := range p.Targets {
			if !strings.Contains(tg.Expr, "histogram_quantile") {
				continue
			}
			percentiles++
			if row != detailedRow {
				t.Errorf("panel %q (row %q) shows a percentile outside the row %q", p.Title, row, detailedRow)
			}
			if strings.Count(tg.Expr, "histogram_quantile") != 1 || !guard.MatchString(tg.Expr) {
				t.Errorf("panel %q: a percentile not limited to detailed histograms: %s", p.Title, tg.Expr)
			}
			if !strings.Contains(p.Description, "WithDetailedMetrics") {
				t.Errorf("panel %q does not say it needs WithDetailedMetrics", p.Title)
			}
		}
	}
	if percentiles == 0 {
		t.Error("the dashboard shows no percentile at all")
	}
}

// Legends are short: the name label's values repeat the scope
// (freshctrl names informers "ns=team-a,labels=app=web"), so a legend shows
// {{informer}}, the name or, for an unnamed informer, its namespace and
// selectors, which the query computes; never the identity labels one by one.
func TestDashboardLegendsShort(t *testing.T) {
	for _, p := range loadDashboard(t).Panels {
		for _, tg := range p.Targets {
			for _, l := range []string{"{{name}}", "{{informer_namespace}}", "{{label_selector}}", "{{field_selector}}"} {
				if strings.Contains(tg.LegendFormat, l) {
					t.Errorf("panel %q: legend %q shows %s: use {{informer}}", p.Title, tg.LegendFormat, l)
				}
			}
			computed := strings.HasPrefix(tg.Expr, `label_replace(label_join(`) &&
				strings.HasSuffix(tg.Expr, `, "informer", " ", "informer_namespace", "label_selector", "field_selector"), "informer", "$1", "name", "(.+)")`)
			if strings.Contains(tg.LegendFormat, "{{informer}}") && !computed {
				t.Errorf("panel %q: legend %q, but the query does not compute the informer label: %s", p.Title, tg.LegendFormat, tg.Expr)
			}
		}
	}
}

// Prometheus 3 stores a classic histogram's le label in OpenMetrics form
// (le="1.0" for the le="1" the client exposes; Prometheus 2 kept "1"): an
// exact le matcher finds nothing there and the query or alert falls silent.
func TestBucketMatchersSurvivePrometheus3(t *testing.T) {
	exact := regexp.MustCompile(`le\s*=\s*"`)
	for _, p := range loadDashboard(t).Panels {
		for _, tg := range p.Targets {
			if exact.MatchString(tg.Expr) {
				t.Errorf("panel %q matches le exactly (use le=~\"1(\\\\.0)?\"): %s", p.Title, tg.Expr)
			}
		}
	}
	raw, err := os.ReadFile("monitoring/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(raw), "\n") {
		if exact.MatchString(line) && !strings.HasPrefix(strings.TrimSpace(line), "#") {
			t.Errorf("alerts.yaml:%d matches le exactly: %s", i+1, strings.TrimSpace(line))
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
