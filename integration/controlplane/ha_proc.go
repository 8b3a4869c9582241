package controlplane

import (
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// proc is one process of an HA plane (an etcd member, a kube-apiserver,
// HAProxy), started and stopped on its own. It runs in a process group of
// its own, like envtest's, and is recorded for the reaper while it runs.
type proc struct {
	name     string // component name in errors and in the PID directory
	path     string
	args     []string
	out      *tailBuffer
	output   io.Writer // optional copy of the output
	children *children

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd has exited
	paused bool
}

func newProc(name, path string, args []string, output io.Writer, ch *children) *proc {
	return &proc{name: name, path: path, args: args, out: newTailBuffer(16 << 10), output: output, children: ch}
}

func (p *proc) writer() io.Writer {
	if p.output != nil {
		return io.MultiWriter(p.out, p.output)
	}
	return p.out
}

// start runs the process; it does not wait for readiness.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return nil
	}
	cmd := exec.Command(p.path, p.args...)
	cmd.Stdout, cmd.Stderr = p.writer(), p.writer()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return &Error{Component: p.name, Op: "start", Err: err}
	}
	p.cmd, p.done, p.paused = cmd, make(chan struct{}), false
	p.children.recordPID(p.name, cmd.Process.Pid, p.path)
	done := p.done
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	return nil
}

// running reports whether the process was started and has not exited.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *proc) isPaused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// exited is closed when the current process exits (nil if none runs).
func (p *proc) exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// stop ends the process: SIGTERM (SIGKILL when kill), then SIGKILL after
// timeout. A paused process is continued so that it can handle SIGTERM.
func (p *proc) stop(timeout time.Duration, kill bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil
	}
	pid, done := p.cmd.Process.Pid, p.done
	defer func() {
		p.cmd, p.done, p.paused = nil, nil, false
		p.children.forget(p.name)
	}()
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-pid, sig)
	_ = syscall.Kill(-pid, syscall.SIGCONT)
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	select {
	case <-done:
		return &Error{Component: p.name, Op: "stop", Err: fmt.Errorf("killed after %v", timeout), Output: p.out.String()}
	case <-time.After(10 * time.Second):
		return &Error{Component: p.name, Op: "stop", Err: errors.New("still running 10s after SIGKILL"), Output: p.out.String()}
	}
}

// pause sends SIGSTOP (resume: SIGCONT). A paused process keeps its
// sockets: peers see no error, only silence.
func (p *proc) pause(paused bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return &Error{Component: p.name, Op: "pause", Err: errors.New("not running")}
	}
	sig := syscall.SIGCONT
	if paused {
		sig = syscall.SIGSTOP
	}
	if err := syscall.Kill(p.cmd.Process.Pid, sig); err != nil {
		return &Error{Component: p.name, Op: "pause", Err: err}
	}
	p.paused = paused
	return nil
}
