package writes

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// target is what a request URL says about the object it writes.
type target struct {
	resource    schema.GroupResource
	namespace   string
	name        string // "" for a collection (a create, a deletecollection)
	subresource string
}

// parsePath reads /api/v1/... and /apis/group/version/... paths, after any
// prefix the client's host carries, as the apiserver's request info does:
// [namespaces/NS/]RESOURCE[/NAME[/SUBRESOURCE]], where namespaces/NS/status
// and namespaces/NS/finalize are subresources of the namespace itself. ok
// is false for anything else (discovery, /version, a watch path).
func parsePath(path string) (t target, ok bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	i := 0
	for i < len(parts) && parts[i] != "api" && parts[i] != "apis" {
		i++
	}
	if i == len(parts) {
		return target{}, false
	}
	switch parts[i] {
	case "api": // api/VERSION
		i += 2
	default: // apis/GROUP/VERSION
		if i+1 < len(parts) {
			t.resource.Group = parts[i+1]
		}
		i += 3
	}
	if i >= len(parts) {
		return target{}, false
	}
	rest := parts[i:]
	if rest[0] == "watch" || rest[0] == "proxy" {
		return target{}, false
	}
	if rest[0] == "namespaces" && len(rest) > 1 {
		t.namespace = rest[1]
		if len(rest) > 2 && rest[2] != "status" && rest[2] != "finalize" {
			rest = rest[2:]
		}
	}
	t.resource.Resource = rest[0]
	if len(rest) > 1 {
		t.name = rest[1]
	}
	if len(rest) > 2 {
		t.subresource = strings.Join(rest[2:], "/")
	}
	if t.resource.Resource == "" || (len(rest) > 1 && t.name == "") {
		return target{}, false
	}
	if t.resource.Resource == "namespaces" { // a namespace is not in itself
		t.namespace = ""
	}
	return t, true
}
