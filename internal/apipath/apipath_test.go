package apipath

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestParse(t *testing.T) {
	cm := schema.GroupResource{Resource: "configmaps"}
	deploy := schema.GroupResource{Group: "apps", Resource: "deployments"}
	ns := schema.GroupResource{Resource: "namespaces"}
	for _, c := range []struct {
		path string
		want Target
		ok   bool
	}{
		{"/api/v1/namespaces/a/configmaps", Target{Resource: cm, Namespace: "a"}, true},
		{"/api/v1/namespaces/a/configmaps/x", Target{Resource: cm, Namespace: "a", Name: "x"}, true},
		{"/apis/apps/v1/namespaces/a/deployments/d/scale", Target{Resource: deploy, Namespace: "a", Name: "d", Subresource: "scale"}, true},
		{"/apis/apps/v1/namespaces/a/deployments/d/status", Target{Resource: deploy, Namespace: "a", Name: "d", Subresource: "status"}, true},
		{"/api/v1/namespaces/a", Target{Resource: ns, Name: "a"}, true},
		{"/api/v1/namespaces/a/status", Target{Resource: ns, Name: "a", Subresource: "status"}, true},
		{"/api/v1/namespaces/a/finalize", Target{Resource: ns, Name: "a", Subresource: "finalize"}, true},
		{"/api/v1/namespaces", Target{Resource: ns}, true},
		{"/api/v1/nodes/n1", Target{Resource: schema.GroupResource{Resource: "nodes"}, Name: "n1"}, true},
		{"/apis/rbac.authorization.k8s.io/v1/clusterroles/r", Target{Resource: schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}, Name: "r"}, true},
		{"/prefix/to/cluster/api/v1/namespaces/a/pods/p/ephemeralcontainers", Target{Resource: schema.GroupResource{Resource: "pods"}, Namespace: "a", Name: "p", Subresource: "ephemeralcontainers"}, true},
		{"/api/v1/namespaces/a/configmaps/", Target{Resource: cm, Namespace: "a"}, true},
		{"/api", Target{}, false},
		{"/api/v1", Target{}, false},
		{"/apis/apps/v1", Target{}, false},
		{"/apis/apps", Target{}, false},
		{"/version", Target{}, false},
		{"/api/v1/watch/namespaces/a/configmaps", Target{}, false},
		{"/api/v1/namespaces/a/pods/p/proxy/x", Target{Resource: schema.GroupResource{Resource: "pods"}, Namespace: "a", Name: "p", Subresource: "proxy/x"}, true},
		{"", Target{}, false},
	} {
		got, ok := Parse(c.path)
		if ok != c.ok || got != c.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v, %v", c.path, got, ok, c.want, c.ok)
		}
	}
}
