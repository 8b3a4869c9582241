package cache

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/detector"
	"github.com/freshinformer/freshinformer/internal/scope"
	"github.com/freshinformer/freshinformer/reflector"
)

// detectStaleReads turns the stale-read detector on (at construction):
// reads are judged against the applied resource version, the table is
// pruned as waits are released, and a declared regression, which rewrote
// the history writes are judged against, resets it. The counts are the
// informer's own, gone with it (StaleReads, and its metrics).
func (f *FreshInformer) detectStaleReads(o Options, halt bool) {
	f.cfg.staleReads = detector.New(detector.Config{Resource: f.cfg.resource, Informer: f.cfg.name, Scope: f.cfg.selector.String(), Indexer: f.indexer,
		Applied: func() freshness.RV { return f.trust.View().Applied },
		AfterApplied: func(rv freshness.RV, fn func(error)) {
			_, due := f.trust.AfterFunc(rv, fn)
			due.Run()
		},
		InScope: f.certainlyAdmits, OnReport: o.OnStaleRead, LogReports: o.LogStaleReads, Halt: halt})
	user := f.cfg.onRegression
	f.cfg.onRegression = func(r reflector.Regression) {
		f.cfg.staleReads.Reset()
		if user != nil {
			user(r)
		}
	}
}

// StaleReads returns how many stale reads the stale-read detector has
// found through this informer's indexer and listers, and whether it is on
// (WithStaleReadDetection, or the environment: package stalereads). The
// count is the informer's own: a metrics.Provider exports it as
// freshinformer_stale_reads_total with the informer's labels.
func (f *FreshInformer) StaleReads() (found uint64, on bool) {
	if f.cfg.staleReads == nil {
		return 0, false
	}
	return f.cfg.staleReads.Reported(), true
}

// certainlyAdmits reports whether the informer's scope holds obj for sure:
// a field selector on a field Admits cannot check counts as no, for the
// stale-read detector, which reports an absent object only then.
func (f *FreshInformer) certainlyAdmits(obj metav1.Object) bool {
	return f.Admits(obj) == nil && scope.Scope(f.cfg.selector).Checkable()
}
