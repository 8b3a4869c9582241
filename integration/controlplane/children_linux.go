package controlplane

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// childrenRunning returns the PIDs of this process's live children whose
// executable is binary. envtest does not expose the *exec.Cmd, so /proc is
// the way to learn them.
func childrenRunning(binary string) []int {
	want, err := filepath.EvalSymlinks(binary)
	if err != nil {
		return nil
	}
	self := os.Getpid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the parenthesised command name: state ppid ...
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(stat[i+1:])
		if len(f) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(string(f[1])); ppid != self {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && exe == want {
			out = append(out, pid)
		}
	}
	return out
}
