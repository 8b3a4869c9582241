package controlplane

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// findChild returns the PID of a live child of this process whose
// executable is binary and that is not in skip (newest wins), or 0. envtest
// does not expose the *exec.Cmd, so /proc is the way to learn the PID.
func findChild(binary string, skip map[int]bool) int {
	want, err := filepath.EvalSymlinks(binary)
	if err != nil {
		return 0
	}
	self := os.Getpid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	best := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || skip[pid] {
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
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && exe == want && pid > best {
			best = pid
		}
	}
	return best
}
