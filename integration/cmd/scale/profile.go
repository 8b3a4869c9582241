package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
)

// syncProfile is one measurement's profiles (-profile); a nil
// *syncProfile does nothing.
type syncProfile struct {
	base string // path without the .cpu.pprof / .heap.pprof suffix
	cpu  *os.File
}

func impl(fresh bool) string {
	if fresh {
		return "fresh"
	}
	return "clientgo"
}

// startProfile starts a CPU profile of the measurement about to run
// (what: "sync" or "stream").
func startProfile(what string, n int, fresh bool, rep int) (*syncProfile, error) {
	if *profileDir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(*profileDir, 0o755); err != nil {
		return nil, err
	}
	p := &syncProfile{base: filepath.Join(*profileDir, fmt.Sprintf("%s-%d-%s-%d", what, n, impl(fresh), rep))}
	f, err := os.Create(p.base + ".cpu.pprof")
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	p.cpu = f
	return p, nil
}

// stopCPU ends the CPU profile (the moment the informer reported synced).
func (p *syncProfile) stopCPU() error {
	if p == nil || p.cpu == nil {
		return nil
	}
	pprof.StopCPUProfile()
	err := p.cpu.Close()
	p.cpu = nil
	return err
}

// writeHeap writes a heap profile; called after a GC with the synced
// informer still alive, its inuse_space shows what the cache holds.
func (p *syncProfile) writeHeap() error {
	if p == nil {
		return nil
	}
	f, err := os.Create(p.base + ".heap.pprof")
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
