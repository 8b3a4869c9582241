// Package factory is the machinery of the informer factories: drop-ins for
// client-go's informers.SharedInformerFactory (typed) and
// dynamicinformer.DynamicSharedInformerFactory (unstructured), whose
// informers wait for freshness. Package cache makes them with its
// FreshInformer (cache.SharedInformerFactory, documented there):
//
//	factory := cache.NewSharedInformerFactory(client, 0, cache.WithNamespace("ns"))
//	pods := factory.Core().V1().Pods().Lister()
//	factory.Start(ctx.Done())
//	factory.WaitForCacheSync(ctx.Done())
//	err := factory.WaitForFreshness(ctx, podsGVR, written.ResourceVersion)
//
// # Why generic
//
// The factories make cache.FreshInformers, and cache's API names the
// factories (cache.NewSharedInformerFactory returns one), so this package
// cannot import cache. It is generic over the informer it makes instead:
// SharedInformerFactory[I] takes any I that is an Informer (a shared index
// informer that names its resource, waits for freshness and syncs), made
// by the constructor in its Config. Package cache's SharedInformerFactory
// embeds SharedInformerFactory[*FreshInformer], and documents what it adds
// to client-go's.
//
// # Files
//
//   - typed.go: the typed factory, SharedInformerFactory. Its informers are
//     keyed by object type, as client-go's are. client-go's generated
//     group packages (factory.Core().V1().Pods()) reach it through its
//     accessors, which know the scope of what they ask for.
//   - typed_generated.go (written by internal/gentyped): the group
//     accessors, and what the factory knows of each resource of client-go's
//     typed clientset.
//   - clientset.go: how the typed factory lists and watches a resource of
//     the clientset.
//   - newer.go: resources outside the table, found at run time.
//   - dynamic.go: the dynamic factory, DynamicSharedInformerFactory, keyed
//     by resource.
//   - set.go: the informers a factory made, started and runs.
//   - wait.go: waits and read barriers (Sync) over several informers.
//   - generic.go: the GenericInformer ForResource returns.
//   - informer.go: Informer, Spec and Config, what package cache supplies.
//   - generated.go, informerfor.go: cache.InformerFor, which puts an
//     informer in a code-generated (informer-gen) factory: the shape of
//     the generated code it relies on, and what it does with it.
//
// # No reflection, small programs
//
// The typed factory reaches the clientset without reflect's method calls,
// which would make the linker keep every exported method of every type a
// program reaches. Nor does it hold a table of closures calling each typed
// client (client.CoreV1().Pods(ns).List), which would keep every typed
// client and its apply configurations. It keeps, per resource, data
// (group, version, resource, kind, namespaced, empty object and list) and
// the accessor of the group version's REST client, and lists and watches
// with client-go's generic client (gentype, what every typed client of the
// clientset is) over that REST client, sending what the typed client
// sends; on client-go's fake clientset it sends the actions the fake typed
// clients send. So a program on it stays about the size of its client-go
// twin: hack/binsize.sh (make test) holds the ratio, and docs/benchmarks.md
// ("Binary size") has the figures of each shape tried. One difference from
// calling the typed client: a kubernetes.Interface of one's own that wraps
// the typed clients (to trace their calls, say) is reached through its
// group clients' RESTClient(), below those wrappers.
//
// # Getters do nothing
//
// As client-go's, the factories' getters (accessors, InformerFor,
// ForResource) send nothing, start nothing and never wait on a server:
// they make informers, and Start runs them. So the typed factory never runs
// an informer to see what it lists. Its group accessors hand client-go's
// group packages the factory's accessors (typed.go), through which every
// request comes from a generated accessor in the factory's scope; an
// InformerFor called otherwise, with a newFunc of one's own, keeps that
// newFunc's informer as client-go does (plain, unless newFunc returns an
// I).
//
// # Client-go versions
//
// The factory's table is that of go.mod's client-go, the lowest the module
// supports, less what a newer supported one dropped. A resource outside
// it (0.37's Lifecycle() group, new versions and resources; 0.36's
// scheduling.k8s.io/v1alpha2) is found at run time (newer.go): its group,
// version and kind in client-go's scheme, its scope in a table kept for
// the supported versions, and it is listed and watched like the table's
// resources, over a REST client of its group version that client-go's rest
// package makes on the core group client's server, HTTP client and rate
// limiter, or with the fake clientset's actions. ForResource
// and the group accessors give Is for them. Go cannot add a method only
// when a newer client-go is built in, so the accessors of newer groups
// (factory.Lifecycle() on 0.37) are promoted from a client-go factory the
// typed factory embeds: their informers are client-go's, without
// freshness (NewGroup and ForResource give Is); Start, WaitForCacheSync
// and Shutdown cover them. A clientset of one's own whose core group
// client is not a *rest.RESTClient gets client-go's plain informer for
// resources outside the table.
//
// # Lookups
//
// One lookup by resource, FreshInformersForResource (which makes both
// factories a cache.InformerSource), and cache.FreshInformerOf for an
// informer in hand. lookup.go has the lookups of cache.InformerList and
// cache.Sources.
package factory
