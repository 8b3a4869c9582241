package wrapped

import (
	"context"
	"errors"
	"fmt"
	"testing"

	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/informertest"
)

var cm = informertest.ConfigMap // informertest's

// stubInformer is a SharedIndexInformer whose store the test writes.
type stubInformer struct {
	toolscache.SharedIndexInformer
	indexer toolscache.Indexer
}

func (s stubInformer) GetIndexer() toolscache.Indexer { return s.indexer }
func (s stubInformer) HasSynced() bool                { return true }

// A wait that reads the store between the store's write of a malformed
// object and the Tracker's handler hearing of it fails with
// ErrIncomparable; the handler ends that at once, and the remembered
// malformed resource versions stay bounded.
func TestMalformedObjectSeenLate(t *testing.T) {
	indexer := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	w := New(stubInformer{indexer: indexer}, klog.Background())
	ctx := context.Background()
	if err := indexer.Replace([]any{cm("a", "5")}, "10"); err != nil {
		t.Fatal(err)
	}
	w.Observe(cm("a", "5"))
	if err := w.WaitForFreshness(ctx, "10"); err != nil {
		t.Fatal(err)
	}
	late := cm("b", "bad")
	_ = indexer.Add(late)
	if err := w.WaitForFreshness(ctx, "10"); !errors.Is(err, freshness.ErrIncomparable) {
		t.Fatalf("the store at a malformed resource version no object explains: %v", err)
	}
	w.Observe(late)
	if err := w.WaitForFreshness(ctx, "10"); err != nil {
		t.Fatalf("once the handler saw the object: %v", err)
	}
	for i := range 1000 {
		bad := cm(fmt.Sprintf("c%d", i), fmt.Sprintf("bad-%d", i))
		_ = indexer.Add(bad)
		w.Observe(bad)
	}
	if err := w.WaitForFreshness(ctx, "10"); err != nil {
		t.Fatalf("after many malformed objects: %v", err)
	}
	w.mu.Lock()
	remembered := len(w.malformed)
	w.mu.Unlock()
	if remembered > maxMalformedRVs || w.IncomparableObjects() != 1001 {
		t.Fatalf("remembered %d malformed resource versions, counted %d", remembered, w.IncomparableObjects())
	}
	_ = indexer.Add(cm("a", "11"))
	w.Observe(cm("a", "11"))
	if got := w.LastObservedResourceVersion(); got != "11" {
		t.Fatalf("LastObservedResourceVersion = %q", got)
	}
}
