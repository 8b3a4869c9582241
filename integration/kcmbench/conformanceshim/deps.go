//go:build conformance_deps

// This file, never built, names the test-only packages of the upstream
// tests make conformance ports into this module, so that `go mod tidy`
// keeps their modules in go.mod.
package conformanceshim

import (
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/google/go-cmp/cmp/cmpopts"
	_ "github.com/onsi/gomega"
	_ "github.com/stretchr/testify/require"
	_ "k8s.io/client-go/testing"
	_ "k8s.io/client-go/util/testing"
	_ "k8s.io/component-base/featuregate/testing"
	_ "k8s.io/component-base/metrics/testutil"
	_ "k8s.io/klog/v2/ktesting"
	_ "k8s.io/klog/v2/ktesting/init"
	_ "k8s.io/kubernetes/pkg/apis/apps/install"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/controller/testutil"
	_ "k8s.io/kubernetes/test/utils/ktesting"
	_ "k8s.io/utils/clock/testing"
	_ "k8s.io/utils/ptr"
)
