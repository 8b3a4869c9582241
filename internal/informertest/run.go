// Package informertest helps the tests of the packages that run informers.
package informertest

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/freshinformer/freshinformer/freshness"
)

// Runner is an informer as the tests run it.
type Runner interface{ RunWithContext(context.Context) }

// Run starts inf until the test ends and returns a function that stops it
// and waits until RunWithContext has returned (failing the test if it does
// not within 30 s). The function may be called more than once.
func Run(t testing.TB, inf Runner) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.RunWithContext(ctx)
	}()
	stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("informer did not stop")
		}
	}
	t.Cleanup(stop)
	return stop
}

// ConfigMap returns a ConfigMap ns/name at resource version rv: the
// object most tests of an informer's machinery need.
func ConfigMap(name, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
}

// RV parses s, failing the test if it is not a resource version.
func RV(t testing.TB, s string) freshness.RV {
	t.Helper()
	r, err := freshness.ParseRV(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
