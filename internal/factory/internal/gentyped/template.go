package main

// bodyTemplate is the generated file after its imports. Its functions: q
// qualifies a type with its package's name, pkg names a package, base is
// a path's last element, lower lowers a name's first letter, byGVR groups
// the resources by group and version.
const bodyTemplate = `
// The API group accessors, as client-go's informers.SharedInformerFactory
// has them: client-go's group packages over the factory's accessors, whose
// resource accessors call InformerFor in the factory's scope. Groups only
// a newer client-go has come from the embedded client-go factory.
{{range .Groups}}
// {{.Method}} returns informers for the {{base .Iface.PkgPath}} API group.
func (f *SharedInformerFactory[I]) {{.Method}}() {{q .Iface}} {
	return {{pkg .Iface.PkgPath}}.New(accessors[I]{f}, f.config.Namespace, f.config.TweakListOptions)
}
{{end}}
// The resources of client-go's typed clientset: each function returns one's
// facts, and how to reach its group version's REST client.
{{range .Resources}}
func {{.Fn}}() typedResource {
	return typedResource{
		gvr:        schema.GroupVersionResource{Group: {{printf "%q" .GVR.Group}}, Version: {{printf "%q" .GVR.Version}}, Resource: {{printf "%q" .GVR.Resource}}},
		kind:       {{printf "%q" .Object.Name}},
		namespaced: {{.Namespaced}},
		object:     &{{q .Object}}{},
		newList:    func() runtime.Object { return &{{q .List}}{} },
		restClient: {{lower .GroupMethod}}REST,
	}
}
{{end}}
// The REST clients of the clientset's group versions.
{{range .GroupMethods}}
func {{lower .}}REST(c kubernetes.Interface) rest.Interface { return c.{{.}}().RESTClient() }
{{end}}
// typedResourceOf returns the clientset's resource of obj's type.
func typedResourceOf(obj runtime.Object) (typedResource, bool) {
	switch obj.(type) {
{{- range .Resources}}
	case *{{q .Object}}:
		return {{.Fn}}(), true
{{- end}}
	}
	return typedResource{}, false
}

// resourceOfType returns the clientset's resource of obj's type, without
// its List and Watch.
func resourceOfType(obj runtime.Object) (schema.GroupVersionResource, bool) {
	switch obj.(type) {
{{- range .Resources}}
	case *{{q .Object}}:
		return schema.GroupVersionResource{Group: {{printf "%q" .GVR.Group}}, Version: {{printf "%q" .GVR.Version}}, Resource: {{printf "%q" .GVR.Resource}}}, true
{{- end}}
	}
	return schema.GroupVersionResource{}, false
}

// objectTypeOf returns the type of gvr's objects, which keys the factory's
// informer of gvr: *corev1.Pod for pods.
func objectTypeOf(gvr schema.GroupVersionResource) (reflect.Type, bool) {
	switch gvr.Group {
{{- range byGVR .Resources}}
	case {{printf "%q" .Group}}:
		switch gvr.Version {
{{- range .Versions}}
		case {{printf "%q" .Version}}:
			switch gvr.Resource {
{{- range .Resources}}
			case {{printf "%q" .GVR.Resource}}:
				return reflect.TypeFor[*{{q .Object}}](), true
{{- end}}
			}
{{- end}}
		}
{{- end}}
	}
	return nil, false
}

// allTypedResources returns every resource above; only tests call it, so
// programs do not keep it.
func allTypedResources() []typedResource {
	return []typedResource{
{{- range .Resources}}
		{{.Fn}}(),
{{- end}}
	}
}
`
