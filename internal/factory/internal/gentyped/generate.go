package main

import (
	"bytes"
	"context"
	"fmt"
	"go/format"
	"path"
	"reflect"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"text/template"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	clientgoinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
)

// removedAfterFloor names the group versions that go.mod's client-go has
// and a newer supported one dropped: code naming them would not compile
// there. The factory leaves them to its embedded client-go factory (plain
// informers). Drop an entry when the lowest supported client-go lacks it.
var removedAfterFloor = map[string]string{
	"scheduling.k8s.io/v1alpha2": "client-go 0.37",
}

// typedResource is a resource of the typed clientset.
type typedResource struct {
	Fn          string // the generated function's name: coreV1Pods
	GroupMethod string // the clientset's method: CoreV1
	Accessor    string // the group client's method: Pods
	Namespaced  bool
	GVR         schema.GroupVersionResource
	Object      reflect.Type // the object's struct type: corev1.Pod
	List        reflect.Type // the list's struct type: corev1.PodList
}

// group is an API group accessor of client-go's factory: Core().
type group struct {
	Method string
	Iface  reflect.Type // its group package's Interface
}

var (
	contextType     = reflect.TypeFor[context.Context]()
	listOptionsType = reflect.TypeFor[metav1.ListOptions]()
	watchType       = reflect.TypeFor[watch.Interface]()
	informerType    = reflect.TypeFor[toolscache.SharedIndexInformer]()
)

// methods returns t's methods (sorted by name, as reflect has them).
func methods(t reflect.Type) []reflect.Method {
	out := make([]reflect.Method, t.NumMethod())
	for i := range out {
		out[i] = t.Method(i)
	}
	return out
}

func method(t reflect.Type, name string) (reflect.Method, bool) {
	for _, m := range methods(t) {
		if m.Name == name {
			return m, true
		}
	}
	return reflect.Method{}, false
}

// collectTyped returns the resources the typed clientset lists and
// watches: each group client's accessor (Pods(namespace), Nodes()) whose
// List returns a list of the resource's objects, found by the types, not
// by guessing names.
func collectTyped() (map[reflect.Type]*typedResource, error) {
	out := map[reflect.Type]*typedResource{}
	for _, gm := range methods(reflect.TypeFor[kubernetes.Interface]()) {
		if gm.Type.NumIn() != 0 || gm.Type.NumOut() != 1 || gm.Type.Out(0).Kind() != reflect.Interface {
			continue
		}
		for _, acc := range methods(gm.Type.Out(0)) {
			namespaced := acc.Type.NumIn() == 1 && acc.Type.In(0).Kind() == reflect.String
			if (acc.Type.NumIn() != 0 && !namespaced) || acc.Type.NumOut() != 1 || acc.Type.Out(0).Kind() != reflect.Interface {
				continue
			}
			item, list, ok := listedItem(acc.Type.Out(0))
			if !ok {
				continue
			}
			gvks, _, err := scheme.Scheme.ObjectKinds(reflect.New(item).Interface().(runtime.Object))
			if err != nil {
				return nil, fmt.Errorf("%s().%s(): %w", gm.Name, acc.Name, err)
			}
			gv := gvks[0].GroupVersion()
			if _, ok := removedAfterFloor[gv.String()]; ok {
				continue
			}
			if prev, ok := out[item]; ok {
				return nil, fmt.Errorf("%v is served by both %s().%s() and %s().%s()", item, prev.GroupMethod, prev.Accessor, gm.Name, acc.Name)
			}
			out[item] = &typedResource{
				Fn:          lowerFirst(gm.Name) + acc.Name,
				GroupMethod: gm.Name,
				Accessor:    acc.Name,
				Namespaced:  namespaced,
				GVR:         gv.WithResource(strings.ToLower(acc.Name)),
				Object:      item,
				List:        list,
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no resources found on kubernetes.Interface")
	}
	return out, nil
}

// listedItem returns T when resourceClient has
// List(context.Context, metav1.ListOptions) (*TList, error) with
// TList.Items []T, and Watch(context.Context, metav1.ListOptions)
// (watch.Interface, error).
func listedItem(resourceClient reflect.Type) (item, listType reflect.Type, ok bool) {
	list, okL := method(resourceClient, "List")
	w, okW := method(resourceClient, "Watch")
	if !okL || !okW {
		return nil, nil, false
	}
	lt, wt := list.Type, w.Type
	if lt.NumIn() != 2 || lt.In(0) != contextType || lt.In(1) != listOptionsType || lt.NumOut() != 2 || lt.Out(0).Kind() != reflect.Pointer ||
		wt.NumIn() != 2 || wt.In(0) != contextType || wt.In(1) != listOptionsType || wt.NumOut() != 2 || wt.Out(0) != watchType {
		return nil, nil, false
	}
	items, ok := lt.Out(0).Elem().FieldByName("Items")
	if !ok || items.Type.Kind() != reflect.Slice || items.Type.Elem().Kind() != reflect.Struct {
		return nil, nil, false
	}
	return items.Type.Elem(), lt.Out(0).Elem(), true
}

// collectGroups returns the API group accessors of client-go's factory,
// after checking that the typed clientset serves the objects of each of
// their resources (so that InformerFor makes informers of all of them).
func collectGroups(typed map[reflect.Type]*typedResource) ([]group, error) {
	var groups []group
	for _, gm := range methods(reflect.TypeFor[clientgoinformers.SharedInformerFactory]()) {
		gt := interfaceOut(gm)
		if gt == nil || !strings.HasPrefix(gt.PkgPath(), "k8s.io/client-go/informers/") {
			continue
		}
		for _, vm := range methods(gt) {
			vt := interfaceOut(vm)
			if vt == nil {
				continue
			}
			for _, rm := range methods(vt) {
				if err := checkServed(rm, typed); err != nil {
					return nil, fmt.Errorf("%s().%s().%s(): %w", gm.Name, vm.Name, rm.Name, err)
				}
			}
		}
		groups = append(groups, group{Method: gm.Name, Iface: gt})
	}
	if len(groups) == 0 {
		return nil, fmt.Errorf("no API group accessors found on informers.SharedInformerFactory")
	}
	return groups, nil
}

// interfaceOut returns the interface named Interface that m, taking
// nothing, returns.
func interfaceOut(m reflect.Method) reflect.Type {
	if m.Type.NumIn() != 0 || m.Type.NumOut() != 1 {
		return nil
	}
	t := m.Type.Out(0)
	if t.Kind() != reflect.Interface || t.Name() != "Interface" {
		return nil
	}
	return t
}

// checkServed reads a resource accessor, which returns an interface of
// Informer() and Lister() whose lister's List returns the objects, and
// fails unless the typed clientset serves those objects or their group
// version is one removedAfterFloor leaves out.
func checkServed(rm reflect.Method, typed map[reflect.Type]*typedResource) error {
	if rm.Type.NumIn() != 0 || rm.Type.NumOut() != 1 || rm.Type.Out(0).Kind() != reflect.Interface {
		return fmt.Errorf("not a resource accessor")
	}
	it := rm.Type.Out(0)
	inf, okI := method(it, "Informer")
	lister, okL := method(it, "Lister")
	if !okI || !okL || inf.Type.NumOut() != 1 || inf.Type.Out(0) != informerType || lister.Type.NumOut() != 1 {
		return fmt.Errorf("%v has no Informer() and Lister()", it)
	}
	lt := lister.Type.Out(0)
	list, ok := method(lt, "List")
	if !ok || list.Type.NumOut() != 2 || list.Type.Out(0).Kind() != reflect.Slice || list.Type.Out(0).Elem().Kind() != reflect.Pointer {
		return fmt.Errorf("%v has no List returning objects", lt)
	}
	obj := list.Type.Out(0).Elem().Elem()
	if typed[obj] != nil {
		return nil
	}
	gvks, _, err := scheme.Scheme.ObjectKinds(reflect.New(obj).Interface().(runtime.Object))
	if err == nil {
		if _, removed := removedAfterFloor[gvks[0].GroupVersion().String()]; removed {
			return nil
		}
	}
	return fmt.Errorf("the typed clientset does not serve %v", obj)
}

// clientGoVersion returns the version of the client-go this program is
// built with.
func clientGoVersion() (string, error) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", fmt.Errorf("no build info")
	}
	for _, dep := range info.Deps {
		if dep.Path == "k8s.io/client-go" {
			if dep.Replace != nil {
				return dep.Replace.Version, nil
			}
			return dep.Version, nil
		}
	}
	return "", fmt.Errorf("client-go is not a dependency")
}

func lowerFirst(s string) string { return strings.ToLower(s[:1]) + s[1:] }

// imports names the packages the generated file uses.
type imports map[string]string // path → name

var nonWord = regexp.MustCompile(`[^a-z0-9]`)

// name returns the name the file imports path as: k8s.io/api/core/v1 is
// corev1, k8s.io/client-go/listers/core/v1 corev1listers,
// k8s.io/client-go/informers/core coreinformers.
func (im imports) Name(pkgPath string) string {
	if n, ok := im[pkgPath]; ok {
		return n
	}
	var n string
	switch {
	case strings.HasPrefix(pkgPath, "k8s.io/api/"):
		n = strings.TrimPrefix(pkgPath, "k8s.io/api/")
	case strings.HasPrefix(pkgPath, "k8s.io/client-go/listers/"):
		n = strings.TrimPrefix(pkgPath, "k8s.io/client-go/listers/") + "listers"
	case strings.HasPrefix(pkgPath, "k8s.io/client-go/informers/"):
		n = strings.TrimPrefix(pkgPath, "k8s.io/client-go/informers/") + "informers"
	default:
		n = path.Base(pkgPath)
	}
	n = nonWord.ReplaceAllString(n, "")
	for _, taken := range im {
		if taken == n {
			panic(fmt.Sprintf("gentyped: import name %s of %s is taken", n, pkgPath))
		}
	}
	im[pkgPath] = n
	return n
}

func (im imports) qualified(t reflect.Type) string { return im.Name(t.PkgPath()) + "." + t.Name() }

// Generate returns the formatted source of typed_generated.go.
func Generate() ([]byte, error) {
	typed, err := collectTyped()
	if err != nil {
		return nil, err
	}
	groups, err := collectGroups(typed)
	if err != nil {
		return nil, err
	}
	resources := make([]*typedResource, 0, len(typed))
	for _, r := range typed {
		resources = append(resources, r)
	}
	sort.Slice(resources, func(i, j int) bool { return resources[i].Fn < resources[j].Fn })

	im := imports{}
	for _, p := range []string{"reflect", "k8s.io/apimachinery/pkg/runtime", "k8s.io/apimachinery/pkg/runtime/schema",
		"k8s.io/client-go/kubernetes", "k8s.io/client-go/rest"} {
		im[p] = path.Base(p)
	}
	gms := groupMethodsOf(resources)
	funcs := template.FuncMap{
		"q":     im.qualified,
		"pkg":   im.Name,
		"byGVR": byGVR,
		"base":  path.Base,
		"lower": lowerFirst,
	}
	var body bytes.Buffer
	if err := template.Must(template.New("").Funcs(funcs).Parse(bodyTemplate)).Execute(&body, map[string]any{
		"Groups": groups, "Resources": resources, "GroupMethods": gms,
	}); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	version, err := clientGoVersion()
	if err != nil {
		return nil, err
	}
	writeHeader(&b, version, im)
	b.Write(body.Bytes())
	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("formatting: %w\n%s", err, b.Bytes())
	}
	return src, nil
}

// groupMethodsOf returns the clientset's group methods (CoreV1, ...) that
// serve the resources, sorted.
func groupMethodsOf(resources []*typedResource) []string {
	groupMethods := map[string]bool{}
	for _, r := range resources {
		groupMethods[r.GroupMethod] = true
	}
	var gms []string
	for gm := range groupMethods {
		gms = append(gms, gm)
	}
	sort.Strings(gms)
	return gms
}

// writeHeader writes the generated file's header, generated from client-go
// version, its package clause and im's imports, sorted by path. It comes
// after the body is made: the body's template adds the imports it uses.
func writeHeader(b *bytes.Buffer, version string, im imports) {
	fmt.Fprintf(b, "// Code generated by internal/factory/internal/gentyped from client-go %s; DO NOT EDIT.\n\n", version)
	b.WriteString(
		"//lint:file-ignore SA1019 the table names every type the clientset serves, deprecated ones too\n\n" +
			"package factory\n\nimport (\n")
	paths := make([]string, 0, len(im))
	for p := range im {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if path.Base(p) == im[p] {
			fmt.Fprintf(b, "\t%q\n", p)
		} else {
			fmt.Fprintf(b, "\t%s %q\n", im[p], p)
		}
	}
	b.WriteString(")\n")
}

// gvrTree orders the resources by group, version and resource for nested
// switches.
type gvrTree []struct {
	Group    string
	Versions []struct {
		Version   string
		Resources []*typedResource
	}
}

func byGVR(rs []*typedResource) gvrTree {
	sorted := append([]*typedResource(nil), rs...)
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i].GVR, sorted[j].GVR
		return a.Group+"\x00"+a.Version+"\x00"+a.Resource < b.Group+"\x00"+b.Version+"\x00"+b.Resource
	})
	var t gvrTree
	for _, r := range sorted {
		if len(t) == 0 || t[len(t)-1].Group != r.GVR.Group {
			t = append(t, gvrTree{{Group: r.GVR.Group}}...)
		}
		g := &t[len(t)-1]
		if len(g.Versions) == 0 || g.Versions[len(g.Versions)-1].Version != r.GVR.Version {
			g.Versions = append(g.Versions, struct {
				Version   string
				Resources []*typedResource
			}{Version: r.GVR.Version})
		}
		v := &g.Versions[len(g.Versions)-1]
		v.Resources = append(v.Resources, r)
	}
	return t
}
