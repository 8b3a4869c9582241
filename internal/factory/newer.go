package factory

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// Resources outside the table: what the linked client-go serves but
// typed_generated.go does not name, because go.mod's client-go (the lowest
// supported) lacks it or a newer supported one dropped it (0.37's
// lifecycle.k8s.io, 0.36's scheduling.k8s.io/v1alpha2). The factory cannot
// name their types or group clients in its code, so it finds each such
// resource at run time, without calling methods by reflection and without
// sending anything:
//
//   - its group, version and kind from client-go's scheme (which knows
//     every type the linked client-go serves), its resource as client-go
//     guesses it from the kind (every resource of the table follows that
//     rule: a test checks it), and whether it is namespaced from
//     outsideTable, kept by hand for the supported client-go versions (a
//     test checks it against the linked one);
//   - it lists and watches with client-go's generic client, as the table's
//     resources do, over a REST client of the resource's group version
//     that client-go's rest package makes as it makes a clientset's group
//     clients, on the core group client's server, HTTP client (host,
//     credentials) and rate limiter (groupVersionClient); on client-go's
//     fake clientset, with the actions the fake typed clients send. Its
//     requests count against the core group client's rate limiter, which
//     the clientset shares among all groups anyway when its config sets
//     QPS.
//
// A resource outside both the table and outsideTable (one a client-go
// newer than those supported added), or a clientset of one's own whose
// core group client is not a *rest.RESTClient, gets client-go's plain
// informer.

// outsideTable says, of each resource that a supported client-go serves
// and the table lacks, whether it is namespaced. A new map at each call
// (only as an informer is made): nobody can write to the table.
func outsideTable() map[schema.GroupVersionResource]bool {
	return map[schema.GroupVersionResource]bool{
		// client-go 0.37 added these.
		{Group: "certificates.k8s.io", Version: "v1", Resource: "clustertrustbundles"}:          false,
		{Group: "certificates.k8s.io", Version: "v1", Resource: "podcertificaterequests"}:       true,
		{Group: "lifecycle.k8s.io", Version: "v1alpha1", Resource: "evictionrequests"}:          true,
		{Group: "lifecycle.k8s.io", Version: "v1alpha1", Resource: "evictions"}:                 true,
		{Group: "resource.k8s.io", Version: "v1", Resource: "devicetaintrules"}:                 false,
		{Group: "scheduling.k8s.io", Version: "v1alpha3", Resource: "compositepodgroups"}:       true,
		{Group: "scheduling.k8s.io", Version: "v1alpha3", Resource: "podgroups"}:                true,
		{Group: "scheduling.k8s.io", Version: "v1alpha3", Resource: "workloads"}:                true,
		{Group: "scheduling.k8s.io", Version: "v1beta1", Resource: "podgroups"}:                 true,
		{Group: "scheduling.k8s.io", Version: "v1beta1", Resource: "workloads"}:                 true,
		{Group: "storagemigration.k8s.io", Version: "v1", Resource: "storageversionmigrations"}: false,
		// client-go 0.37 dropped these.
		{Group: "scheduling.k8s.io", Version: "v1alpha2", Resource: "podgroups"}: true,
		{Group: "scheduling.k8s.io", Version: "v1alpha2", Resource: "workloads"}: true,
	}
}

// newerResource returns what the factory needs to list and watch obj's
// resource, outside the table; ok is false if obj is not a type of
// client-go's scheme, its resource is not in outsideTable, or the
// clientset cannot reach it.
func (f *SharedInformerFactory[I]) newerResource(obj runtime.Object) (typedResource, bool) {
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		return typedResource{}, false
	}
	for _, gvk := range gvks {
		gvr, _ := meta.UnsafeGuessKindToResource(gvk)
		namespaced, known := outsideTable()[gvr]
		if !known {
			continue
		}
		res, ok := schemeResource(gvr, gvk.Kind, namespaced)
		if !ok || !reachable(f.client, res) {
			return typedResource{}, false
		}
		return res, true
	}
	return typedResource{}, false
}

// schemeResource describes gvr, whose objects are of kind, from client-go's
// scheme: ok is false unless the scheme has the kind and its list
// (kind+"List") in gvr's group version and the kind has object metadata.
func schemeResource(gvr schema.GroupVersionResource, kind string, namespaced bool) (typedResource, bool) {
	gv := gvr.GroupVersion()
	obj, err := scheme.Scheme.New(gv.WithKind(kind))
	if err != nil {
		return typedResource{}, false
	}
	if _, ok := obj.(metaObject); !ok {
		return typedResource{}, false
	}
	listKind := gv.WithKind(kind + "List")
	if _, err := scheme.Scheme.New(listKind); err != nil {
		return typedResource{}, false
	}
	return typedResource{
		gvr:        gvr,
		kind:       kind,
		namespaced: namespaced,
		object:     obj,
		newList: func() runtime.Object {
			l, _ := scheme.Scheme.New(listKind) // known: checked above
			return l
		},
		restClient: func(c kubernetes.Interface) rest.Interface { return groupVersionClient(c, gv) },
	}, true
}

// reachable reports whether the factory can list res through client: a
// fake clientset answers any resource; another needs a core group client
// that is a *rest.RESTClient.
func reachable(client kubernetes.Interface, res typedResource) bool {
	if _, ok := client.(fakeClientset); ok {
		return true
	}
	return !isNil(res.restClient(client))
}

// groupVersionClient returns a REST client of gv's API, made as client-go
// makes a clientset's group clients (rest.NewRESTClient at the group
// version's path, rest.DefaultVersionedAPIPath, with the generated
// clients' serializer), sharing client's core REST client's server, HTTP
// client and rate limiter; nil if client has no core *rest.RESTClient. The
// core client's content type, warning handler and user agent are not
// readable: requests negotiate as a clientset's with the default content
// type does (protobuf first, as the typed clients prefer it), warnings go
// to client-go's default handler, and the user agent is whatever the
// shared HTTP client sets.
func groupVersionClient(client kubernetes.Interface, gv schema.GroupVersion) rest.Interface {
	if isNil(client) || isNil(client.CoreV1()) {
		return nil
	}
	core, ok := client.CoreV1().RESTClient().(*rest.RESTClient)
	if !ok || core == nil {
		return nil
	}
	apiPath := "/apis" // where a clientset's group clients are (their setConfigDefaults)
	if gv.Group == "" {
		apiPath = "/api"
	}
	content := rest.ClientContentConfig{
		GroupVersion: gv,
		Negotiator:   runtime.NewClientNegotiator(rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion(), gv),
	}
	// The server's root: the core client's base URL, as its requests see it.
	base := core.Get().AbsPath("/").URL()
	rc, err := rest.NewRESTClient(base, rest.DefaultVersionedAPIPath(apiPath, gv), content, core.GetRateLimiter(), core.Client)
	if err != nil {
		return nil
	}
	return rc
}

// schemeObjectOf returns an empty object of gvr from client-go's scheme,
// for a resource outside the table. The scheme knows kinds, not resources:
// gvr's kind is the one kind of its group version that has a list kind
// (kind+"List") and whose plural, as client-go guesses it
// (meta.UnsafeGuessKindToResource: lower case, then -s, -es after s, -ies
// for a final y), is gvr.Resource. Every resource of the table follows
// that rule (a test checks it). ok is false if no kind, or more than one,
// matches.
func schemeObjectOf(gvr schema.GroupVersionResource) (runtime.Object, bool) {
	gv := gvr.GroupVersion()
	known := scheme.Scheme.KnownTypes(gv)
	var match []string
	for kind := range known {
		if _, ok := known[kind+"List"]; !ok {
			continue
		}
		if plural, _ := meta.UnsafeGuessKindToResource(gv.WithKind(kind)); plural.Resource == gvr.Resource {
			match = append(match, kind)
		}
	}
	if len(match) != 1 {
		return nil, false
	}
	obj, err := scheme.Scheme.New(gv.WithKind(match[0]))
	if err != nil {
		return nil, false
	}
	return obj, true
}
