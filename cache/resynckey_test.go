package cache

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// ResyncKey tells every handler, with or without a resync period, of the
// cached object under a key again, as an update of it to itself, in order
// with the events applied before it; a key not cached tells nobody.
func TestResyncKeyTellsEveryHandlerOnce(t *testing.T) {
	inf, _, w := startScripted(t, listThenWatch, listResponse{rv: "10", objects: []*corev1.ConfigMap{cm("a", "5")}})
	rec := recordHandlers(t, inf)
	rec.waitFor(t, 1)
	w.Modify(cm("a", "11"))
	if !inf.ResyncKey("ns/a") {
		// The event may still be queued; the key is cached either way.
		t.Fatal("ResyncKey(ns/a) = false for a cached key")
	}
	if inf.ResyncKey("ns/missing") {
		t.Fatal("ResyncKey of a key not cached = true")
	}
	got := rec.waitFor(t, 3)
	want1 := []string{"add a@5 initial=true", "update a@5->5", "update a@5->11"}
	want2 := []string{"add a@5 initial=true", "update a@5->11", "update a@11->11"}
	if !slices.Equal(got, want1) && !slices.Equal(got, want2) {
		t.Fatalf("handler heard %v", got)
	}
}
