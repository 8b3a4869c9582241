package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/onsi/ginkgo/v2/types"
)

// envImpl is shim.EnvImpl (not imported, so that porting works while the
// library does not build).
const envImpl = "FRESHINFORMER_CONFORMANCE_IMPL"

// The two implementations every suite runs against: the values of envImpl.
const (
	implOurs     = "freshinformer"
	implUpstream = "upstream"
)

// outcome is one test's or spec's result in one run.
type outcome struct {
	status  string // "pass", "fail" or "skip"
	message string // for failures
}

// results maps a test or spec name to its outcome.
type results map[string]outcome

// summary accumulates the comparison over the suites.
type summary struct {
	passed, regressions, shared, oursOnly, skipped, flaky int
	broken                                                int // suites in which no test passed against upstream
	lines                                                 []string
}

func (s *summary) print(elapsed time.Duration) {
	fmt.Println()
	fmt.Println("[conformance] ===== summary =====")
	for _, l := range s.lines {
		fmt.Println(l)
	}
	fmt.Printf("[conformance] %d pass on both; %d fail on freshinformer only (regressions); %d failed on freshinformer then passed on a rerun (flaky, not counted); %d fail on upstream too (not counted); %d pass on freshinformer only; %d skipped on both\n",
		s.passed, s.regressions, s.flaky, s.shared, s.oursOnly, s.skipped)
	fmt.Printf("[conformance] total time %s\n", elapsed.Round(time.Second))
	fmt.Printf("conformance: %d passed, %d failed\n", s.passed+s.oursOnly, s.regressions)
}

// run builds the suite's test binary once and runs it against both
// implementations, then compares.
func (p *ported) run(buildFlags []string, sum *summary) error {
	s := p.Suite
	bin := filepath.Join(workDir, "bin", s.Dir+".test")
	logs := filepath.Join(workDir, "logs")
	for _, d := range []string{filepath.Dir(bin), logs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	fmt.Printf("\n[conformance] ===== %s (%s %s) =====\n", s.Name, s.Module, p.Version)
	t := time.Now()
	args := append([]string{"test", "-c", "-o", bin}, buildFlags...)
	h := s.home()
	args = append(args, "./"+h.rel(p.Dir))
	cmd := h.goCmd(args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	fmt.Printf("[conformance] built %s in %s\n", h.rel(bin), time.Since(t).Round(time.Millisecond))
	// A race-enabled binary is about 80 MB; go's build cache keeps it.
	defer os.Remove(bin)

	// Both runs at once: the suites mostly wait (on envtest, on timers),
	// and a run's output is printed once it is done.
	impls := []string{implOurs, implUpstream}
	got := make([]results, len(impls))
	outs := make([]bytes.Buffer, len(impls))
	errs := make([]error, len(impls))
	var wg sync.WaitGroup
	for i, impl := range impls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.Now()
			w := &outs[i]
			fmt.Fprintf(w, "[conformance] --- %s against %s\n", s.Dir, impl)
			switch {
			case s.Runs > 0:
				got[i], errs[i] = p.runRepeated(bin, impl, logs, w)
			case s.PerTest:
				got[i], errs[i] = p.runPerTest(bin, impl, logs, w)
			default:
				got[i], errs[i] = p.runWhole(bin, impl, logs, w)
			}
			fmt.Fprintf(w, "[conformance] --- %s against %s: %s\n", s.Dir, impl, time.Since(t).Round(time.Millisecond))
		}()
	}
	wg.Wait()
	for i := range impls {
		os.Stdout.Write(outs[i].Bytes())
		if errs[i] != nil {
			return errs[i]
		}
	}
	flaky, err := p.rerunRegressions(bin, logs, got[0], got[1])
	if err != nil {
		return err
	}
	compare(s, got[0], got[1], flaky, sum)
	return nil
}

// Reruns: a test that fails on freshinformer but passed on upstream runs
// again against freshinformer, up to maxReruns times, when there are at
// most maxRerunTests of them. One that passes then is reported as flaky
// and does not fail the target; the specs of upstream's suites that race
// a cancelled context against a fast cache sync fail now and then on
// upstream too.
const (
	maxReruns     = 2
	maxRerunTests = 5
)

// rerunRegressions returns the regressions that passed on a rerun, with
// the attempt that passed.
func (p *ported) rerunRegressions(bin, logs string, ours, up results) (map[string]int, error) {
	var regs []string
	if p.Suite.Runs > 0 {
		// Repeated runs are the measure: a failure in any counts.
		return map[string]int{}, nil
	}
	for n, u := range up {
		if u.status == "pass" && ours[n].status != "pass" {
			regs = append(regs, n)
		}
	}
	sort.Strings(regs)
	flaky := map[string]int{}
	if len(regs) == 0 || len(regs) > maxRerunTests {
		return flaky, nil
	}
	for attempt := 1; attempt <= maxReruns && len(regs) > 0; attempt++ {
		fmt.Printf("[conformance] --- %s: rerun %d/%d against %s of %s\n", p.Suite.Dir, attempt, maxReruns, implOurs, strings.Join(regs, "; "))
		var w bytes.Buffer
		var r results
		var err error
		if p.Suite.PerTest {
			tops := map[string]bool{}
			for _, n := range regs {
				top, _, _ := strings.Cut(n, "/")
				tops[top] = true
			}
			var names []string
			for t := range tops {
				names = append(names, t)
			}
			sort.Strings(names)
			r, err = p.runTests(bin, implOurs, names, &w)
		} else {
			var focus []string
			for _, n := range regs {
				focus = append(focus, regexp.QuoteMeta(strings.TrimSpace(dedupSuffix.ReplaceAllString(n, "")))+"$")
			}
			r, err = p.runSpecs(bin, implOurs, fmt.Sprintf("%s.rerun%d", implOurs, attempt), logs, focus, &w)
		}
		os.Stdout.Write(w.Bytes())
		if err != nil {
			return nil, err
		}
		var still []string
		for _, n := range regs {
			if r[n].status == "pass" {
				flaky[n] = attempt
			} else {
				still = append(still, n)
			}
		}
		regs = still
	}
	return flaky, nil
}

var dedupSuffix = regexp.MustCompile(` #\d+$`)

var testLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+) \(`)

// runPerTest runs each top-level test in a process of its own.
func (p *ported) runPerTest(bin, impl, logs string, w io.Writer) (results, error) {
	_ = os.Remove(filepath.Join(logs, p.Suite.Dir+"."+impl+".log"))
	cmd := exec.Command(bin, "-test.list", ".")
	cmd.Dir = p.Dir
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s -test.list: %w", bin, err)
	}
	var names []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "Test") || strings.HasPrefix(l, "Example") {
			names = append(names, l)
		}
	}
	start := time.Now()
	r, err := p.runTests(bin, impl, names, w)
	if err != nil {
		return nil, err
	}
	failed := false
	for _, o := range r {
		failed = failed || o.status == "fail"
	}
	pkg := p.pkgPath()
	if failed {
		fmt.Fprintf(w, "FAIL\t%s [%s]\t%.3fs\n", pkg, impl, time.Since(start).Seconds())
	} else {
		fmt.Fprintf(w, "ok  \t%s [%s]\t%.3fs\n", pkg, impl, time.Since(start).Seconds())
	}
	return r, nil
}

// runTests runs each named top-level test in a process of its own, and
// appends the output to the suite's log.
func (p *ported) runTests(bin, impl string, names []string, w io.Writer) (results, error) {
	r := results{}
	log, err := os.OpenFile(filepath.Join(workDir, "logs", p.Suite.Dir+"."+impl+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	for _, name := range names {
		out, exitErr := p.exec(bin, impl, []string{"-test.run", "^" + regexp.QuoteMeta(name) + "$", "-test.v", "-test.count=1"})
		if _, err := log.Write(out); err != nil {
			return nil, err
		}
		for _, l := range goTestLines(out, r) {
			fmt.Fprintln(w, l)
		}
		for n, m := range goTestMessages(out) {
			if r[n].status == "fail" && n != name {
				r[n] = outcome{status: "fail", message: m}
			}
		}
		o, ok := r[name]
		switch {
		case !ok || (o.status == "pass" && exitErr != nil):
			// The binary died, or the test passed and goleak (TestMain)
			// found goroutines it left behind.
			r[name] = outcome{status: "fail", message: fmt.Sprintf("test binary exited (%v):\n%s", exitErr, failureText(out))}
			fmt.Fprintf(w, "--- FAIL: %s (test binary exited: %v)\n", name, exitErr)
		case o.status == "fail":
			r[name] = outcome{status: "fail", message: failureText(out)}
		}
	}
	return r, nil
}

// runRepeated runs the whole binary Runs times with -test.count=Count and
// counts, per test, the iterations that passed and failed: a test passes
// only if it passed every time. A run whose binary dies (a panic, a race
// report outside any test) fails as "[binary]".
func (p *ported) runRepeated(bin, impl, logs string, w io.Writer) (results, error) {
	log, err := os.Create(filepath.Join(logs, p.Suite.Dir+"."+impl+".log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	passes, fails := map[string]int{}, map[string]int{}
	first := map[string]string{}
	start := time.Now()
	for run := 1; run <= p.Suite.Runs; run++ {
		out, exitErr := p.exec(bin, impl, []string{"-test.v", "-test.count=" + strconv.Itoa(p.Suite.Count)})
		if _, err := log.Write(out); err != nil {
			return nil, err
		}
		failedHere := false
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			m := testLine.FindStringSubmatch(sc.Text())
			switch {
			case m == nil:
			case m[1] == "PASS":
				passes[m[2]]++
			case m[1] == "FAIL":
				fails[m[2]]++
				failedHere = true
			}
		}
		for n, msg := range goTestMessages(out) {
			if _, ok := first[n]; !ok {
				first[n] = fmt.Sprintf("run %d: %s", run, msg)
			}
		}
		if exitErr != nil && !failedHere {
			fails["[binary]"]++
			if _, ok := first["[binary]"]; !ok {
				first["[binary]"] = fmt.Sprintf("run %d: the test binary exited (%v) after:\n%s", run, exitErr, tail(out, 40))
			}
		}
	}
	r := results{}
	total, failed := 0, 0
	for n := range passes {
		r[n] = outcome{status: "pass"}
	}
	for n, f := range fails {
		r[n] = outcome{status: "fail", message: fmt.Sprintf("failed %d of %d times; %s", f, f+passes[n], first[n])}
	}
	for n, o := range r {
		total += passes[n] + fails[n]
		failed += fails[n]
		if o.status == "fail" {
			fmt.Fprintf(w, "--- FAIL: %s (%d of %d)\n", n, fails[n], passes[n]+fails[n])
		}
	}
	status := "ok  "
	if failed > 0 {
		status = "FAIL"
	}
	fmt.Fprintf(w, "%s\t%s [%s]\t%d runs of -count=%d: %d tests, %d test runs, %d failed\t%.3fs\n", status, p.Suite.Pkg, impl,
		p.Suite.Runs, p.Suite.Count, len(r), total, failed, time.Since(start).Seconds())
	return r, nil
}

// runWhole runs the binary once (a ginkgo suite with envtest).
func (p *ported) runWhole(bin, impl, logs string, w io.Writer) (results, error) {
	return p.runSpecs(bin, impl, impl, logs, nil, w)
}

// runSpecs runs the binary's specs (those of focus, if any) once; logName
// names its log and report.
func (p *ported) runSpecs(bin, impl, logName, logs string, focus []string, w io.Writer) (results, error) {
	report := filepath.Join(logs, p.Suite.Dir+"."+logName+".ginkgo.json")
	_ = os.Remove(report)
	args := []string{
		"-test.v", "-test.count=1",
		"-ginkgo.no-color",
		"-ginkgo.timeout=" + (p.Suite.Timeout - 20*time.Second).String(),
		"-ginkgo.json-report=" + report,
	}
	for _, f := range p.Focus {
		args = append(args, "-ginkgo.focus-file="+f)
	}
	for _, f := range focus {
		args = append(args, "-ginkgo.focus="+f)
	}
	out, exitErr := p.exec(bin, impl, args)
	if err := os.WriteFile(filepath.Join(logs, p.Suite.Dir+"."+logName+".log"), out, 0o644); err != nil {
		return nil, err
	}
	r := results{}
	lines := goTestLines(out, r)
	for _, l := range ginkgoSummary(out) {
		fmt.Fprintln(w, l)
	}
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	specs, err := readReport(report)
	if err != nil {
		fmt.Fprintf(w, "--- FAIL: the suite wrote no report (%v); the test binary exited (%v) after:\n%s\n", err, exitErr, tail(out, 40))
		r["[suite]"] = outcome{status: "fail", message: fmt.Sprintf("no ginkgo report: the test binary exited (%v) after:\n%s", exitErr, tail(out, 40))}
		return r, nil
	}
	for n, m := range goTestMessages(out) {
		if r[n].status == "fail" {
			r[n] = outcome{status: "fail", message: m}
		}
	}
	// The Go test that ran the specs is judged by its specs.
	for name := range r {
		if strings.HasPrefix(name, "TestSource") || strings.HasPrefix(name, "TestClient") {
			delete(r, name)
		}
	}
	for k, v := range specs {
		r[k] = v
	}
	pkg := p.pkgPath()
	status := "ok  "
	if exitErr != nil {
		status = "FAIL"
	}
	fmt.Fprintf(w, "%s\t%s [%s]\n", status, pkg, impl)
	return r, nil
}

// exec runs the test binary in the package directory, as go test does.
func (p *ported) exec(bin, impl string, args []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.Suite.Timeout+30*time.Second)
	defer cancel()
	args = append(args, "-test.timeout="+p.Suite.Timeout.String())
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = p.Dir
	cmd.Env = append(os.Environ(), envImpl+"="+impl)
	// Let envtest stop its processes when the binary is interrupted.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 20 * time.Second
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	return b.Bytes(), err
}

// goTestLines records the --- PASS/FAIL/SKIP lines of out into r and
// returns them.
func goTestLines(out []byte, r results) []string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := testLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		lines = append(lines, sc.Text())
		status := map[string]string{"PASS": "pass", "FAIL": "fail", "SKIP": "skip"}[m[1]]
		r[m[2]] = outcome{status: status}
	}
	return lines
}

// goTestMessages splits go test -v output by test (following the === RUN,
// CONT and NAME markers, as parallel tests interleave) and returns the
// failure text of each failed test.
func goTestMessages(out []byte) map[string]string {
	segs := map[string]*bytes.Buffer{}
	msgs := map[string]string{}
	current := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := testMarker.FindStringSubmatch(line); m != nil {
			current = m[1]
			continue
		}
		if m := testLine.FindStringSubmatch(line); m != nil {
			if m[1] == "FAIL" && segs[m[2]] != nil {
				msgs[m[2]] = failureText(segs[m[2]].Bytes())
			}
			continue
		}
		if current == "" {
			continue
		}
		if segs[current] == nil {
			segs[current] = &bytes.Buffer{}
		}
		segs[current].WriteString(line + "\n")
	}
	return msgs
}

var testMarker = regexp.MustCompile(`^=== (?:RUN|CONT|NAME|PAUSE)\s+(\S+)`)

var ginkgoSummaryLine = regexp.MustCompile(`^(Ran \d+ of \d+ Specs|SUCCESS!|FAIL!|Test Suite (Passed|Failed))`)

func ginkgoSummary(out []byte) []string {
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if ginkgoSummaryLine.MatchString(strings.TrimSpace(l)) {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	return lines
}

// readReport turns a ginkgo JSON report into per-spec outcomes.
func readReport(name string) (results, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var reports []types.Report
	if err := json.Unmarshal(b, &reports); err != nil {
		return nil, err
	}
	if len(reports) == 0 {
		return nil, errors.New("empty report")
	}
	r := results{}
	for _, rep := range reports {
		for _, sp := range rep.SpecReports {
			var name string
			switch sp.LeafNodeType {
			case types.NodeTypeIt:
				name = strings.TrimSpace(strings.Join(append(append([]string{}, sp.ContainerHierarchyTexts...), sp.LeafNodeText), " "))
			default:
				if sp.State.Is(types.SpecStatePassed | types.SpecStateSkipped) {
					continue
				}
				name = "[" + sp.LeafNodeType.String() + "]"
			}
			for i := 2; ; i++ {
				if _, dup := r[name]; !dup {
					break
				}
				name = strings.TrimSuffix(name, fmt.Sprintf(" #%d", i-1)) + fmt.Sprintf(" #%d", i)
			}
			switch {
			case sp.State.Is(types.SpecStatePassed):
				r[name] = outcome{status: "pass"}
			case sp.State.Is(types.SpecStateSkipped | types.SpecStatePending):
				// Filtered out (focus) or pending upstream.
			default:
				msg := fmt.Sprintf("[%s] %s\n%s", sp.State, strings.TrimSpace(sp.Failure.Message), sp.Failure.Location)
				if sp.Failure.ForwardedPanic != "" {
					msg += "\npanic: " + sp.Failure.ForwardedPanic
				}
				r[name] = outcome{status: "fail", message: msg}
			}
		}
	}
	return r, nil
}

// compare prints every test whose outcome differs from a pass on both.
func compare(s suite, ours, up results, flaky map[string]int, sum *summary) {
	names := map[string]bool{}
	for n := range ours {
		names[n] = true
	}
	for n := range up {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var regress, shared, oursOnly, flakes []string
	passed := 0
	for _, n := range sorted {
		o, u := ours[n], up[n]
		switch {
		case o.status == "pass" && u.status == "pass":
			passed++
		case o.status == "skip" && u.status == "skip":
			sum.skipped++
		case u.status == "pass" && o.status != "pass" && flaky[n] > 0:
			flakes = append(flakes, fmt.Sprintf("  FLAKY on freshinformer (failed, then passed on rerun %d; not counted) %s\n%s", flaky[n], n, indent(o.message)))
		case u.status == "pass" && o.status != "pass":
			msg := o.message
			if o.status == "" {
				msg = "did not run against freshinformer (an earlier failure ended the test binary)"
			} else if o.status == "skip" {
				msg = "skipped against freshinformer"
			}
			regress = append(regress, fmt.Sprintf("  REGRESSION %s\n%s", n, indent(msg)))
		case o.status == "pass":
			oursOnly = append(oursOnly, fmt.Sprintf("  passes on freshinformer only: %s (upstream: %s)\n%s", n, orNone(u.status), indent(u.message)))
		default:
			shared = append(shared, fmt.Sprintf("  FAILS ON BOTH (not counted) %s\n    freshinformer:\n%s\n    upstream:\n%s", n, indent(o.message), indent(u.message)))
		}
	}
	upPassed := 0
	for _, u := range up {
		if u.status == "pass" {
			upPassed++
		}
	}
	if upPassed == 0 {
		sum.broken++
		sum.lines = append(sum.lines, fmt.Sprintf("[conformance] %s: BROKEN: no test passed against upstream (the control run), so nothing was compared", s.Name))
	}
	sum.passed += passed
	sum.regressions += len(regress)
	sum.shared += len(shared)
	sum.oursOnly += len(oursOnly)
	sum.flaky += len(flakes)
	sum.lines = append(sum.lines, fmt.Sprintf("[conformance] %s: %d pass on both, %d regressions, %d flaky on freshinformer, %d fail on both, %d pass on freshinformer only",
		s.Name, passed, len(regress), len(flakes), len(shared), len(oursOnly)))
	sum.lines = append(sum.lines, regress...)
	sum.lines = append(sum.lines, flakes...)
	sum.lines = append(sum.lines, shared...)
	sum.lines = append(sum.lines, oursOnly...)
}

func orNone(s string) string {
	if s == "" {
		return "did not run"
	}
	return s
}

// failureText keeps a failed Go test's output from its first error
// (a t.Error/t.Fatal line, a panic) on, else its tail.
func failureText(out []byte) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	first := -1
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "panic:") || strings.HasPrefix(t, "fatal error:") || testErrorLine.MatchString(t) {
			first = i
			break
		}
	}
	if first < 0 {
		return tail(out, 25)
	}
	var keep []string
	for _, l := range lines[first:] {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- PASS") || t == "FAIL" || t == "PASS" {
			continue
		}
		keep = append(keep, l)
	}
	if len(keep) > 40 {
		keep = append(keep[:40], "    ...")
	}
	return strings.Join(keep, "\n")
}

var testErrorLine = regexp.MustCompile(`^\S+_test\.go:\d+: `)

func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func indent(s string) string {
	if s == "" {
		return "      (no message)"
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "      " + l
	}
	return strings.Join(lines, "\n")
}

// pkgPath is the import path of the generated package, as go test prints it.
func (p *ported) pkgPath() string {
	h := p.Suite.home()
	return h.path + "/" + h.rel(p.Dir)
}
