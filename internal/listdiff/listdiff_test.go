package listdiff

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/informertest"
	"github.com/freshinformer/freshinformer/internal/recorded"
)

// cm and rv are informertest's.
var (
	cm = informertest.ConfigMap
	rv = informertest.RV
)

// A list moves a key back when it holds it older than cached, or at a
// state the cache had passed and does not hold (a deleted key brought
// back), and loses a write when it holds a written key older than the
// write; newer and unchanged keys, and keys with malformed resource
// versions, move nothing back.
func TestDiff(t *testing.T) {
	indexer := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	for _, o := range []*corev1.ConfigMap{cm("older", "8"), cm("same", "5"), cm("newer", "5"), cm("bad", "x")} {
		if err := indexer.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	var written recorded.Keys
	written.Add("ns/written", rv(t, "15"), rv(t, "10"))
	info := toolscache.ReplacedAllInfo{ResourceVersion: "20", Objects: []any{
		cm("older", "7"), cm("same", "5"), cm("newer", "12"), cm("bad", "3"),
		cm("back", "9"),     // passed (the cache reached 10) and not cached: deleted since
		cm("new", "11"),     // past where the cache stood
		cm("written", "14"), // older than the write at 15 the list covers
	}}
	changes, listed, back, err := Diff(indexer, info, rv(t, "10"), &written)
	if err != nil {
		t.Fatal(err)
	}
	if back.Keys != 2 || back.LostWrites != 1 || !slices.Equal(back.Sample, []string{"ns/older", "ns/back", "ns/written"}) || back.Unstamped {
		t.Fatalf("back = %+v", back)
	}
	if len(changes) != 7 || len(listed) != 7 || changes[0].Old.(*corev1.ConfigMap).ResourceVersion != "8" || changes[4].Old != nil {
		t.Fatalf("changes %+v, listed %v", changes, listed)
	}
	// Without a position to trust, a state not cached proves nothing.
	if _, _, back, _ := Diff(indexer, info, freshness.RV{}, &written); back.Keys != 1 {
		t.Fatalf("with no position: back = %+v", back)
	}
}

// A listed object without any resource version (a fake clientset's list)
// makes the list unstamped; a malformed one does not.
func TestDiffUnstamped(t *testing.T) {
	indexer := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	for _, tc := range []struct {
		rv   string
		want bool
	}{{"", true}, {"x", false}, {"3", false}} {
		info := toolscache.ReplacedAllInfo{ResourceVersion: "5", Objects: []any{cm("a", "4"), cm("b", tc.rv)}}
		if _, _, back, err := Diff(indexer, info, freshness.RV{}, &recorded.Keys{}); err != nil || back.Unstamped != tc.want {
			t.Errorf("an object at %q: Unstamped = %v (err %v), want %v", tc.rv, back.Unstamped, err, tc.want)
		}
	}
}
