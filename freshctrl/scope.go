package freshctrl

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	fcache "github.com/freshinformer/freshinformer/cache"
)

// Scope is what one informer lists and watches: a namespace (or all) and
// the label and field selectors the server applies. freshctrl learns it
// from the request the informer's ListerWatcher builds (see the package
// documentation), so it is exactly what the server is asked for.
type Scope struct {
	// Namespace is the listed namespace, "" for all namespaces or a
	// cluster-scoped resource.
	Namespace string
	// Labels and Fields are the server-side selectors, nil for none.
	Labels labels.Selector
	Fields fields.Selector
	// Unknown is set when the scope could not be learned (an informer made
	// over a ListerWatcher that does not reach the HTTP client): such an
	// informer is assumed to see every object of its resource.
	Unknown bool
}

// Admits reports whether an object with this namespace, name and labels is
// in the scope. Field selectors are evaluated on metadata.name and
// metadata.namespace; a requirement on any other field counts as met (the
// wait it causes is bounded by the client's timeout).
func (s Scope) Admits(namespace, name string, objLabels map[string]string) bool {
	return s.Unknown || s.Selector().Matches(namespace, name, objLabels)
}

// Selector is the scope as the core library's informer selector
// (cache.WithSelector).
func (s Scope) Selector() fcache.Selector {
	return fcache.Selector{Namespace: s.Namespace, Labels: s.Labels, Fields: s.Fields}
}

// covers reports whether the scope's namespace can hold objects of
// namespace ns ("" meaning every namespace, as for a cluster-wide List).
func (s Scope) covers(ns string) bool {
	return s.Unknown || s.Namespace == "" || ns == "" || s.Namespace == ns
}

// String names the scope in informer names: "*" for everything, else the
// namespace and the selectors, e.g. "ns=team-a,labels=app=web".
func (s Scope) String() string {
	if s.Unknown {
		return "unknown"
	}
	var parts []string
	if s.Namespace != "" {
		parts = append(parts, "ns="+s.Namespace)
	}
	if s.Labels != nil && !s.Labels.Empty() {
		parts = append(parts, "labels="+s.Labels.String())
	}
	if s.Fields != nil && !s.Fields.Empty() {
		parts = append(parts, "fields="+s.Fields.String())
	}
	if len(parts) == 0 {
		return "*"
	}
	return strings.Join(parts, ",")
}

// scopeProbe is carried in a request's context to have probeTransport
// record the request's URL instead of sending it.
type scopeProbe struct{ url *url.URL }

type probeKey struct{}

// errProbed ends a probe request inside the process.
var errProbed = errors.New("freshctrl: scope probe (never sent)")

// probeTransport records, and never sends, requests that carry a
// scopeProbe; every other request goes to next unchanged. RoundTrip runs
// on the sending goroutine and only reads the request's context.
type probeTransport struct{ next http.RoundTripper }

func (t *probeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if p, ok := req.Context().Value(probeKey{}).(*scopeProbe); ok {
		u := *req.URL
		p.url = &u
		return nil, errProbed
	}
	return t.next.RoundTrip(req)
}

func withProbe(ctx context.Context, p *scopeProbe) context.Context {
	return context.WithValue(ctx, probeKey{}, p)
}

// scopeFromURL parses an informer's list or watch URL,
// [prefix]/api/v1[/namespaces/NS]/RES or
// [prefix]/apis/GROUP/VERSION[/namespaces/NS]/RES, and its selectors.
func scopeFromURL(u *url.URL) (Scope, schema.GroupResource, bool) {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	i := slices.IndexFunc(parts, func(p string) bool { return p == "api" || p == "apis" })
	var gr schema.GroupResource
	switch {
	case i < 0:
		return Scope{}, gr, false
	case parts[i] == "api":
		i += 2
	case i+1 < len(parts):
		gr.Group = parts[i+1]
		i += 3
	}
	if i >= len(parts) {
		return Scope{}, gr, false
	}
	var s Scope
	rest := parts[i:]
	if len(rest) == 3 && rest[0] == "namespaces" && rest[2] != "status" && rest[2] != "finalize" {
		s.Namespace, rest = rest[1], rest[2:]
	}
	if len(rest) != 1 || rest[0] == "" {
		return Scope{}, gr, false // an object, a subresource, discovery
	}
	gr.Resource = rest[0]
	q := u.Query()
	if l := q.Get("labelSelector"); l != "" {
		if sel, err := labels.Parse(l); err == nil {
			s.Labels = sel
		}
	}
	if f := q.Get("fieldSelector"); f != "" {
		if sel, err := fields.ParseSelector(f); err == nil {
			s.Fields = sel
		}
	}
	return s, gr, true
}
