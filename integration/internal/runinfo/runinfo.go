// Package runinfo describes a measurement run for the programs under
// integration/cmd (scale, heapsoak, quietbench): on a shared machine every
// figure needs the load it was measured under and the code it measured.
package runinfo

import (
	"bytes"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
)

// LoadAvg is the machine's load average (1, 5 and 15 minutes), as uptime
// prints it, or "unknown".
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ", ")
}

// Revision is the commit the running binary was built from (+dirty when
// the tree had changes): as the go command stamped it, or, when it did not
// (-buildvcs=false, go run), as git reports the working tree, which the
// make targets have just built from.
func Revision() string {
	var rev, dirty string
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
	}
	if rev == "" {
		out, err := exec.Command("git", "rev-parse", "HEAD").Output()
		if err != nil {
			return "unknown"
		}
		rev = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
			dirty = "+dirty"
		}
	}
	return rev[:min(len(rev), 9)] + dirty
}
