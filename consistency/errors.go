package consistency

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
)

// ConsistencyError is EnsureReady's error when a cache is still behind the
// owner's writes after the bounded wait: upstream's fields (ReadRV,
// WroteRV, GroupResource), and which informer is behind. It matches
// freshness.ErrNotFresh with errors.Is, and errors.As fills in
// kube-controller-manager's own *consistency.ConsistencyError from it (see
// As), so controllers that count upstream's error count this one.
type ConsistencyError struct {
	// ReadRV is the resource version the lagging informer had applied,
	// WroteRV the one the owner's write needs: empty when the informer's
	// cache was in doubt (its stream broke, or a restore was being told,
	// and it had not yet shown that the server did not go back).
	ReadRV, WroteRV string
	// GroupResource is the lagging informer's resource.
	GroupResource schema.GroupResource
	// Owner is the owner whose sync was skipped.
	Owner types.NamespacedName
	// Scope and InformerName are the lagging informer's (several
	// informers may cache one resource: one per namespace, say).
	Scope        cache.Selector
	InformerName string
	// Waited is how long EnsureReady waited before it gave up.
	Waited time.Duration
}

// Error reads as upstream's, then names the informer and the wait.
func (e *ConsistencyError) Error() string {
	var b strings.Builder
	if e.WroteRV == "" {
		fmt.Fprintf(&b, "cache of group resource %s at version %s is in doubt: its stream broke or a restore is being told, and it has not shown the server did not go back", e.GroupResource.String(), e.ReadRV)
	} else {
		fmt.Fprintf(&b, "read version: %s is not as new as written version: %s for group resource %s", e.ReadRV, e.WroteRV, e.GroupResource.String())
	}
	scope := e.InformerName
	if scope == "" {
		scope = e.Scope.String()
	}
	fmt.Fprintf(&b, " (informer %s", scope)
	if e.Owner.Name != "" {
		fmt.Fprintf(&b, ", owner %s", e.Owner)
	}
	if e.Waited > 0 {
		fmt.Fprintf(&b, ", after waiting %v", e.Waited.Round(time.Millisecond))
	}
	b.WriteString(")")
	return b.String()
}

// Is reports whether target is freshness.ErrNotFresh.
func (e *ConsistencyError) Is(target error) bool { return target == freshness.ErrNotFresh }

var groupResourceType = reflect.TypeFor[schema.GroupResource]()

// As fills in target when it points to a pointer to another package's
// struct named ConsistencyError with upstream's fields (ReadRV and WroteRV
// strings, GroupResource a schema.GroupResource): kube-controller-manager's
// k8s.io/kubernetes/pkg/controller/util/consistency.ConsistencyError,
// which this package cannot name without importing k8s.io/kubernetes. So a
// controller's
//
//	var consistencyErr *consistencyutil.ConsistencyError
//	if errors.As(err, &consistencyErr) { metrics...Inc() }
//
// counts this error too. It reports false for any other target.
func (e *ConsistencyError) As(target any) bool {
	pp := reflect.ValueOf(target)
	if pp.Kind() != reflect.Pointer || pp.IsNil() {
		return false
	}
	p := pp.Elem() // the *T variable
	if p.Kind() != reflect.Pointer || !p.CanSet() {
		return false
	}
	t := p.Type().Elem()
	if t.Kind() != reflect.Struct || t.Name() != "ConsistencyError" || t == reflect.TypeFor[ConsistencyError]() {
		return false
	}
	read, ok1 := t.FieldByName("ReadRV")
	wrote, ok2 := t.FieldByName("WroteRV")
	gr, ok3 := t.FieldByName("GroupResource")
	if !ok1 || !ok2 || !ok3 || read.Type.Kind() != reflect.String || wrote.Type.Kind() != reflect.String || gr.Type != groupResourceType ||
		!read.IsExported() || !wrote.IsExported() || !gr.IsExported() {
		return false
	}
	v := reflect.New(t)
	v.Elem().FieldByIndex(read.Index).SetString(e.ReadRV)
	v.Elem().FieldByIndex(wrote.Index).SetString(e.WroteRV)
	v.Elem().FieldByIndex(gr.Index).Set(reflect.ValueOf(e.GroupResource))
	p.Set(v)
	return true
}
