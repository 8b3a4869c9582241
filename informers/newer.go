package informers

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
)

// Resources outside the table: what the linked client-go serves but
// typed_generated.go does not name, because go.mod's client-go (the lowest
// supported) lacks it or a newer supported one dropped it (0.37's
// lifecycle.k8s.io, 0.36's scheduling.k8s.io/v1alpha2). The factory cannot
// name their types or group clients in its code, so it learns each such
// resource at run time, without calling methods by reflection:
//
//   - its group, version, resource and scope from the request newFunc's
//     informer sends (captureScope);
//   - its kind, empty object and list type from client-go's scheme, which
//     knows every type the linked client-go serves;
//   - it lists and watches with client-go's generic client, as the table's
//     resources do, over a REST client of the clientset (the core group's:
//     same host, credentials and scheme-backed serializer) whose requests
//     go to the resource's group version; on client-go's fake clientset,
//     with the actions the fake typed clients send. Its requests count
//     against the core group client's rate limiter, which the clientset
//     shares among all groups anyway when its config sets QPS.
//
// A clientset of one's own without a core REST client gets newFunc's plain
// informer: client-go's, without freshness.

// newerResource returns what the factory needs to list and watch obj's
// resource, learnt from the request newFunc's informer sends, and that
// informer's scope; ok is false if obj is not a type of client-go's scheme,
// the request names another group version, or the clientset cannot be
// reached.
func (f *SharedInformerFactory[I]) newerResource(obj runtime.Object, newFunc internalinterfaces.NewInformerFunc, resync time.Duration) (typedResource, scope, bool) {
	if newFunc == nil {
		return typedResource{}, scope{}, false
	}
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		return typedResource{}, scope{}, false // not client-go's: no capture
	}
	s, gvr, ok := captureScope(newFunc, resync)
	if !ok {
		return typedResource{}, scope{}, false
	}
	for _, gvk := range gvks {
		if gvk.GroupVersion() != gvr.GroupVersion() {
			continue
		}
		res, ok := schemeResource(gvr, gvk.Kind, s.namespace != "")
		if !ok || !reachable(f.client, res) {
			return typedResource{}, scope{}, false
		}
		return res, s, true
	}
	return typedResource{}, scope{}, false
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
// fake clientset answers any resource; another needs a core REST client.
func reachable(client kubernetes.Interface, res typedResource) bool {
	if _, ok := client.(fakeClientset); ok {
		return true
	}
	return !isNil(res.restClient(client))
}

// groupVersionClient returns a REST client sending requests to gv's paths
// over client's core REST client, or nil if client has none.
func groupVersionClient(client kubernetes.Interface, gv schema.GroupVersion) rest.Interface {
	if isNil(client) || isNil(client.CoreV1()) {
		return nil
	}
	core := client.CoreV1().RESTClient()
	if isNil(core) {
		return nil
	}
	prefix := "/apis/" + gv.Group + "/" + gv.Version
	if gv.Group == "" {
		prefix = "/api/" + gv.Version
	}
	return &pathClient{Interface: core, gv: gv, prefix: prefix}
}

// pathClient is a REST client whose requests go to another group version's
// path: its every request starts at prefix (after any path of the host),
// where the wrapped client's would start at its own group version. The
// content negotiation is the wrapped client's: the core group's decodes
// every type of client-go's scheme.
type pathClient struct {
	rest.Interface
	gv     schema.GroupVersion
	prefix string
}

func (c *pathClient) Verb(verb string) *rest.Request  { return c.Interface.Verb(verb).AbsPath(c.prefix) }
func (c *pathClient) Get() *rest.Request              { return c.Interface.Get().AbsPath(c.prefix) }
func (c *pathClient) Post() *rest.Request             { return c.Interface.Post().AbsPath(c.prefix) }
func (c *pathClient) Put() *rest.Request              { return c.Interface.Put().AbsPath(c.prefix) }
func (c *pathClient) Delete() *rest.Request           { return c.Interface.Delete().AbsPath(c.prefix) }
func (c *pathClient) APIVersion() schema.GroupVersion { return c.gv }

func (c *pathClient) Patch(pt types.PatchType) *rest.Request {
	return c.Interface.Patch(pt).AbsPath(c.prefix)
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

// genericNewFunc is the newFunc of client-go's own informer of gvr, as
// client-go's factory (the one its generic ForResource is on) builds it
// over a given client, with the factory's namespace and list options. It
// returns nil if that client-go does not serve gvr.
func (f *SharedInformerFactory[I]) genericNewFunc(gvr schema.GroupVersionResource) internalinterfaces.NewInformerFunc {
	return func(client kubernetes.Interface, resync time.Duration) toolscache.SharedIndexInformer {
		g, err := clientgoinformers.NewSharedInformerFactoryWithOptions(client, resync,
			clientgoinformers.WithNamespace(f.config.Namespace), clientgoinformers.WithTweakListOptions(f.config.TweakListOptions)).ForResource(gvr)
		if err != nil {
			return nil
		}
		return g.Informer()
	}
}
