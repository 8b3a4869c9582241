package cache

import (
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/internal/recorded"
)

// visibleMetrics records write-to-visible observations.
type visibleMetrics struct {
	mu      sync.Mutex
	visible []time.Duration
	stopped bool
}

func (m *visibleMetrics) InformerMetrics(*FreshInformer) InformerMetrics { return m }
func (m *visibleMetrics) ObserveWait(WaitOutcome, time.Duration)         {}
func (m *visibleMetrics) ObserveWriteVisible(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.visible = append(m.visible, d)
}
func (m *visibleMetrics) Stopped() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopped = true
}

func (m *visibleMetrics) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.visible)
}

func (m *visibleMetrics) waitCount(t *testing.T, want int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); m.count() != want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d write-to-visible samples, want %d", m.count(), want)
		}
	}
}

// heapInUse returns the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// With metrics on, writes recorded on an informer that
// never reaches them (here: never started) hold a bounded amount of
// memory, however many distinct resource versions are recorded.
func TestRecordWriteMemoryIsBounded(t *testing.T) {
	m := &visibleMetrics{}
	inf := NewSharedIndexInformer(newScriptedLW(t, listThenWatch, listResponse{rv: "1"}), &corev1.ConfigMap{}, 0, toolscache.Indexers{}, scriptOptions(WithMetrics(m))...)
	record := func(from, n int) {
		for i := from; i < from+n; i++ {
			if err := inf.RecordWrite(strconv.Itoa(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	record(1, 1000) // reach the steady state
	before := heapInUse()
	const writes = 100_000
	record(1001, writes)
	after := heapInUse()
	// Unbounded, each write holds a tracker target and a callback (a few
	// hundred bytes: tens of megabytes here).
	if after > before && after-before > 2<<20 {
		t.Fatalf("%d writes the cache never reached hold %d KiB", writes, (after-before)>>10)
	}
	runtime.KeepAlive(inf)
}

// The samples and the tracker callbacks stay within their bounds however
// many distinct writes the cache never reaches, and stopping the informer
// drops them.
func TestRecordWriteSamplesBounded(t *testing.T) {
	m := &visibleMetrics{}
	inf, _, w := startScripted(t, listThenWatch, listResponse{rv: "10"}, WithMetrics(m))
	for i := range 100_000 {
		if err := inf.RecordWrite(strconv.Itoa(100 + i)); err != nil {
			t.Fatal(err)
		}
	}
	if n, armed := inf.visible.Pending(); n != recorded.MaxPending || !armed {
		t.Fatalf("after 100000 unreached writes: %d samples (armed %v), want %d", n, armed, recorded.MaxPending)
	}
	// The newest are kept: reaching them observes every one.
	w.Add(cm("a", strconv.Itoa(100+100_000)))
	m.waitCount(t, recorded.MaxPending)
	if n, armed := inf.visible.Pending(); n != 0 || armed {
		t.Fatalf("after the cache reached every write: %d samples (armed %v)", n, armed)
	}
	if err := inf.RecordWrite("1000000"); err != nil {
		t.Fatal(err)
	}
	stopFuncs := mustStop(t, inf)
	stopFuncs()
	if n, armed := inf.visible.Pending(); n != 0 || armed {
		t.Fatalf("after stop: %d samples (armed %v)", n, armed)
	}
	if m.count() != recorded.MaxPending {
		t.Fatalf("%d samples observed, want %d", m.count(), recorded.MaxPending)
	}
}

func mustStop(t *testing.T, inf *FreshInformer) func() {
	t.Helper()
	stop, ok := stopFuncs.Load(inf)
	if !ok {
		t.Fatal("informer not started by runInformer")
	}
	return stop.(func())
}

// Write-to-visible is observed for each write once the cache reaches it:
// at once for a write already reached, when the cache reaches it for
// writes recorded in order, and for a write recorded below the one the
// callback waits for (it raced a higher one), when that one is reached.
func TestRecordWriteObservesEachWrite(t *testing.T) {
	m := &visibleMetrics{}
	inf, _, w := startScripted(t, listThenWatch, listResponse{rv: "10"}, WithMetrics(m))
	record := func(rvs ...string) {
		for _, rv := range rvs {
			if err := inf.RecordWrite(rv); err != nil {
				t.Fatal(err)
			}
		}
	}
	record("10") // the list's: a write below the cache would start a restore probe
	if m.count() != 1 {
		t.Fatalf("a write the cache had reached: %d samples", m.count())
	}
	record("11", "12")
	w.Add(cm("a", "11"))
	m.waitCount(t, 2)
	w.Add(cm("a", "12"))
	m.waitCount(t, 3)

	record("15", "13", "13", "14")
	if n, armed := inf.visible.Pending(); n != 3 || !armed {
		t.Fatalf("pending: %d (armed %v), want 3: 13 once", n, armed)
	}
	w.Add(cm("b", "13"))
	w.Add(cm("b", "14"))
	w.Add(cm("c", "15"))
	m.waitCount(t, 6)
	if n, armed := inf.visible.Pending(); n != 0 || armed {
		t.Fatalf("after the cache reached every write: %d samples (armed %v)", n, armed)
	}
}
