package factory

import "testing"

// pluralOf names resources as client-gen does.
func TestPluralOf(t *testing.T) {
	for kind, want := range map[string]string{
		"Counter": "counters", "Policy": "policies", "Gateway": "gateways", "Ingress": "ingresses",
		"Box": "boxes", "Match": "matches", "Mesh": "meshes", "Graph": "graphs", "Leaf": "leaves",
		"Knife": "knives", "Endpoints": "endpoints", "A": "a", "Key": "keys",
	} {
		if got := pluralOf(kind); got != want {
			t.Errorf("pluralOf(%q) = %q, want %q", kind, got, want)
		}
	}
}
