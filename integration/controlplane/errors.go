package controlplane

import (
	"errors"
	"fmt"
	"strings"
)

// Component names used in errors and progress output.
const (
	ComponentEtcd      = "etcd"
	ComponentAPIServer = "kube-apiserver"
)

// ErrStopped is returned by operations on a ControlPlane after Stop.
var ErrStopped = errors.New("controlplane: control plane is stopped")

// BinariesNotFoundError reports that kube-apiserver and etcd could not be
// located. Searched lists every directory that was tried, in order.
type BinariesNotFoundError struct {
	Searched []string
	// Missing is the reason for each searched directory (same order).
	Missing []string
}

func (e *BinariesNotFoundError) Error() string {
	var b strings.Builder
	b.WriteString("controlplane: kube-apiserver and etcd binaries not found (run `make bins` in the repository root, or set " + EnvAssets + ")")
	for i, dir := range e.Searched {
		fmt.Fprintf(&b, "\n  %s: %s", dir, e.Missing[i])
	}
	return b.String()
}

// Error is a failure of one control-plane component during one operation
// (for example Component "kube-apiserver", Op "start"). Output holds the
// tail of the process's stdout/stderr when it is relevant.
type Error struct {
	Component string
	Op        string
	Err       error
	Output    string
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("controlplane: %s %s: %v", e.Component, e.Op, e.Err)
	if e.Output != "" {
		msg += "\n--- last output of " + e.Component + " ---\n" + e.Output
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }
