// Command withcluster runs a command against a throwaway real control plane
// (etcd + kube-apiserver on loopback, see package controlplane).
//
//	withcluster [flags] -- command [args...]
//
// It starts the control plane, writes a kubeconfig into a temporary
// directory, runs the command with KUBECONFIG pointing at it, and when the
// command exits, or on Ctrl-C / SIGTERM, stops the command (its whole
// process group, so `go run`'s child goes too) and then the control plane.
// The exit status is the command's (128+signal if it was killed).
//
// With -control the command gets a control socket (its path in
// $WITHCLUSTER_CONTROL) through which it can snapshot and restore etcd, as
// an operator would (see ControlEnv).
//
// With -ha it starts the highly available topology instead
// (controlplane.StartHA): -apiservers kube-apiservers (default 3) on an
// etcd cluster of -etcd-members members (default 3), behind HAProxy; the
// kubeconfig points at HAProxy.
//
// The kubeconfig sets no client rate: a client-go program gets client-go's
// default of 5 requests per second (bursts of 10), which throttles a
// controller that writes on every event ("client-side throttling" in its
// log). Raise the rest.Config's QPS and Burst, as the examples do.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/freshinformer/freshinformer/integration/controlplane"
)

func main() {
	os.Exit(run())
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[withcluster] "+format+"\n", args...)
}

func run() int {
	fs := flag.NewFlagSet("withcluster", flag.ContinueOnError)
	binDir := fs.String("bin-dir", "", "directory with kube-apiserver and etcd (default: $KUBEBUILDER_ASSETS, then the `make bins` cache)")
	startTimeout := fs.Duration("start-timeout", 90*time.Second, "bound on control-plane start-up (with -ha, when unset: 3m)")
	grace := fs.Duration("grace", 10*time.Second, "how long the command may take to exit after SIGINT/SIGTERM before it is killed")
	verbose := fs.Bool("v", false, "show etcd and kube-apiserver output")
	ha := fs.Bool("ha", false, "highly available topology: several kube-apiservers on an etcd cluster, behind HAProxy (needs haproxy: make haproxy)")
	apiservers := fs.Int("apiservers", controlplane.DefaultHAAPIServers, "with -ha: number of kube-apiservers")
	etcdMembers := fs.Int("etcd-members", controlplane.DefaultHAEtcdMembers, "with -ha: number of etcd members")
	withControl := fs.Bool("control", false, "serve the command a control socket (its path in $"+ControlEnv+") to snapshot and restore etcd; not with -ha")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: withcluster [flags] -- command [args...]\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	argv := fs.Args()
	if len(argv) == 0 || *withControl && *ha {
		fs.Usage()
		return 2
	}

	// Signals before the command starts cancel the start-up.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	opts := controlplane.Options{BinDir: *binDir, StartTimeout: *startTimeout}
	haOpts := controlplane.HAOptions{BinDir: *binDir, StartTimeout: *startTimeout,
		APIServers: *apiservers, EtcdMembers: *etcdMembers}
	if *ha && !setFlag(fs, "start-timeout") {
		haOpts.StartTimeout = controlplane.DefaultHAStartTimeout
	}
	if *verbose {
		opts.Output = os.Stderr
		haOpts.Output = os.Stderr
	}
	if *ha {
		logf("starting %d etcd members, %d kube-apiservers and HAProxy ...", *etcdMembers, *apiservers)
	} else {
		logf("starting etcd + kube-apiserver ...")
	}
	t0 := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		cp  plane
		err error
	}
	started := make(chan result, 1)
	go func() {
		if *ha {
			cp, err := controlplane.StartHA(ctx, haOpts)
			if err != nil {
				started <- result{nil, err}
				return
			}
			started <- result{cp, nil}
			return
		}
		cp, err := controlplane.Start(ctx, opts)
		if err != nil {
			started <- result{nil, err}
			return
		}
		started <- result{cp, nil}
	}()
	var cp plane
	select {
	case r := <-started:
		if r.err != nil {
			cancel()
			logf("%v", r.err)
			return 1
		}
		cp = r.cp
	case sig := <-sigs:
		logf("%v during start-up: aborting", sig)
		cancel()
		if r := <-started; r.cp != nil { // Start cleans up after itself on error
			stopPlane(r.cp)
		}
		return signalCode(sig)
	}
	cancel()
	defer stopPlane(cp)
	logf("control plane ready in %v: %s", time.Since(t0).Round(time.Millisecond), cp.Describe())

	dir, err := os.MkdirTemp("", "withcluster-")
	if err != nil {
		logf("creating kubeconfig dir: %v", err)
		return 1
	}
	defer os.RemoveAll(dir)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cp.WriteKubeConfig(kubeconfig); err != nil {
		logf("%v", err)
		return 1
	}
	logf("kubeconfig: %s (valid until this exits)", kubeconfig)
	logf("  e.g. in another shell: KUBECONFIG=%s kubectl get ns", kubeconfig)
	logf("running: %q", argv)

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	if *withControl {
		sock := filepath.Join(dir, "control.sock")
		stop, err := serveControl(cp.(*controlplane.ControlPlane), sock)
		if err != nil {
			logf("control socket: %v", err)
			return 1
		}
		defer stop()
		cmd.Env = append(cmd.Env, ControlEnv+"="+sock)
	}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// Own process group: we signal the whole tree (`go run` does not pass
	// SIGTERM on to the program it built). Stdin stays closed: a background
	// process group reading the terminal would be stopped by SIGTTIN.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf("starting %q: %v", argv[0], err)
		return 1
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	pgid := cmd.Process.Pid
	var werr error
	linger := 2 * time.Second // for what the command leaves behind when it exits by itself
	select {
	case werr = <-waited:
	case sig := <-sigs:
		logf("%v: stopping %q (grace %v)", sig, argv[0], *grace)
		_ = syscall.Kill(-pgid, sig.(syscall.Signal))
		deadline := time.After(*grace)
		select {
		case werr = <-waited:
		case <-deadline:
			logf("%q still running after %v: killing it", argv[0], *grace)
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			werr = <-waited
		case sig2 := <-sigs:
			logf("%v again: killing %q", sig2, argv[0])
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			werr = <-waited
		}
		// `go run` exits at once on a signal; the program it built got the
		// same signal and may still be shutting down.
		linger = *grace
	}
	reapGroup(pgid, linger)
	code := exitCode(werr)
	logf("command exited with status %d", code)
	return code
}

// reapGroup ends what is left in the command's process group (for example
// the program `go run` built, when `go run` exited first): it waits up to
// linger for the group to empty, sends SIGTERM, waits a little more, then
// SIGKILL.
func reapGroup(pgid int, linger time.Duration) {
	gone := func(d time.Duration) bool {
		for end := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
			if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
				return true
			}
			if time.Now().After(end) {
				return false
			}
		}
	}
	if gone(linger) {
		return
	}
	logf("processes of the command are still running: SIGTERM")
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	if gone(2 * time.Second) {
		return
	}
	logf("processes of the command are still running: SIGKILL")
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// plane is what withcluster needs of a single-server or an HA control plane.
type plane interface {
	Describe() string
	WriteKubeConfig(path string) error
	Stop() error
}

// setFlag reports whether the command line set the named flag.
func setFlag(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func stopPlane(cp plane) {
	t0 := time.Now()
	logf("stopping control plane ...")
	if err := cp.Stop(); err != nil {
		logf("stopping control plane: %v", err)
		return
	}
	logf("control plane stopped in %v", time.Since(t0).Round(time.Millisecond))
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return 1
}

func signalCode(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}
