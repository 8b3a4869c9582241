// Package apipath reads what a Kubernetes API request's URL path names:
// the resource, namespace, name and subresource, as the apiserver's
// request info does. Package writes routes a recorded write with it.
package apipath

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Target is what a request's path says about the objects it reads or
// writes.
type Target struct {
	Resource    schema.GroupResource
	Namespace   string // "" for all namespaces or a cluster-scoped resource
	Name        string // "" for a collection (a list, a create, a deletecollection)
	Subresource string
}

// Parse reads /api/v1/... and /apis/group/version/... paths, after any
// prefix the client's host carries, as the apiserver's request info does:
// [namespaces/NS/]RESOURCE[/NAME[/SUBRESOURCE]], where namespaces/NS/status
// and namespaces/NS/finalize are subresources of the namespace itself. ok
// is false for anything else (discovery, /version, a watch path).
func Parse(path string) (t Target, ok bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	i := 0
	for i < len(parts) && parts[i] != "api" && parts[i] != "apis" {
		i++
	}
	if i == len(parts) {
		return Target{}, false
	}
	switch parts[i] {
	case "api": // api/VERSION
		i += 2
	default: // apis/GROUP/VERSION
		if i+1 < len(parts) {
			t.Resource.Group = parts[i+1]
		}
		i += 3
	}
	if i >= len(parts) {
		return Target{}, false
	}
	rest := parts[i:]
	if rest[0] == "watch" || rest[0] == "proxy" {
		return Target{}, false
	}
	if rest[0] == "namespaces" && len(rest) > 1 {
		t.Namespace = rest[1]
		if len(rest) > 2 && rest[2] != "status" && rest[2] != "finalize" {
			rest = rest[2:]
		}
	}
	t.Resource.Resource = rest[0]
	if len(rest) > 1 {
		t.Name = rest[1]
	}
	if len(rest) > 2 {
		t.Subresource = strings.Join(rest[2:], "/")
	}
	if t.Resource.Resource == "" || (len(rest) > 1 && t.Name == "") {
		return Target{}, false
	}
	if t.Resource.Resource == "namespaces" { // a namespace is not in itself
		t.Namespace = ""
	}
	return t, true
}
