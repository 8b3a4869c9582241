package controlplane

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// EnvPIDDir names a directory in which the package records the processes it
// starts, one file per process named by its PID and holding the binary's
// path, and its work directories (files named "dir.*" holding the path). integration/hack/reap.sh kills what is still recorded there when
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

// record finds the child process running binary and records it.
func (c *children) record(component, binary string) {
	if c.dir == "" {
		return
	}
	pid := findChild(binary)
	if pid <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pids[component] = pid
	_ = os.WriteFile(filepath.Join(c.dir, strconv.Itoa(pid)), []byte(binary+"\n"), 0o600)
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
		_ = os.Remove(filepath.Join(c.dir, strconv.Itoa(pid)))
		delete(c.pids, component)
	}
}

func (c *children) forgetAll() {
	for _, comp := range []string{ComponentAPIServer, ComponentEtcd} {
		c.forget(comp)
	}
}
