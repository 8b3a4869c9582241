package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/freshinformer/freshinformer/metrics"
	"github.com/freshinformer/freshinformer/requeue"
)

// sample is one measurement.
type sample struct {
	at time.Duration // since the load started

	// The heap after two collections, and the goroutines.
	heapInuse, heapAlloc, heapObjects uint64
	goroutines                        int

	// The cluster (-1: the list failed) and the informers' caches.
	liveOwners, liveChildren     int
	cachedOwners, cachedChildren int
	series                       int   // Prometheus series the registry exports
	recorded                     int64 // writes recorded (write_to_visible_seconds' count)
	parkedNow                    int

	// The load's and the controller's counters so far.
	created, deleted, earlyDeleted, swept, loadErrs                                     int64
	reconciles, steps, completed, stale, gone, forgotten, parked, notFresh, errs, unrec int64
}

func (s sample) String() string {
	return fmt.Sprintf("t=%v owners created=%d live=%d+%d (cached %d+%d) heap inuse=%.1fMiB alloc=%.1fMiB objects=%d goroutines=%d series=%d | reconciles=%d steps=%d completed=%d recorded writes=%d stale=%d gone=%d (forgotten %d) parked=%d (now %d) notfresh=%d errors=%d+%d",
		s.at.Round(time.Second), s.created, s.liveOwners, s.liveChildren, s.cachedOwners, s.cachedChildren,
		mib(s.heapInuse), mib(s.heapAlloc), s.heapObjects, s.goroutines, s.series,
		s.reconciles, s.steps, s.completed, s.recorded, s.stale, s.gone, s.forgotten, s.parked, s.parkedNow, s.notFresh, s.errs, s.loadErrs)
}

// measure takes a sample (its time is set by the caller).
func measure(ctx context.Context, plain kubernetes.Interface, registry *prometheus.Registry, d *driver, c *controller, st *stats, rq *requeue.Requeuer[types.NamespacedName]) sample {
	s := sample{
		created: d.created.Load(), deleted: d.deleted.Load(), earlyDeleted: d.earlyDeleted.Load(), swept: d.swept.Load(), loadErrs: d.errs.Load(),
		reconciles: st.reconciles.Load(), steps: st.steps.Load(), completed: st.completed.Load(), stale: st.stale.Load(),
		gone: st.gone.Load(), forgotten: st.forgotten.Load(), parked: st.parked.Load(), notFresh: st.notFresh.Load(),
		errs: st.errs.Load(), unrec: st.unrecorded.Load(), parkedNow: rq.Parked(),
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	sel := metav1.ListOptions{LabelSelector: labelApp + "=" + appValue}
	s.liveOwners, s.liveChildren = -1, -1
	if l, err := plain.CoreV1().ConfigMaps(namespace).List(lctx, sel); err == nil {
		s.liveOwners = len(l.Items)
	}
	if l, err := plain.CoreV1().Secrets(namespace).List(lctx, sel); err == nil {
		s.liveChildren = len(l.Items)
	}
	cancel()
	if l, err := c.owners.ConfigMaps(namespace).List(labels.Everything()); err == nil {
		s.cachedOwners = len(l)
	}
	if l, err := c.secrets.Secrets(namespace).List(labels.Everything()); err == nil {
		s.cachedChildren = len(l)
	}
	// A scrape, as Prometheus would make: it also shows whether series
	// accumulate per owner or per write.
	if mfs, err := registry.Gather(); err == nil {
		for _, mf := range mfs {
			s.series += len(mf.GetMetric())
			if mf.GetName() == metrics.Namespace+"_write_to_visible_seconds" {
				for _, m := range mf.GetMetric() {
					s.recorded += int64(m.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	s.heapInuse, s.heapAlloc, s.heapObjects = m.HeapInuse, m.HeapAlloc, m.HeapObjects
	s.goroutines = runtime.NumGoroutine()
	return s
}

// result is a run's samples.
type result struct {
	duration    time.Duration
	samples     []sample
	interrupted bool // ended before -duration: the verdict is only indicative
}

// report prints the table, the work done and the verdict; it returns
// whether the heap and the goroutines are flat and the run did enough
// work to tell.
func (r *result) report(w io.Writer) bool {
	if len(r.samples) == 0 {
		fmt.Fprintln(w, "no samples")
		return false
	}
	fmt.Fprintln(w, "| t | owners created | live objects (owners + children) | heap in use (MiB) | heap alloc (MiB) | heap objects | goroutines |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- |")
	for _, s := range r.samples {
		fmt.Fprintf(w, "| %v | %d | %d + %d | %.1f | %.1f | %d | %d |\n", s.at.Round(time.Second), s.created,
			s.liveOwners, s.liveChildren, mib(s.heapInuse), mib(s.heapAlloc), s.heapObjects, s.goroutines)
	}
	last := r.samples[len(r.samples)-1]
	fmt.Fprintf(w, "\nwork: %d owners created (%d deleted at once or within 300ms), %d deleted, %d leftovers swept; %d reconciles, %d steps (each: a child created, the previous deleted, the owner updated), %d owners completed, %d writes recorded for read-your-writes (%d could not be); %d reconciles found their owner deleted (%d called Forget); %d parks, %d CheckFresh requeues; %d stale reads (409 on the owner's update); %d reconcile errors, %d load errors; %d Prometheus series at the end\n",
		last.created, last.earlyDeleted, last.deleted, last.swept, last.reconciles, last.steps, last.completed, last.recorded, last.unrec,
		last.gone, last.forgotten, last.parked, last.notFresh, last.stale, last.errs, last.loadErrs, last.series)

	// The thirds of the run: the first is warm-up.
	span := r.duration
	if r.interrupted { // thirds of what ran
		span = last.at
		fmt.Fprintf(w, "interrupted after %v: the thirds below are of that\n", last.at.Round(time.Second))
	}
	var second, third []sample
	for _, s := range r.samples {
		switch {
		case s.at > span/3 && s.at <= 2*span/3:
			second = append(second, s)
		case s.at > 2*span/3:
			third = append(third, s)
		}
	}
	if len(second) == 0 || len(third) == 0 {
		fmt.Fprintln(w, "verdict: not enough samples to compare the second and last thirds")
		return false
	}
	avg := func(ss []sample, f func(sample) float64) float64 {
		xs := make([]float64, len(ss))
		for i, s := range ss {
			xs[i] = f(s)
		}
		return mean(xs)
	}
	ok := true
	heapFlat := func(what string, f func(sample) float64) {
		a, b := avg(second, f), avg(third, f)
		tol := math.Max(a**tolerancePct/100, *toleranceMiB)
		flat := b-a <= tol
		verdict := "flat"
		if !flat {
			verdict, ok = "GROWING", false
		}
		fmt.Fprintf(w, "%s: second third %.2f MiB, last third %.2f MiB (%+.2f MiB; tolerance +%.2f MiB): %s\n", what, a, b, b-a, tol, verdict)
	}
	heapFlat("heap in use", func(s sample) float64 { return mib(s.heapInuse) })
	heapFlat("heap alloc", func(s sample) float64 { return mib(s.heapAlloc) })
	ga, gb := avg(second, func(s sample) float64 { return float64(s.goroutines) }), avg(third, func(s sample) float64 { return float64(s.goroutines) })
	gtol := math.Max(ga*0.10, 10)
	gverdict := "flat"
	if gb-ga > gtol {
		gverdict, ok = "GROWING", false
	}
	fmt.Fprintf(w, "goroutines: second third %.1f, last third %.1f (%+.1f; tolerance +%.1f): %s\n", ga, gb, gb-ga, gtol, gverdict)

	// For scale: the trend per owner over the last two thirds (least
	// squares), which shows a leak too small for the tolerance.
	both := append(append([]sample(nil), second...), third...)
	bytesPer := slope(both, func(s sample) float64 { return float64(s.heapAlloc) })
	objsPer := slope(both, func(s sample) float64 { return float64(s.heapObjects) })
	fmt.Fprintf(w, "trend over the last two thirds (least squares against owners created): %+.0f bytes and %+.2f heap objects per owner\n", bytesPer, objsPer)

	// A flat heap means nothing if the controller did not work.
	enough := last.created >= int64(0.5**rate*span.Seconds()) && last.steps > 0 && last.recorded > 0 && last.completed > 0
	if !enough {
		fmt.Fprintln(w, "verdict: INVALID: the load or the controller did too little work for the heap to tell anything")
		return false
	}
	if r.interrupted {
		fmt.Fprintln(w, "verdict: none (interrupted)")
		return false
	}
	if ok {
		fmt.Fprintln(w, "verdict: FLAT")
	} else {
		fmt.Fprintln(w, "verdict: NOT FLAT")
	}
	return ok
}

// slope is the least-squares slope of f against owners created.
func slope(ss []sample, f func(sample) float64) float64 {
	n := float64(len(ss))
	var sx, sy, sxx, sxy float64
	for _, s := range ss {
		x, y := float64(s.created), f(s)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return math.NaN()
	}
	return (n*sxy - sx*sy) / den
}
