// Command dashboardcheck checks the shipped Grafana dashboard against a real
// Prometheus scraping the demo (make dashboard-check; docs/metrics.md).
//
//	dashboardcheck -demo bin/demo -dashboard metrics/monitoring/dashboard.json
//
// It needs KUBECONFIG (withcluster sets it) and a prometheus binary (Debian's
// prometheus package). It runs the demo twice at once, with the default
// metrics and with -detailed-metrics and the stale-read detector on
// (FRESHINFORMER_DEBUG=stalereads=1), has Prometheus scrape both as two jobs,
// lets them run, then evaluates every query of the dashboard (its template
// variables and each panel's targets, with Grafana's variables filled in)
// once per job through Prometheus' HTTP API, and prints per query whether it
// returned data. A panel in the row whose title names WithDetailedMetrics
// must return data for the detailed job and none for the default one (it
// must not show a made-up percentile), and so must a panel in the row whose
// title names the stale-read detector; every other panel must return data
// for both. Any other result fails the check (exit status 1), and so does a
// demo that does not pass its own -check (a read after WaitForFreshness that
// was stale, a wait that failed).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

func main() {
	var (
		dashboardPath = flag.String("dashboard", "metrics/monitoring/dashboard.json", "the Grafana dashboard to check")
		demo          = flag.String("demo", "", "the demo binary (go build ./examples/demo)")
		promBin       = flag.String("prometheus", "prometheus", "the prometheus binary")
		warmup        = flag.Duration("warmup", 20*time.Second, "how long Prometheus scrapes the demos before the queries run")
		scrape        = flag.Duration("scrape-interval", time.Second, "Prometheus' scrape interval")
		rateInterval  = flag.String("rate-interval", "10s", "what $__rate_interval stands for in the queries")
	)
	flag.Parse()
	if *demo == "" {
		fmt.Fprintln(os.Stderr, "dashboardcheck: -demo is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ok, err := run(ctx, *dashboardPath, *demo, *promBin, *warmup, *scrape, *rateInterval)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashboardcheck:", err)
		os.Exit(1)
	}
	if !ok {
		fmt.Println("[dashboard-check] FAIL")
		os.Exit(1)
	}
	fmt.Println("[dashboard-check] PASS: every query returned what its panel promises")
}

func logf(format string, args ...any) {
	fmt.Printf("[dashboard-check] "+format+"\n", args...)
}

// The two scrape jobs: the demo with the default metrics, and with
// -detailed-metrics.
const (
	jobDefault  = "freshinformer-demo"
	jobDetailed = "freshinformer-demo-detailed"
)

// needsDetailed names the row of panels that need WithDetailedMetrics,
// needsDetector the row of those that need the stale-read detector: the
// detailed job has both, the default job neither.
var (
	needsDetailed = regexp.MustCompile(`WithDetailedMetrics`)
	needsDetector = regexp.MustCompile(`stale-read detector`)
)

type dashboard struct {
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Definition string          `json:"definition"`
			Query      json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			RefID        string `json:"refId"`
			Expr         string `json:"expr"`
			LegendFormat string `json:"legendFormat"`
		} `json:"targets"`
	} `json:"panels"`
}

func run(ctx context.Context, dashboardPath, demo, promBin string, warmup, scrape time.Duration, rateInterval string) (bool, error) {
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		return false, err
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		return false, fmt.Errorf("%s: %w", dashboardPath, err)
	}
	if os.Getenv("KUBECONFIG") == "" {
		return false, errors.New("KUBECONFIG is not set: run under withcluster (make dashboard-check)")
	}
	if _, err := exec.LookPath(promBin); err != nil {
		return false, fmt.Errorf("%s not found: make promtool installs Debian's prometheus package: %w", promBin, err)
	}
	work, err := os.MkdirTemp("", "dashboardcheck-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(work)

	// The demos: one per job, each in a namespace of its own.
	var procs procGroup
	stopped := false
	defer func() {
		if !stopped {
			_ = procs.stop()
		}
	}()
	addrs := map[string]string{}
	for _, job := range []string{jobDefault, jobDetailed} {
		args := []string{"-duration", "0", "-quiet", "-check", "-metrics-addr", "127.0.0.1:0", "-namespace", job}
		if job == jobDetailed {
			args = append(args, "-detailed-metrics")
		}
		var env []string
		if job == jobDetailed {
			env = []string{"FRESHINFORMER_DEBUG=stalereads=1"}
		}
		addr, err := procs.startDemo(ctx, demo, job, args, env)
		if err != nil {
			return false, err
		}
		addrs[job] = addr
		logf("%s: the demo%s serves metrics on %s", job, map[bool]string{true: " with -detailed-metrics and the stale-read detector", false: ""}[job == jobDetailed], addr)
	}

	// Prometheus, on a free port, scraping both.
	port, err := freePort()
	if err != nil {
		return false, err
	}
	cfg := fmt.Sprintf("global:\n  scrape_interval: %s\n  evaluation_interval: %s\nscrape_configs:\n", scrape, scrape)
	for _, job := range []string{jobDefault, jobDetailed} {
		cfg += fmt.Sprintf("  - job_name: %s\n    static_configs:\n      - targets: [%q]\n", job, addrs[job])
	}
	cfgPath := filepath.Join(work, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return false, err
	}
	promLog := filepath.Join(work, "prometheus.log")
	promAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := procs.startPrometheus(promBin, promLog, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(work, "data"),
		"--web.listen-address="+promAddr); err != nil {
		return false, err
	}
	prom, err := newPromClient(promAddr)
	if err != nil {
		return false, err
	}
	version, err := prom.waitReady(ctx, time.Minute)
	if err != nil {
		out, _ := os.ReadFile(promLog)
		return false, fmt.Errorf("%w\nprometheus output:\n%s", err, out)
	}
	logf("Prometheus %s on %s, scraping every %s; the demos run for %s before the queries", version, promAddr, scrape, warmup)

	select {
	case <-time.After(warmup):
	case <-ctx.Done():
		return false, ctx.Err()
	case err := <-procs.exited:
		return false, err
	}
	for _, job := range []string{jobDefault, jobDetailed} {
		res, err := prom.query(ctx, fmt.Sprintf("up{job=%q}", job))
		if err != nil {
			return false, err
		}
		if len(res) != 1 || res[0].value != 1 {
			return false, fmt.Errorf("Prometheus does not scrape the %s demo (up: %v)", job, res)
		}
	}

	ok := true
	fill := func(expr, job string) string {
		return strings.NewReplacer("$__rate_interval", rateInterval, "$job", regexp.QuoteMeta(job), "$resource", ".*", "$name", ".*").Replace(expr)
	}
	// Template variables: label_values(metric{...}, label) is what Grafana
	// asks Prometheus for the values of label on the series of metric.
	labelValues := regexp.MustCompile(`^label_values\((.*), *([a-zA-Z_][a-zA-Z0-9_]*)\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			logf("variable $%s: %q is not label_values(...): cannot check it", v.Name, v.Definition)
			ok = false
			continue
		}
		for _, job := range []string{jobDefault, jobDetailed} {
			expr := fmt.Sprintf("group by (%s) (%s)", m[2], fill(m[1], job))
			res, err := prom.query(ctx, expr)
			if err != nil {
				return false, err
			}
			var values []string
			for _, s := range res {
				if s.labels[m[2]] != "" {
					values = append(values, s.labels[m[2]])
				}
			}
			verdict := "OK"
			if len(values) == 0 {
				verdict, ok = "FAIL: no values", false
			}
			logf("variable $%-9s %-28s %s: %s %v", v.Name, job, expr, verdict, values)
		}
	}

	row, panels, queries := "", 0, 0
	for _, p := range d.Panels {
		if p.Type == "row" {
			row = p.Title
			fmt.Printf("\n== row: %s\n", row)
			continue
		}
		panels++
		detailedOnly := needsDetailed.MatchString(row) || needsDetector.MatchString(row)
		fmt.Printf("-- panel: %s%s\n", p.Title, map[bool]string{true: " (" + row + ": data only for the detailed job)", false: ""}[detailedOnly])
		for _, tg := range p.Targets {
			queries++
			fmt.Printf("   %s %q\n      %s\n", tg.RefID, tg.LegendFormat, tg.Expr)
			for _, job := range []string{jobDefault, jobDetailed} {
				res, err := prom.query(ctx, fill(tg.Expr, job))
				if err != nil {
					fmt.Printf("      %-28s FAIL: %v\n", job, err)
					ok = false
					continue
				}
				want := !detailedOnly || job == jobDetailed
				got := len(res) > 0
				verdict := "OK"
				if got != want {
					verdict, ok = "FAIL", false
				}
				fmt.Printf("      %-28s %-4s %s\n", job, verdict, describe(res, tg.LegendFormat, want))
			}
		}
	}
	fmt.Println()
	logf("%d panels, %d queries, each evaluated for both jobs", panels, queries)
	if panels == 0 || queries == 0 {
		return false, errors.New("the dashboard has no panel with a query")
	}
	stopped = true
	if err := procs.stop(); err != nil {
		return false, err
	}
	logf("both demos passed their -check")
	return ok, nil
}

// describe says what a query returned: how many series, and the first one
// with its legend filled in.
func describe(res []sample, legend string, want bool) string {
	if len(res) == 0 {
		if want {
			return "no data"
		}
		return "no data, as it should be"
	}
	first := res[0]
	name := regexp.MustCompile(`\{\{ *([a-zA-Z_][a-zA-Z0-9_]*) *\}\}`).ReplaceAllStringFunc(legend, func(m string) string {
		return first.labels[strings.Trim(m, "{} ")]
	})
	s := fmt.Sprintf("%d series, e.g. %q = %s", len(res), name, strconv.FormatFloat(first.value, 'g', 4, 64))
	if !want {
		s += ": should be empty"
	}
	return s
}

// procGroup runs the demos and Prometheus and stops them.
type procGroup struct {
	mu     sync.Mutex
	procs  []*proc
	exited chan error // a process that ended before stop
	once   sync.Once
}

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // cmd.Wait's, once done is closed
}

func (g *procGroup) add(cmd *exec.Cmd, name string) {
	g.once.Do(func() { g.exited = make(chan error, 8) })
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	g.mu.Lock()
	g.procs = append(g.procs, p)
	g.mu.Unlock()
	go func() {
		p.err = cmd.Wait()
		close(p.done)
		g.exited <- fmt.Errorf("%s exited early: %v", name, p.err)
	}()
}

// startDemo runs the demo and returns the address it serves metrics on,
// read from its output.
func (g *procGroup) startDemo(ctx context.Context, demo, job string, args, env []string) (string, error) {
	cmd := exec.Command(demo, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stderr = prefixed(job)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	g.add(cmd, "the "+job+" demo")
	addr := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`Prometheus metrics: http://([^/]+)/metrics`)
		w := prefixed(job)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
			fmt.Fprintln(w, sc.Text())
		}
	}()
	select {
	case a := <-addr:
		return a, nil
	case err := <-g.exited:
		return "", err
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(2 * time.Minute):
		return "", fmt.Errorf("the %s demo did not say where it serves metrics within 2 minutes", job)
	}
}

func (g *procGroup) startPrometheus(bin, logPath string, args ...string) error {
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	g.add(cmd, "prometheus")
	return nil
}

// stop ends every process with SIGTERM (the demos then print their
// summary, give their -check verdict and remove their namespaces) and waits
// for them, SIGKILL after 30 s. It returns the failures: a process that did
// not exit with status 0.
func (g *procGroup) stop() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range g.procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	var errs []error
	for _, p := range g.procs {
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if p.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.name, p.err))
		}
	}
	return errors.Join(errs...)
}

type prefixWriter struct {
	prefix string
	mu     sync.Mutex
}

func prefixed(job string) io.Writer { return &prefixWriter{prefix: "[" + job + "] "} }

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, line := range strings.SplitAfter(string(p), "\n") {
		if line != "" {
			fmt.Print(w.prefix + line)
		}
	}
	if len(p) > 0 && p[len(p)-1] != '\n' {
		fmt.Println()
	}
	return len(p), nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// promClient asks Prometheus' HTTP API (client_golang's api/prometheus/v1).
type promClient struct{ api promv1.API }

func newPromClient(addr string) (*promClient, error) {
	c, err := promapi.NewClient(promapi.Config{Address: "http://" + addr})
	if err != nil {
		return nil, err
	}
	return &promClient{api: promv1.NewAPI(c)}, nil
}

type sample struct {
	labels map[string]string
	value  float64
}

// waitReady waits until Prometheus answers its API (503 until its storage
// is ready) and returns its version.
func (c *promClient) waitReady(ctx context.Context, limit time.Duration) (version string, err error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		info, err := c.api.Buildinfo(ctx)
		if err == nil {
			return info.Version, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("Prometheus not ready after %s: %w", limit, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// query runs an instant query, at the server's time, and returns the
// samples with a number (NaN and infinities are no data to a panel).
func (c *promClient) query(ctx context.Context, expr string) ([]sample, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, _, _, err := c.api.Query(ctx, expr, time.Time{})
	if err != nil {
		return nil, err
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("result type %s, want vector", v.Type())
	}
	var out []sample
	for _, smp := range vec {
		f := float64(smp.Value)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		labels := make(map[string]string, len(smp.Metric))
		for name, value := range smp.Metric {
			labels[string(name)] = string(value)
		}
		out = append(out, sample{labels: labels, value: f})
	}
	return out, nil
}
