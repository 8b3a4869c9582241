package writes

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestParsePath(t *testing.T) {
	cm := schema.GroupResource{Resource: "configmaps"}
	deploy := schema.GroupResource{Group: "apps", Resource: "deployments"}
	ns := schema.GroupResource{Resource: "namespaces"}
	for _, c := range []struct {
		path string
		want target
		ok   bool
	}{
		{"/api/v1/namespaces/a/configmaps", target{resource: cm, namespace: "a"}, true},
		{"/api/v1/namespaces/a/configmaps/x", target{resource: cm, namespace: "a", name: "x"}, true},
		{"/apis/apps/v1/namespaces/a/deployments/d/scale", target{resource: deploy, namespace: "a", name: "d", subresource: "scale"}, true},
		{"/apis/apps/v1/namespaces/a/deployments/d/status", target{resource: deploy, namespace: "a", name: "d", subresource: "status"}, true},
		{"/api/v1/namespaces/a", target{resource: ns, name: "a"}, true},
		{"/api/v1/namespaces/a/status", target{resource: ns, name: "a", subresource: "status"}, true},
		{"/api/v1/namespaces/a/finalize", target{resource: ns, name: "a", subresource: "finalize"}, true},
		{"/api/v1/namespaces", target{resource: ns}, true},
		{"/api/v1/nodes/n1", target{resource: schema.GroupResource{Resource: "nodes"}, name: "n1"}, true},
		{"/apis/rbac.authorization.k8s.io/v1/clusterroles/r", target{resource: schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}, name: "r"}, true},
		{"/prefix/to/cluster/api/v1/namespaces/a/pods/p/ephemeralcontainers", target{resource: schema.GroupResource{Resource: "pods"}, namespace: "a", name: "p", subresource: "ephemeralcontainers"}, true},
		{"/api/v1/namespaces/a/configmaps/", target{resource: cm, namespace: "a"}, true},
		{"/api", target{}, false},
		{"/api/v1", target{}, false},
		{"/apis/apps/v1", target{}, false},
		{"/apis/apps", target{}, false},
		{"/version", target{}, false},
		{"/api/v1/watch/namespaces/a/configmaps", target{}, false},
		{"/api/v1/namespaces/a/pods/p/proxy/x", target{resource: schema.GroupResource{Resource: "pods"}, namespace: "a", name: "p", subresource: "proxy/x"}, true},
		{"", target{}, false},
	} {
		got, ok := parsePath(c.path)
		if ok != c.ok || got != c.want {
			t.Errorf("parsePath(%q) = %+v, %v; want %+v, %v", c.path, got, ok, c.want, c.ok)
		}
	}
}
