package freshctrl

import (
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// disableReadYourWrites is client.DisableReadYourWritesConsistency for the
// tests: it sets the same field by name, so the tests compile against
// controller-runtime v0.24, which has no such option (there it sets
// nothing). A test of the opt-out calls requireOptOut first.
var disableReadYourWrites testOptOut

// requireOptOut skips t where controller-runtime has no per-request
// opt-out (before v0.25).
func requireOptOut(t testing.TB) {
	t.Helper()
	if !optOutSupported() {
		t.Skip("this controller-runtime has no DisableReadYourWritesConsistency (v0.25 added it)")
	}
}

type testOptOut struct{}

// set sets the opt-out field of the option struct o points to, if it has
// one.
func (testOptOut) set(o any) {
	if f := reflect.ValueOf(o).Elem().FieldByName(optOutField); f.IsValid() {
		f.SetBool(true)
	}
}

func (d testOptOut) ApplyToGet(o *client.GetOptions)       { d.set(o) }
func (d testOptOut) ApplyToList(o *client.ListOptions)     { d.set(o) }
func (d testOptOut) ApplyToCreate(o *client.CreateOptions) { d.set(o) }
func (d testOptOut) ApplyToUpdate(o *client.UpdateOptions) { d.set(o) }
func (d testOptOut) ApplyToPatch(o *client.PatchOptions)   { d.set(o) }
func (d testOptOut) ApplyToApply(o *client.ApplyOptions)   { d.set(o) }
func (d testOptOut) ApplyToDelete(o *client.DeleteOptions) { d.set(o) }
func (d testOptOut) ApplyToSubResourceCreate(o *client.SubResourceCreateOptions) {
	d.set(o)
}
func (d testOptOut) ApplyToSubResourceUpdate(o *client.SubResourceUpdateOptions) {
	d.set(o)
}
func (d testOptOut) ApplyToSubResourcePatch(o *client.SubResourcePatchOptions) {
	d.set(o)
}
func (d testOptOut) ApplyToSubResourceApply(o *client.SubResourceApplyOptions) {
	d.set(o)
}

// controllerRuntimeVersion is the controller-runtime version this package
// is built with, as the go command resolves it here (test binaries carry
// no dependency versions in their build info); "" if the go command cannot
// say.
func controllerRuntimeVersion(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}", "sigs.k8s.io/controller-runtime").Output()
	if err != nil {
		t.Logf("go list -m sigs.k8s.io/controller-runtime: %v", err)
		return ""
	}
	return strings.TrimSpace(string(out))
}

// minorOf returns the minor number of a v0.MINOR.PATCH version, or -1.
func minorOf(v string) int {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 || parts[0] != "0" {
		return -1
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil {
		return -1
	}
	return n
}

// The field-name shim finds the opt-out on every option struct from v0.25
// on and on none before, and CacheOptions' switch with it: a rename
// upstream fails here instead of silently ignoring the opt-out.
func TestOptOutFieldFollowsControllerRuntime(t *testing.T) {
	supported := optOutSupported()
	for _, typ := range []reflect.Type{
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
		if idx := boolField(typ, optOutField); (idx != nil) != supported {
			t.Errorf("%v has the opt-out field: %v, GetOptions: %v", typ, idx != nil, supported)
		}
	}
	if _, ok := reflect.TypeFor[client.CacheOptions]().FieldByName(upstreamField); ok != supported {
		t.Errorf("CacheOptions has %s: %v, the options have %s: %v", upstreamField, ok, optOutField, supported)
	}
	v := controllerRuntimeVersion(t)
	if m := minorOf(v); m < 0 {
		t.Logf("controller-runtime version %q not known: the version check is skipped", v)
	} else if want := m >= 25; supported != want {
		t.Errorf("controller-runtime %s: opt-out found: %v, want %v", v, supported, want)
	}
}

func TestOptedOut(t *testing.T) {
	requireOptOut(t)
	checks := []struct {
		name     string
		with, no bool
	}{
		{"get", optedOut((&client.GetOptions{}).ApplyOptions([]client.GetOption{disableReadYourWrites})), optedOut((&client.GetOptions{}).ApplyOptions(nil))},
		{"list", optedOut((&client.ListOptions{}).ApplyOptions([]client.ListOption{client.InNamespace("a"), disableReadYourWrites})), optedOut((&client.ListOptions{}).ApplyOptions([]client.ListOption{client.InNamespace("a")}))},
		{"create", optedOut((&client.CreateOptions{}).ApplyOptions([]client.CreateOption{disableReadYourWrites})), optedOut((&client.CreateOptions{}).ApplyOptions(nil))},
		{"update", optedOut((&client.UpdateOptions{}).ApplyOptions([]client.UpdateOption{disableReadYourWrites})), optedOut((&client.UpdateOptions{}).ApplyOptions(nil))},
		{"patch", optedOut((&client.PatchOptions{}).ApplyOptions([]client.PatchOption{disableReadYourWrites})), optedOut((&client.PatchOptions{}).ApplyOptions(nil))},
		{"apply", optedOut((&client.ApplyOptions{}).ApplyOptions([]client.ApplyOption{disableReadYourWrites})), optedOut((&client.ApplyOptions{}).ApplyOptions(nil))},
		{"delete", optedOut((&client.DeleteOptions{}).ApplyOptions([]client.DeleteOption{disableReadYourWrites})), optedOut((&client.DeleteOptions{}).ApplyOptions(nil))},
		{"subresource update", optedOut((&client.SubResourceUpdateOptions{}).ApplyOptions([]client.SubResourceUpdateOption{disableReadYourWrites})), optedOut((&client.SubResourceUpdateOptions{}).ApplyOptions(nil))},
		{"subresource patch", optedOut((&client.SubResourcePatchOptions{}).ApplyOptions([]client.SubResourcePatchOption{disableReadYourWrites})), optedOut((&client.SubResourcePatchOptions{}).ApplyOptions(nil))},
		{"subresource apply", optedOut((&client.SubResourceApplyOptions{}).ApplyOpts([]client.SubResourceApplyOption{disableReadYourWrites})), optedOut((&client.SubResourceApplyOptions{}).ApplyOpts(nil))},
	}
	for _, c := range checks {
		if !c.with || c.no {
			t.Errorf("%s: opted out with the option: %v, without: %v", c.name, c.with, c.no)
		}
	}
	if optedOut[client.GetOptions](nil) {
		t.Error("nil options opted out")
	}
	type other struct{ DisableReadYourWritesConsistency bool }
	if !optedOut(&other{DisableReadYourWritesConsistency: true}) || optedOut(&other{}) {
		t.Error("a type outside the table is not read by field name")
	}
}

func TestTurnOffUpstreamReadYourWrites(t *testing.T) {
	co := client.CacheOptions{Unstructured: true}
	f := reflect.ValueOf(&co).Elem().FieldByName(upstreamField)
	if f.IsValid() {
		f.Set(reflect.ValueOf(ptr.To(true)))
	}
	turnOffUpstreamReadYourWrites(&co)
	if f.IsValid() && !f.IsNil() {
		t.Fatalf("%s still set", upstreamField)
	}
	if !co.Unstructured {
		t.Fatal("other cache options changed")
	}
}
