package freshctrl

import (
	"reflect"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// controller-runtime v0.25 added its own read-your-writes: the per-request
// opt-out client.DisableReadYourWritesConsistency (a field of that name on
// every option struct) and CacheOptions.EnableReadYourWritesConsistency.
// freshctrl honours the first and turns off the second, and also builds on
// v0.24, which has neither. Go has no build constraint on a dependency's
// version, so this file reaches both by field name and compiles against
// both: on v0.24 no request can carry the opt-out, and there is nothing to
// turn off.

const (
	optOutField   = "DisableReadYourWritesConsistency"
	upstreamField = "EnableReadYourWritesConsistency"
)

// boolField returns the index of t's bool field name (promoted fields
// included), or nil.
func boolField(t reflect.Type, name string) []int {
	f, ok := t.FieldByName(name)
	if !ok || f.Type.Kind() != reflect.Bool {
		return nil
	}
	return f.Index
}

// optedOut reports whether applied, a request's options after ApplyOptions
// (a *client.GetOptions, *client.CreateOptions, ...), carry
// client.DisableReadYourWritesConsistency. Always false on controller-runtime
// v0.24.
func optedOut[T any](applied *T) bool {
	if applied == nil {
		return false
	}
	// Found by name at each call (about 100 ns more than a lookup in a
	// table filled at init), so that no table is shared by the process.
	v := reflect.ValueOf(applied).Elem()
	idx := boolField(v.Type(), optOutField)
	return idx != nil && v.FieldByIndex(idx).Bool()
}

// optOutSupported reports whether the controller-runtime freshctrl was built
// with has the per-request opt-out (v0.25 and later).
func optOutSupported() bool {
	return boolField(reflect.TypeFor[client.GetOptions](), optOutField) != nil
}

// turnOffUpstreamReadYourWrites clears co.EnableReadYourWritesConsistency,
// controller-runtime's own read-your-writes, which freshctrl's client
// replaces. Nothing to do on v0.24.
func turnOffUpstreamReadYourWrites(co *client.CacheOptions) {
	f := reflect.ValueOf(co).Elem().FieldByName(upstreamField)
	if f.IsValid() && f.CanSet() {
		f.SetZero()
	}
}
