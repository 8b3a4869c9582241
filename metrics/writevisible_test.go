package metrics

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
)

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// With metrics on, an informer that never reaches the
// writes recorded on it (here: never started) holds a bounded amount of
// memory for them, however many distinct resource versions are recorded.
func TestWriteToVisibleMemoryBounded(t *testing.T) {
	p, err := NewProvider(prometheus.NewPedanticRegistry())
	if err != nil {
		t.Fatal(err)
	}
	inf := cache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.ConfigMap{}, 0, nil, cache.WithMetrics(p))
	record := func(from, n int) {
		for i := from; i < from+n; i++ {
			if err := inf.RecordWrite(strconv.Itoa(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	record(1, 1000)
	before := liveHeap()
	record(1001, 100_000)
	after := liveHeap()
	if after > before && after-before > 2<<20 { // unbounded: tens of megabytes
		t.Fatalf("100000 writes never reached hold %d KiB", (after-before)>>10)
	}
	runtime.KeepAlive(inf)
}
