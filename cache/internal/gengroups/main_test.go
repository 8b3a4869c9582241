package main

import (
	"bytes"
	"os"
	"testing"
)

// TestFactoryGroupsIsCurrent fails when cache/factory_groups.go is not
// what the generator makes from the client-go in go.mod: run
// go generate ./cache/.
func TestFactoryGroupsIsCurrent(t *testing.T) {
	want, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../factory_groups.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("cache/factory_groups.go is out of date: run go generate ./cache/")
	}
}
