package cache

import (
	"time"

	"github.com/freshinformer/freshinformer/freshness"
)

// RecordWrite tells the informer that a write returned resource version rv
// just now. It makes rv the newest resource version known from the server
// (for the lag metric) if it is, and with metrics on, records how long the
// cache takes to reach it (timing at most the 256 most recent writes the
// cache has not reached, with one callback). A write below the cache's resource version that
// the stream never delivered starts a consistent limit=1 probe (one at a
// time; WaitForFreshness callers wait for its answer) that detects a server
// restored to an older revision. It returns an error
// matching freshness.ErrIncomparable for a malformed rv.
func (f *FreshInformer) RecordWrite(rv string) error {
	parsed, err := freshness.ParseRV(rv)
	if err != nil {
		return err
	}
	f.prover.RecordWrite(parsed) // the newest known; below the cache, a restore check (internal/prove)
	if f.metrics != nil {
		f.visible.Record(&f.trust, f.metrics.ObserveWriteVisible, parsed, time.Now())
	}
	return nil
}

// NewestKnownResourceVersion returns the newest resource version the
// informer knows the server has reached: the newest its stream delivered
// (lists, events, bookmarks, applied or still queued) or a recorded write
// returned. "" before any.
func (f *FreshInformer) NewestKnownResourceVersion() string {
	newest, _ := freshness.ParseRV(f.LastSyncResourceVersion())
	if w := f.prover.NewestWrite(); w.Compare(newest) > 0 {
		newest = w
	}
	if cur := f.trust.View().Applied; cur.Compare(newest) > 0 {
		newest = cur
	}
	return newest.String()
}
