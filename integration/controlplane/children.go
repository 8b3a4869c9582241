package controlplane

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// EnvPIDDir names a directory in which the package records the processes it
// starts, one file per process named by its PID and holding the binary's
// path, and its work directories (files named "dir.*" holding the path).
// integration/hack/with-reaper.sh kills what is still recorded there when
// the program that started them died without calling Stop (SIGKILL, a
// crash): envtest runs each binary in its own process group, so nothing
// else would end them.
const EnvPIDDir = "FRESHINFORMER_PID_DIR"

// children tracks our etcd and kube-apiserver PIDs in $FRESHINFORMER_PID_DIR.
type children struct {
	mu   sync.Mutex
	dir  string
	pids map[string]int // component -> pid
}

func newChildren() *children {
	return &children{dir: os.Getenv(EnvPIDDir), pids: map[string]int{}}
}

// running returns the children running binary now, to pass to record
// after starting one more.
func (c *children) running(binary string) map[int]bool {
	before := map[int]bool{}
	for _, pid := range childrenRunning(binary) {
		before[pid] = true
	}
	return before
}

// record finds the child process running binary that was not running
// before its start (before, from running), nor is recorded under another
// component (replicas run the same binary), and records it: always in
// memory (for pid), and in the PID directory when there is one.
func (c *children) record(component, binary string, before map[int]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	known := make(map[int]bool, len(c.pids))
	for comp, pid := range c.pids {
		if comp != component {
			known[pid] = true
		}
	}
	pid := startedChild(childrenRunning(binary), before, known)
	if pid <= 0 {
		return
	}
	c.pids[component] = pid
	if c.dir != "" {
		_ = os.WriteFile(filepath.Join(c.dir, strconv.Itoa(pid)), []byte(binary+"\n"), 0o600)
	}
}

// startedChild picks, among the children running now, the one started
// since before and not known. Not the highest PID: PIDs wrap around, and
// the highest may be a process another control plane of this binary
// started earlier. With several candidates (starts racing) the highest
// PID is a guess; 0 if there is none.
func startedChild(now []int, before, known map[int]bool) int {
	best := 0
	for _, pid := range now {
		if !before[pid] && !known[pid] && pid > best {
			best = pid
		}
	}
	return best
}

// recordPID records a process this package started itself (the HA plane
// runs its processes without envtest, so it knows their PIDs).
func (c *children) recordPID(component string, pid int, binary string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pids[component] = pid
	if c.dir != "" {
		if real, err := filepath.EvalSymlinks(binary); err == nil {
			binary = real // the reaper compares it with /proc/PID/exe
		}
		_ = os.WriteFile(filepath.Join(c.dir, strconv.Itoa(pid)), []byte(binary+"\n"), 0o600)
	}
}

// pid returns the recorded PID of component, or 0.
func (c *children) pid(component string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pids[component]
}

// recordDir records a work directory to delete if we die without Stop.
func (c *children) recordDir(dir string) {
	if c.dir == "" {
		return
	}
	_ = os.WriteFile(filepath.Join(c.dir, "dir."+filepath.Base(dir)), []byte(dir+"\n"), 0o600)
}

func (c *children) forgetDir(dir string) {
	if c.dir == "" {
		return
	}
	_ = os.Remove(filepath.Join(c.dir, "dir."+filepath.Base(dir)))
}

func (c *children) forget(component string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pid, ok := c.pids[component]; ok {
		if c.dir != "" {
			_ = os.Remove(filepath.Join(c.dir, strconv.Itoa(pid)))
		}
		delete(c.pids, component)
	}
}

func (c *children) forgetAll() {
	c.mu.Lock()
	comps := make([]string, 0, len(c.pids))
	for comp := range c.pids {
		comps = append(comps, comp)
	}
	c.mu.Unlock()
	for _, comp := range comps {
		c.forget(comp)
	}
}
