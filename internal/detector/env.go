// Package detector is the stale-read detector's machinery (see package
// stalereads for what it finds and how it is turned on): the switch read
// from the environment, the per-informer table of this process's writes the
// cache has not applied yet, the indexer view that checks reads against it,
// the transport's table of last writes, and the reporter that logs, counts
// and samples stacks.
package detector

import (
	"os"
	"strings"

	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/stalereads"
)

// Mode is what the environment asks of the detector.
type Mode int

// The modes.
const (
	Off  Mode = iota
	On        // detect in every informer and transport
	Halt      // and fail (panic) at the first report no handler takes
)

// FromEnv reads stalereads.EnvVar: its stalereads key, the last one if
// repeated, as GODEBUG does. An unknown value is logged and counts as off.
func FromEnv() Mode {
	return parse(os.Getenv(stalereads.EnvVar))
}

func parse(s string) Mode {
	mode := Off
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		if k != "stalereads" {
			continue
		}
		switch v {
		case "0", "":
			mode = Off
		case "1":
			mode = On
		case "halt":
			mode = Halt
		default:
			klog.Background().Error(nil, "Ignoring an unknown stalereads setting (want 0, 1 or halt)", "env", stalereads.EnvVar, "value", v)
			mode = Off
		}
	}
	return mode
}
