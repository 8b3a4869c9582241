package main

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"runtime/debug"
	"testing"
)

const generated = "../../typed_generated.go"

// TestGeneratedIsCurrent fails when informers/typed_generated.go is not
// what the generator makes from go.mod's client-go: run
// go generate ./informers/. Built with another client-go (the workspace
// may select a newer one), it runs the generator outside the workspace.
func TestGeneratedIsCurrent(t *testing.T) {
	got, err := os.ReadFile(generated)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	if linked, floor := linkedClientGo(t), floorClientGo(t); linked == floor {
		if want, err = Generate(); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Logf("built with client-go %s, go.mod has %s: generating outside the workspace", linked, floor)
		cmd := exec.Command("go", "run", ".", "-o", "-")
		cmd.Env = append(os.Environ(), "GOWORK=off")
		cmd.Stderr = os.Stderr
		if want, err = cmd.Output(); err != nil {
			t.Fatalf("go run: %v", err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatal("informers/typed_generated.go is out of date: run go generate ./informers/")
	}
}

// linkedClientGo returns the client-go version this test is built with.
func linkedClientGo(t *testing.T) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build info")
	}
	for _, dep := range info.Deps {
		if dep.Path == "k8s.io/client-go" {
			if dep.Replace != nil {
				return dep.Replace.Version
			}
			return dep.Version
		}
	}
	t.Fatal("client-go is not a dependency")
	return ""
}

// floorClientGo returns the client-go version the root module's go.mod
// requires: the lowest supported.
func floorClientGo(t *testing.T) string {
	gomod, err := os.ReadFile("../../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/client-go (v\S+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("go.mod requires no client-go")
	}
	return string(m[1])
}
