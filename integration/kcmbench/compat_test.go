package main

import (
	"errors"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	consistencyutil "k8s.io/kubernetes/pkg/controller/util/consistency"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/consistency"
)

// Ours has kube-controller-manager's method set: its controllers
// (replicaset.NewBaseController, the Job, DaemonSet and StatefulSet
// controllers) take it unchanged.
var _ consistencyutil.ConsistencyStore = (*consistency.Store)(nil)

// The controllers count skips with errors.As into upstream's own
// *ConsistencyError (replicaset's stale_sync_skips_total): ours fills it in.
func TestOurErrorIsUpstreamsConsistencyErrorToErrorsAs(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	err := fmt.Errorf("sync: %w", &consistency.ConsistencyError{ReadRV: "5", WroteRV: "9", GroupResource: gr, Scope: cache.Selector{Namespace: "ns"}})
	var up *consistencyutil.ConsistencyError
	if !errors.As(err, &up) {
		t.Fatalf("errors.As(%v, *consistency.ConsistencyError of k8s.io/kubernetes) = false", err)
	}
	if up.ReadRV != "5" || up.WroteRV != "9" || up.GroupResource != gr {
		t.Errorf("upstream's error filled in as %+v", up)
	}
}
