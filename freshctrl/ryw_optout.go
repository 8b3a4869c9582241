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

// optOutIndex holds, per option struct type, the index of its opt-out
// field (nil where the field does not exist). Filled once at init for every
// type the client reads it from, so lookups take no lock.
var optOutIndex = func() map[reflect.Type][]int {
	m := map[reflect.Type][]int{}
	for _, t := range []reflect.Type{
		reflect.TypeFor[client.GetOptions](),
		reflect.TypeFor[client.ListOptions](),
		reflect.TypeFor[client.CreateOptions](),
		reflect.TypeFor[client.UpdateOptions](),
		reflect.TypeFor[client.PatchOptions](),
		reflect.TypeFor[client.ApplyOptions](),
		reflect.TypeFor[client.DeleteOptions](),
		reflect.TypeFor[client.SubResourceCreateOptions](),
		reflect.TypeFor[client.SubResourceUpdateOptions](),
		reflect.TypeFor[client.SubResourcePatchOptions](),
		reflect.TypeFor[client.SubResourceApplyOptions](),
	} {
		m[t] = boolField(t, optOutField)
	}
	return m
}()

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
	v := reflect.ValueOf(applied).Elem()
	idx, known := optOutIndex[v.Type()]
	if !known {
		idx = boolField(v.Type(), optOutField)
	}
	return idx != nil && v.FieldByIndex(idx).Bool()
}

// optOutSupported reports whether the controller-runtime freshctrl was built
// with has the per-request opt-out (v0.25 and later).
func optOutSupported() bool {
	return optOutIndex[reflect.TypeFor[client.GetOptions]()] != nil
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
