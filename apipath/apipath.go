// Package apipath reads what a Kubernetes API request's URL path names:
// the resource, namespace, name and subresource, as the apiserver's
// request info does. The writes transport and the scope learners of the
// informers package and of freshctrl (a separate module) share it, so it is
// public and follows the module's compatibility rules (docs/releasing.md):
// Target only gains fields, and Parse's answer for a path the apiserver
// routes to an object or collection does not change.
package apipath

import (
	"net/url"
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

// List is what a list or watch request asks for: the collection it reads
// and the selectors the server applies to it.
type List struct {
	Target
	LabelSelector, FieldSelector string // as sent, "" for none
}

// ParseList reads a list or watch request's URL: its path as Parse does
// (ok is false for anything but a collection) and its selectors. The
// informer factories and freshctrl learn an informer's scope with it from
// the first request the informer sends.
func ParseList(u *url.URL) (l List, ok bool) {
	t, ok := Parse(u.Path)
	if !ok || t.Name != "" {
		return List{}, false
	}
	q := u.Query()
	return List{Target: t, LabelSelector: q.Get("labelSelector"), FieldSelector: q.Get("fieldSelector")}, true
}
