package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

const exampleInformers = "../../examples/crdcontroller/generated/informers/externalversions"

// The example's committed ListScope file is what scope-gen writes, and
// -verify accepts it.
func TestGenerateMatchesExample(t *testing.T) {
	if err := run(exampleInformers, "", true); err != nil {
		t.Fatal(err)
	}
}

// A package without informer-gen's factory fields is refused, and nothing
// is written.
func TestGenerateRefusesOtherPackages(t *testing.T) {
	dir := t.TempDir()
	src := "package p\n\ntype factory struct {\n\tnamespace int\n\ttweakListOptions func()\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "factory.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(dir, "", false); !errors.Is(err, errNoFactory) {
		t.Fatalf("%v; want errNoFactory", err)
	}
	if _, err := os.Stat(filepath.Join(dir, OutputFile)); !os.IsNotExist(err) {
		t.Fatalf("wrote %s: %v", OutputFile, err)
	}
}

// -verify fails when the file is stale, and writing makes it current.
func TestVerifyStale(t *testing.T) {
	dir := t.TempDir()
	src := "package p\n\ntype f struct {\n\tnamespace string\n\ttweakListOptions func()\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "factory.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(dir, "", true); err == nil {
		t.Fatal("-verify passed without the file")
	}
	if err := run(dir, "", false); err != nil {
		t.Fatal(err)
	}
	if err := run(dir, "", true); err != nil {
		t.Fatalf("-verify after writing: %v", err)
	}
}
