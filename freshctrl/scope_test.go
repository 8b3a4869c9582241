package freshctrl

import (
	"net/url"
	"testing"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestScopeFromURL(t *testing.T) {
	for _, tc := range []struct {
		url    string
		scope  string
		gr     schema.GroupResource
		wantOK bool
	}{
		{"https://h/api/v1/namespaces/a/configmaps?limit=1", "ns=a", schema.GroupResource{Resource: "configmaps"}, true},
		{"https://h/api/v1/configmaps", "*", schema.GroupResource{Resource: "configmaps"}, true},
		{"https://h/api/v1/namespaces", "*", schema.GroupResource{Resource: "namespaces"}, true},
		{"https://h/prefix/apis/apps/v1/namespaces/b/deployments?labelSelector=app%3Dweb", "ns=b,labels=app=web", schema.GroupResource{Group: "apps", Resource: "deployments"}, true},
		{"https://h/apis/apps/v1/deployments?fieldSelector=metadata.namespace%21%3Da", "fields=metadata.namespace!=a", schema.GroupResource{Group: "apps", Resource: "deployments"}, true},
		{"https://h/healthz", "", schema.GroupResource{}, false},
		{"https://h/api/v1/namespaces/a/configmaps/one", "", schema.GroupResource{}, false},
		{"https://h/api/v1/namespaces/a/status", "", schema.GroupResource{}, false},
		{"https://h/apis/apps/v1", "", schema.GroupResource{}, false},
		{"https://h/apis/apps", "", schema.GroupResource{}, false},
		{"https://h/api", "", schema.GroupResource{}, false},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		s, gr, ok := scopeFromURL(u)
		if ok != tc.wantOK {
			t.Errorf("%s: ok=%v, want %v", tc.url, ok, tc.wantOK)
			continue
		}
		if !ok {
			continue
		}
		if s.String() != tc.scope || gr != tc.gr {
			t.Errorf("%s: got %q %v, want %q %v", tc.url, s, gr, tc.scope, tc.gr)
		}
	}
}

func TestScopeAdmits(t *testing.T) {
	sel := labels.SelectorFromSet(labels.Set{"app": "web"})
	notA := fields.OneTermNotEqualSelector("metadata.namespace", "a")
	other := fields.OneTermEqualSelector("spec.nodeName", "n1")
	for _, tc := range []struct {
		name  string
		s     Scope
		ns    string
		lbls  map[string]string
		admit bool
	}{
		{"all", Scope{}, "x", nil, true},
		{"namespace in", Scope{Namespace: "a"}, "a", nil, true},
		{"namespace out", Scope{Namespace: "a"}, "b", nil, false},
		{"label in", Scope{Labels: sel}, "a", map[string]string{"app": "web"}, true},
		{"label out", Scope{Labels: sel}, "a", map[string]string{"app": "db"}, false},
		{"field != in", Scope{Fields: notA}, "b", nil, true},
		{"field != out", Scope{Fields: notA}, "a", nil, false},
		{"field on other fields counts as met", Scope{Fields: other}, "a", nil, true},
		{"unknown admits", Scope{Unknown: true, Namespace: "a"}, "b", nil, true},
	} {
		if got := tc.s.Admits(tc.ns, "obj", tc.lbls); got != tc.admit {
			t.Errorf("%s: Admits = %v, want %v", tc.name, got, tc.admit)
		}
	}
}
