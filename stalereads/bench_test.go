package stalereads_test

import (
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/stalereads"
)

// BenchmarkListerGet reads one key through a typed lister, side by side:
//
//   - plain: client-go's informer;
//   - fresh: a FreshInformer, detector off (the default);
//   - detector: detector on, no write pending (the cache has applied them);
//   - pending: detector on, 100 writes of other keys pending (a busy
//     controller's cache, always a few writes behind): reads of unwritten
//     keys, among them the few whose hash meets a written key's;
//   - written: detector on, the read key's own write pending (a stale read,
//     reported to a handler that drops it).
//
// Each reads the same 800 keys in turn (none written but in "written").
// The informers are not started: the indexers are filled directly, and
// the FreshInformer's applied resource version stays zero, so recorded
// writes stay pending.
//
//	go test -c -o stalereads.test ./stalereads
//	for i in $(seq 20); do ./stalereads.test -test.run '^$' -test.bench BenchmarkListerGet -test.benchmem >> bench.txt; done
//	benchstat -col /lister bench.txt
//
// (Rounds of one run each, so that the five run side by side whatever the
// machine's load does meanwhile.)
func BenchmarkListerGet(b *testing.B) {
	const keys = 1000
	objs := make([]*corev1.ConfigMap, keys)
	for i := range objs {
		objs[i] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm-" + strconv.Itoa(i), ResourceVersion: strconv.Itoa(i + 1)}}
	}
	indexers := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
	fill := func(idx toolscache.Indexer) corelisters.ConfigMapNamespaceLister {
		for _, o := range objs {
			if err := idx.Add(o); err != nil {
				b.Fatal(err)
			}
		}
		return corelisters.NewConfigMapLister(idx).ConfigMaps("ns")
	}
	detecting := func(pending int, written bool) corelisters.ConfigMapNamespaceLister {
		inf := cache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.ConfigMap{}, 0, indexers, cache.WithStaleReadDetection(func(stalereads.Report) {}))
		l := fill(inf.GetIndexer())
		for i := range pending {
			w := objs[keys-1-i].DeepCopy()
			w.ResourceVersion = strconv.Itoa(keys + 1 + i)
			if err := inf.RecordWrittenObject(w); err != nil {
				b.Fatal(err)
			}
		}
		if written {
			w := objs[keys/2].DeepCopy()
			w.ResourceVersion = strconv.Itoa(10 * keys)
			if err := inf.RecordWrittenObject(w); err != nil {
				b.Fatal(err)
			}
		}
		return l
	}
	listers := []struct {
		name   string
		lister corelisters.ConfigMapNamespaceLister
	}{
		{"plain", fill(toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.ConfigMap{}, 0, indexers).GetIndexer())},
		{"fresh", fill(cache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.ConfigMap{}, 0, indexers).GetIndexer())},
		{"detector", detecting(0, false)},
		{"pending", detecting(100, false)},
		{"written", detecting(0, true)},
	}
	names := make([]string, 0, 800)
	for _, o := range objs[:800] {
		names = append(names, o.Name)
	}
	for _, l := range listers {
		b.Run("lister="+l.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			start := cpuTime(b)
			for b.Loop() {
				name := names[i%len(names)]
				if l.name == "written" {
					name = objs[keys/2].Name
				}
				if _, err := l.lister.Get(name); err != nil {
					b.Fatal(err)
				}
				i++
			}
			// CPU time, besides wall time: on a shared machine a benchmark
			// waits for a CPU now and then, which this does not count.
			b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the process's CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
