package cache

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/freshinformer/freshinformer/internal/resources"
	"github.com/freshinformer/freshinformer/internal/scope"
)

// Selector returns what the informer lists (WithSelector; the factories
// set it): its scope, which tells two informers of one resource apart in
// metrics and routes read-your-writes.
func (f *FreshInformer) Selector() Selector { return f.cfg.selector }

// LabelSelector returns the label selector as the API takes it, "" for
// everything.
func (s Selector) LabelSelector() string { return scope.Scope(s).LabelSelector() }

// FieldSelector returns the field selector as the API takes it, "" for
// everything.
func (s Selector) FieldSelector() string { return scope.Scope(s).FieldSelector() }

// String describes the scope: "all namespaces", "namespace ns, labels
// app=x", ...
func (s Selector) String() string { return scope.Scope(s).String() }

// Admits returns nil if the informer's scope lets it see obj, and an error
// matching ErrNotWatched, saying why not, otherwise. Cluster-scoped
// objects (no namespace) are outside no namespace. A field selector on
// fields other than metadata.name and metadata.namespace cannot be checked
// here and admits everything.
func (f *FreshInformer) Admits(obj metav1.Object) error {
	why := scope.Scope(f.cfg.selector).Excludes(obj.GetNamespace(), obj.GetName(), obj.GetLabels())
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
	return scope.Scope(s).Excludes(namespace, name, objLabels) == ""
}
