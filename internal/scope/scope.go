// Package scope says what an informer lists, its namespace and its label
// and field selectors, and whether an object is in it: the logic behind
// cache.Selector, which converts to a Scope (the two have the same
// fields).
package scope

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// Scope is what an informer's ListerWatcher lists: one namespace (or
// all), and label and field selectors (nil: none). Field selectors are
// checked only on metadata.name and metadata.namespace, the fields every
// object has.
type Scope struct {
	Namespace string
	Labels    labels.Selector
	Fields    fields.Selector
}

// Of derives a Scope from a namespace and a list options tweak.
func Of(namespace string, tweak func(*metav1.ListOptions)) Scope {
	s := Scope{Namespace: namespace}
	if tweak == nil {
		return s
	}
	var o metav1.ListOptions
	tweak(&o)
	if l, err := labels.Parse(o.LabelSelector); err == nil && !l.Empty() {
		s.Labels = l
	}
	if f, err := fields.ParseSelector(o.FieldSelector); err == nil && !f.Empty() {
		s.Fields = f
	}
	return s
}

// LabelSelector returns the label selector as the API takes it, "" for
// everything.
func (s Scope) LabelSelector() string {
	if s.Labels == nil || s.Labels.Empty() {
		return ""
	}
	return s.Labels.String()
}

// FieldSelector returns the field selector as the API takes it, "" for
// everything.
func (s Scope) FieldSelector() string {
	if s.Fields == nil || s.Fields.Empty() {
		return ""
	}
	return s.Fields.String()
}

// String describes the scope: "all namespaces", "namespace ns, labels
// app=x", ...
func (s Scope) String() string {
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

// Excludes says which part of the scope rejects an object with this
// namespace, name and labels, "" if none. An object of another namespace
// is out (a cluster-scoped one, with no namespace, is in); a requirement
// of the field selector on a field other than metadata.name and
// metadata.namespace counts as met (it cannot be checked here).
func (s Scope) Excludes(namespace, name string, objLabels map[string]string) string {
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

// Checkable reports whether Excludes checks the whole scope: its field
// selector, if any, is on metadata.name and metadata.namespace only.
func (s Scope) Checkable() bool {
	if s.Fields != nil {
		for _, r := range s.Fields.Requirements() {
			if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
				return false
			}
		}
	}
	return true
}
