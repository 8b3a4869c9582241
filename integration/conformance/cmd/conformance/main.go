// Command conformance runs upstream's own test suites against freshinformer
// (SPEC guarantee 6, "drop-in"): client-go's tools/cache shared informer
// tests, controller-runtime's pkg/cache suite and the cache-backed specs of
// its pkg/client suite, and sample-controller's unit tests (many runs), at
// the versions the integration module requires.
//
// It takes upstream's test files from the Go module cache at run time,
// ports them into a generated, git-ignored package per suite
// (integration/conformance/_work), swaps only the constructors for the shim
// package's (which builds freshinformer's implementation, or upstream's for
// the control run), and drops the tests that cannot compile outside
// upstream's package because they use its unexported internals. Each
// suite's test binary then runs twice: against freshinformer and against
// plain upstream. It fails when a test that passes on upstream fails on
// freshinformer, or when the list of dropped tests differs from the one in
// docs/conformance.md. A test failing on both is reported, not counted.
//
// Run it from the integration module with KUBEBUILDER_ASSETS set (make
// conformance does, under hack/with-reaper.sh).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

var (
	moduleRoot string // the integration module's directory
	workDir    string // moduleRoot/conformance/_work
)

// integrationModule is the integration module's path; a suite's Home is a
// module nested in it.
const integrationModule = "github.com/freshinformer/freshinformer/integration"

// A home is the module a suite is ported, built and run in.
type home struct {
	dir, path string // the module's directory and module path
	work      string // where its suites' packages are generated
	nested    bool   // a module of its own, outside the workspace
}

func (s suite) home() home {
	if s.Home == "" {
		return home{dir: moduleRoot, path: integrationModule, work: workDir}
	}
	dir := filepath.Join(moduleRoot, s.Home)
	return home{dir: dir, path: integrationModule + "/" + s.Home, work: filepath.Join(dir, "_conformance"), nested: true}
}

// rel is p relative to the module's directory.
func (h home) rel(p string) string {
	r, err := filepath.Rel(h.dir, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(r)
}

// goCmd is a go command run in the module; a nested module builds alone
// (GOWORK=off), as its make targets build it.
func (h home) goCmd(args ...string) *exec.Cmd {
	cmd := exec.Command("go", args...)
	cmd.Dir = h.dir
	if h.nested {
		cmd.Env = append(os.Environ(), "GOWORK=off")
	}
	return cmd
}

func main() {
	race := flag.Bool("race", false, "build the test binaries with the race detector")
	docs := flag.String("docs", "", "check the dropped-test list in this Markdown file (between the conformance markers)")
	writeDocs := flag.Bool("write-docs", false, "with -docs: rewrite the list instead of checking it")
	only := flag.String("suite", "", "run only the suite with this directory name (clientgo_cache, cr_cache, cr_client, samplecontroller)")
	portOnly := flag.Bool("port-only", false, "generate the packages and check the docs, run nothing")
	runs := flag.Int("runs", 0, "run the suites that repeat (samplecontroller) this many times instead of their default")
	flag.Parse()

	start := time.Now()
	if err := setup(); err != nil {
		fatal(err)
	}
	var buildFlags []string
	if *race {
		buildFlags = append(buildFlags, "-race")
	}

	var all []*ported
	for _, s := range suites {
		if *only != "" && s.Dir != *only {
			continue
		}
		if s.Runs > 0 && *runs > 0 {
			s.Runs = *runs
		}
		modDir, version, err := moduleDir(s.home(), s.Module)
		if err != nil {
			fatal(err)
		}
		t := time.Now()
		p, err := port(s, modDir, version, s.home().work, buildFlags)
		if err != nil {
			fatal(fmt.Errorf("porting %s: %w", s.Name, err))
		}
		fmt.Printf("[conformance] ported %s (%s %s): %d test declarations kept, %d dropped, in %s\n",
			s.Name, s.Module, version, len(p.Kept), countTests(p.Dropped), time.Since(t).Round(time.Millisecond))
		for _, f := range p.Focus {
			fmt.Printf("[conformance]   cache-backed spec nodes (ginkgo --focus-file): %s\n", f)
		}
		all = append(all, p)
	}

	docsOK := true
	if *docs != "" {
		if *only != "" {
			fmt.Printf("[conformance] -suite: %s not checked (it lists every suite)\n", *docs)
		} else {
			ok, err := checkDocs(*docs, all, *writeDocs)
			if err != nil {
				fatal(err)
			}
			docsOK = ok
		}
	}
	if *portOnly {
		if !docsOK {
			os.Exit(1)
		}
		return
	}

	for _, p := range all {
		if p.Suite.Envtest && os.Getenv("KUBEBUILDER_ASSETS") == "" {
			fatal(fmt.Errorf("%s starts envtest: set KUBEBUILDER_ASSETS to the directory of kube-apiserver and etcd (integration/hack/build-bins.sh --dir)", p.Suite.Name))
		}
	}
	var sum summary
	for _, p := range all {
		if err := p.run(buildFlags, &sum); err != nil {
			fatal(fmt.Errorf("running %s: %w", p.Suite.Name, err))
		}
	}
	sum.print(time.Since(start))
	if !docsOK {
		fmt.Println("[conformance] FAIL: docs/conformance.md's list of dropped tests is stale (see above)")
	}
	if sum.broken > 0 {
		fmt.Printf("[conformance] FAIL: %d suite(s) passed no test against upstream: the harness is broken, nothing was compared\n", sum.broken)
	}
	if sum.regressions > 0 || sum.broken > 0 || !docsOK {
		os.Exit(1)
	}
}

func setup() error {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return fmt.Errorf("run from the integration module")
	}
	moduleRoot = filepath.Dir(gomod)
	workDir = filepath.Join(moduleRoot, "conformance", "_work")
	return os.MkdirAll(workDir, 0o755)
}

// moduleDir returns the directory of mod's source, at the version the
// module h requires, and that version. It asks `go mod download
// -json` for it rather than `go list -m`: a module whose zip is in the
// download cache but was never extracted (only its go.mod was needed so far)
// has no directory yet, and go mod download extracts it.
func moduleDir(h home, mod string) (string, string, error) {
	out, err := h.goCmd("list", "-m", "-f", "{{.Version}}", mod).Output()
	if err != nil {
		return "", "", fmt.Errorf("go list -m %s: %w%s", mod, err, stderrOf(err))
	}
	version := strings.TrimSpace(string(out))
	if version == "" {
		return "", "", fmt.Errorf("go list -m %s: no version (is it replaced by a directory?)", mod)
	}
	out, err = h.goCmd("mod", "download", "-json", mod+"@"+version).Output()
	var dl struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &dl); jerr != nil && err == nil {
		err = jerr
	}
	if dl.Error != "" {
		return "", "", fmt.Errorf("go mod download %s@%s: %s", mod, version, dl.Error)
	}
	if err != nil {
		return "", "", fmt.Errorf("go mod download %s@%s: %w%s", mod, version, err, stderrOf(err))
	}
	if dl.Dir == "" {
		return "", "", fmt.Errorf("go mod download %s@%s: no directory", mod, version)
	}
	if fi, err := os.Stat(dl.Dir); err != nil || !fi.IsDir() {
		return "", "", fmt.Errorf("go mod download %s@%s: directory %s: %v", mod, version, dl.Dir, err)
	}
	return dl.Dir, version, nil
}

// stderrOf is ": " and the standard error of a failed command, if any.
func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return ": " + strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}

func countTests(ds []dropped) int {
	n := 0
	for _, d := range ds {
		if d.Test {
			n++
		}
	}
	return n
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "[conformance] error: %v\n", err)
	os.Exit(2)
}
