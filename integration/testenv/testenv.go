// Package testenv shares one real control plane (etcd + kube-apiserver)
// among the tests of a package.
//
// Use it from exactly one TestMain per test package:
//
//	func TestMain(m *testing.M) { testenv.Main(m, controlplane.Options{}) }
//
// and in tests:
//
//	cs := testenv.Clientset(t)
//	ns := testenv.Namespace(t)          // fresh namespace, deleted after t
//	ctx := testenv.Context(t, time.Minute)
//
// Main stops the control plane on every exit path it can see: normal end,
// SIGINT/SIGTERM, and a watchdog that fires shortly before `go test
// -timeout` would panic (a panic skips deferred calls and would orphan the
// processes, which run in their own process group).
package testenv

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/freshinformer/freshinformer/integration/controlplane"
)

// plane is set by Main before any test runs.
var plane atomic.Pointer[controlplane.ControlPlane]

// extra holds the planes started by NewPlane that are still running, so the
// signal and timeout paths stop them too.
var extra sync.Map // *controlplane.ControlPlane -> struct{}

// stopExtra stops every plane NewPlane started and the test did not stop.
func stopExtra() {
	extra.Range(func(k, _ any) bool {
		if err := k.(*controlplane.ControlPlane).Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stopping a test's control plane: %v\n", err)
		}
		extra.Delete(k)
		return true
	})
}

// NewPlane starts a control plane of the test's own, for tests that damage
// it (etcd restores, kill -9) and must not disturb the shared one. It is
// stopped when the test ends, and on the signal and timeout paths of Main.
func NewPlane(tb testing.TB, opts controlplane.Options) *controlplane.ControlPlane {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, opts)
	if err != nil {
		tb.Fatalf("testenv: starting a control plane: %v", err)
	}
	extra.Store(cp, struct{}{})
	tb.Cleanup(func() {
		extra.Delete(cp)
		if err := cp.Stop(); err != nil {
			tb.Errorf("testenv: stopping the test's control plane: %v", err)
		}
	})
	return cp
}

// Main starts the shared control plane, runs the tests, stops the plane,
// checks for leaked goroutines (only when the tests passed) and exits.
// It never returns.
func Main(m *testing.M, opts controlplane.Options) {
	flag.Parse() // for -test.timeout and -test.v below

	logf("starting control plane (etcd + kube-apiserver)")
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cp, err := controlplane.Start(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		os.Exit(1)
	}
	plane.Store(cp)
	logf("control plane ready in %v: %s", time.Since(start).Round(time.Millisecond), cp.Describe())

	stopSignals := stopOnSignal(cp)
	stopWatchdog := stopBeforeTimeout(cp)

	code := m.Run()

	stopWatchdog()
	stopSignals()
	stopStart := time.Now()
	if err := cp.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stopping control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	logf("control plane stopped in %v", time.Since(stopStart).Round(time.Millisecond))

	if code == 0 {
		if err := goleak.Find(GoleakOptions()...); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: goroutines leaked by the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// GoleakOptions are the goroutines that this harness and its libraries keep
// on purpose; pass them to goleak.VerifyNone in individual tests too.
func GoleakOptions() []goleak.Option {
	return []goleak.Option{
		// klog starts its flush daemon on first use and never stops it.
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		// Our own signal watcher (stopOnSignal) and the runtime's
		// signal-delivery loop it needs.
		goleak.IgnoreAnyFunction("github.com/freshinformer/freshinformer/integration/testenv.stopOnSignal.func1"),
		goleak.IgnoreTopFunction("os/signal.signal_recv"),
		goleak.IgnoreTopFunction("os/signal.loop"),
		// apimachinery's watch.Filter, which controller-runtime wraps
		// around metadata-only watches, blocks forever sending an event
		// its consumer stopped reading (upstream; no Stop channel).
		goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/watch.(*filteredWatch).loop"),
	}
}

// stopOnSignal stops the plane and exits on SIGINT/SIGTERM. The processes
// sit in their own process group, so a terminal's Ctrl-C reaches only us.
func stopOnSignal(cp *controlplane.ControlPlane) (stop func()) {
	ch := make(chan os.Signal, 1)
	done := make(chan struct{})
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case sig := <-ch:
			fmt.Fprintf(os.Stderr, "testenv: %v: stopping control plane\n", sig)
			stopExtra()
			if err := cp.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "testenv: stopping control plane: %v\n", err)
			}
			code := 130
			if sig == syscall.SIGTERM {
				code = 143
			}
			os.Exit(code)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

// stopBeforeTimeout arms a watchdog that dumps goroutines, stops the plane
// and exits 10 s before `go test -timeout` would panic.
func stopBeforeTimeout(cp *controlplane.ControlPlane) (stop func()) {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return func() {}
	}
	timeout, err := time.ParseDuration(f.Value.String())
	if err != nil || timeout <= 20*time.Second {
		return func() {}
	}
	t := time.AfterFunc(timeout-10*time.Second, func() {
		buf := make([]byte, 8<<20)
		buf = buf[:runtime.Stack(buf, true)]
		fmt.Fprintf(os.Stderr, "testenv: test binary about to hit -timeout %v; goroutines:\n%s\n", timeout, buf)
		stopExtra()
		if err := cp.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stopping control plane: %v\n", err)
		}
		fmt.Fprintf(os.Stderr, "testenv: FAIL: tests did not finish within -timeout %v; control plane stopped\n", timeout)
		os.Exit(2)
	})
	return func() { t.Stop() }
}

func logf(format string, args ...any) {
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "testenv: "+format+"\n", args...)
	}
}

// Plane returns the shared control plane; it fails the test if Main did not
// start one.
func Plane(tb testing.TB) *controlplane.ControlPlane {
	tb.Helper()
	cp := plane.Load()
	if cp == nil {
		tb.Fatal("testenv: no control plane; call testenv.Main from TestMain")
	}
	return cp
}

// Config returns a fresh admin rest.Config for the shared control plane.
func Config(tb testing.TB) *rest.Config {
	tb.Helper()
	return Plane(tb).Config()
}

// Clientset returns an admin clientset for the shared control plane.
func Clientset(tb testing.TB) kubernetes.Interface {
	tb.Helper()
	cs, err := kubernetes.NewForConfig(Config(tb))
	if err != nil {
		tb.Fatalf("testenv: clientset: %v", err)
	}
	return cs
}

// Context returns a context that times out after d and is cancelled when
// the test ends.
func Context(tb testing.TB, d time.Duration) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// Namespace creates a namespace named after the test and deletes it when
// the test ends, so tests sharing the plane do not see each other's objects.
func Namespace(tb testing.TB) string {
	tb.Helper()
	cs := Clientset(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: dnsPrefix(tb.Name())},
	}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatalf("testenv: creating namespace: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Without a kube-controller-manager the namespace only gets
		// Terminating, which is enough to hide it from later tests' lists
		// by name; its objects stay in etcd, which nothing here minds.
		err := cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			tb.Errorf("testenv: deleting namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// dnsPrefix turns a test name into a valid, short GenerateName prefix.
func dnsPrefix(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	p := b.String()
	if len(p) > 40 {
		p = p[:40]
	}
	return strings.Trim(p, "-") + "-"
}
