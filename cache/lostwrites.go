package cache

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/internal/resources"
	"github.com/freshinformer/freshinformer/internal/trust"
)

// RecordWrittenObject is RecordWrite for a write whose object the server
// returned (create, update, patch, apply, a status or scale write, or a
// delete's response): besides what RecordWrite does, it remembers the
// object's key until a list reaches the write's resource version, so that
// a list at or past it that holds the key at an older state (the server
// lost the acknowledged write: etcd restored from an older snapshot with
// --bump-revision) is declared as a regression (Regression.WritesLost)
// even when the informer's stream never delivered the write. written must
// be an object of the informer's resource. It returns an error matching
// freshness.ErrIncomparable for a malformed resource version.
func (f *FreshInformer) RecordWrittenObject(written metav1.Object) error {
	if err := f.RecordWrite(written.GetResourceVersion()); err != nil {
		return err
	}
	if written.GetName() == "" {
		return nil // a Status, not the object: nothing to look for in a list
	}
	if f.cfg.staleReads != nil {
		f.cfg.staleReads.Wrote(written)
	}
	rv, _ := freshness.ParseRV(written.GetResourceVersion()) // RecordWrite validated it
	key := resources.Key(written.GetNamespace(), written.GetName())
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	state, applied := f.trust.Owned() // applyMu held: they change only under it
	if state != trust.Trusted || rv.Compare(applied) <= 0 {
		return nil // applied already: a later list that moves it back is KeysWentBack
	}
	f.written.Add(key, rv, applied)
	return nil
}
