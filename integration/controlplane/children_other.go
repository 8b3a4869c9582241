//go:build !linux

package controlplane

// childrenRunning is only implemented on Linux; elsewhere nothing is
// recorded and Stop is the only cleanup.
func childrenRunning(string) []int { return nil }
