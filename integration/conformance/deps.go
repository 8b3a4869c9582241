//go:build conformance_deps

// Package conformance holds the conformance runner (cmd/conformance) and its
// shim. The test files it ports from upstream are generated into work/ at
// run time and never committed; this file, never built, names the
// test-only packages they import so that `go mod tidy` keeps their modules
// in the integration module's go.mod.
package conformance

import (
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/google/go-cmp/cmp/cmpopts"
	_ "github.com/google/gofuzz"
	_ "github.com/onsi/ginkgo/v2"
	_ "github.com/onsi/gomega"
	_ "github.com/stretchr/testify/assert"
	_ "github.com/stretchr/testify/require"
	_ "go.uber.org/goleak"
	_ "k8s.io/client-go/features/testing"
	_ "k8s.io/client-go/tools/cache/testing"
	_ "k8s.io/klog/v2/ktesting"
	_ "k8s.io/klog/v2/textlogger"
	_ "k8s.io/sample-controller/pkg/apis/samplecontroller/v1alpha1"
	_ "k8s.io/sample-controller/pkg/generated/clientset/versioned/fake"
	_ "k8s.io/sample-controller/pkg/signals"
	_ "k8s.io/utils/clock/testing"
	_ "k8s.io/utils/ptr"
	_ "sigs.k8s.io/controller-runtime/examples/crd/pkg"
	_ "sigs.k8s.io/controller-runtime/pkg/controller/controllertest"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "sigs.k8s.io/controller-runtime/pkg/log/zap"
)
