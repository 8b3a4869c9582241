package cache

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/freshinformer/freshinformer/internal/resources"
)

// Selector returns what the informer lists (WithSelector; the factories
// set it): its scope, which tells two informers of one resource apart in
// metrics and routes read-your-writes.
func (f *FreshInformer) Selector() Selector { return f.cfg.selector }

// LabelSelector returns the label selector as the API takes it, "" for
// everything.
func (s Selector) LabelSelector() string {
	if s.Labels == nil || s.Labels.Empty() {
		return ""
	}
	return s.Labels.String()
}

// FieldSelector returns the field selector as the API takes it, "" for
// everything.
func (s Selector) FieldSelector() string {
	if s.Fields == nil || s.Fields.Empty() {
		return ""
	}
	return s.Fields.String()
}

// String describes the scope: "all namespaces", "namespace ns, labels
// app=x", ...
func (s Selector) String() string {
	var parts []string
	if s.Namespace == "" {
		parts = append(parts, "all namespaces")
	} else {
		parts = append(parts, "namespace "+s.Namespace)
	}
	if l := s.LabelSelector(); l != "" {
		parts = append(parts, "labels "+l)
	}
	if f := s.FieldSelector(); f != "" {
		parts = append(parts, "fields "+f)
	}
	return strings.Join(parts, ", ")
}

// Admits returns nil if the informer's scope lets it see obj, and an error
// matching ErrNotWatched, saying why not, otherwise. Cluster-scoped
// objects (no namespace) are outside no namespace. A field selector on
// fields other than metadata.name and metadata.namespace cannot be checked
// here and admits everything.
func (f *FreshInformer) Admits(obj metav1.Object) error {
	why := f.cfg.selector.excludes(obj.GetNamespace(), obj.GetName(), obj.GetLabels())
	if why == "" {
		return nil
	}
	return fmt.Errorf("%w: %s is outside the %s informer's %s", ErrNotWatched, resources.Key(obj.GetNamespace(), obj.GetName()), resources.String(f.cfg.resource), why)
}

// Matches reports whether an object with this namespace, name and labels
// is in the scope: an object of another namespace is out (a cluster-scoped
// one, with no namespace, is in), so is one the label selector rejects; a
// field selector is checked on metadata.name and metadata.namespace, and a
// requirement on any other field counts as met (it cannot be checked
// here).
func (s Selector) Matches(namespace, name string, objLabels map[string]string) bool {
	return s.excludes(namespace, name, objLabels) == ""
}

// excludes says which part of the scope rejects the object, "" if none.
func (s Selector) excludes(namespace, name string, objLabels map[string]string) string {
	if s.Namespace != "" && namespace != "" && namespace != s.Namespace {
		return "namespace " + s.Namespace
	}
	if s.Labels != nil && !s.Labels.Matches(labels.Set(objLabels)) {
		return "label selector " + s.Labels.String()
	}
	if s.Fields != nil {
		set := fields.Set{"metadata.name": name, "metadata.namespace": namespace}
		for _, r := range s.Fields.Requirements() {
			v, checkable := set[r.Field]
			if !checkable {
				continue
			}
			if (r.Operator == selection.NotEquals) == (v != r.Value) {
				continue // met
			}
			return "field selector " + s.Fields.String()
		}
	}
	return ""
}
