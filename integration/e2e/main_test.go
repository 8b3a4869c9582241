// Package e2e holds the integration tests that run against one real
// etcd + kube-apiserver shared by the whole package (see package testenv).
// Add test files here; TestMain below starts and stops the control plane.
package e2e

import (
	"testing"

	"github.com/freshinformer/freshinformer/integration/controlplane"
	"github.com/freshinformer/freshinformer/integration/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, controlplane.Options{})
}
