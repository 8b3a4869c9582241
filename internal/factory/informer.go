package factory

import (
	"context"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers/internalinterfaces"
	toolscache "k8s.io/client-go/tools/cache"
)

// Informer is what a factory needs of the informers it makes: a shared
// index informer that names its resource, waits for freshness and syncs.
// cache.FreshInformer is one.
type Informer interface {
	toolscache.SharedIndexInformer
	// Resource returns the resource the informer lists and watches.
	Resource() schema.GroupResource
	// WaitForFreshness waits until the informer has applied rv.
	WaitForFreshness(ctx context.Context, rv string) error
	// Sync waits until the informer reflects what the server had
	// committed when Sync was called.
	Sync(ctx context.Context) error
}

// Spec is one informer for Config.New to make: its list and watch, its
// objects, its scope and its indexers, all decided by the factory.
type Spec struct {
	ListerWatcher toolscache.ListerWatcher
	// Object is an empty object of the resource's type.
	Object   runtime.Object
	Resource schema.GroupResource
	Resync   time.Duration
	// Namespace and TweakListOptions are what ListerWatcher lists: the
	// namespace (all if empty) and the change to every request's options
	// (nil if none).
	Namespace        string
	TweakListOptions func(*metav1.ListOptions)
	Indexers         toolscache.Indexers
	// Identifier names the informer in client-go's informer metrics
	// (Config.InformerName with the resource).
	Identifier toolscache.InformerNameAndResource
}

// Config is what a factory is made of: how to make one informer, and the
// options client-go's factories take. Package cache fills it from its
// FactoryOptions.
type Config[I Informer] struct {
	// New makes an informer of the factory (required). The factory sets
	// Transform on it afterwards.
	New func(Spec) I
	// Namespace limits the informers to one namespace (all if empty).
	Namespace string
	// TweakListOptions changes every list and watch request.
	TweakListOptions internalinterfaces.TweakListOptionsFunc
	// Transform is set on every informer the factory makes.
	Transform toolscache.TransformFunc
	// CustomResync is the resync period of the informers of an object
	// type (*corev1.Pod, *unstructured.Unstructured); others take the
	// factory's default.
	CustomResync map[reflect.Type]time.Duration
	// ResourceFor names an object's resource when the typed clientset
	// does not serve its type (a scheme's RESTMapper, say); nil if none.
	ResourceFor func(runtime.Object) (schema.GroupVersionResource, error)
	// HasStarted reports whether an informer was ever run, for Sync with
	// no resources; nil means "the factory started it".
	HasStarted func(I) bool
	// Starting, if set, is told of each informer Start is about to run,
	// before Start returns.
	Starting func(I)
	// InformerName, if set, names the factory's informers in client-go's
	// informer metrics, as client-go's informers.WithInformerName does.
	InformerName *toolscache.InformerName
}

// resync returns the resync period of key's informers.
func (c *Config[I]) resync(key reflect.Type, defaultResync time.Duration) time.Duration {
	if d, ok := c.CustomResync[key]; ok {
		return d
	}
	return defaultResync
}

// make makes one informer of the factory and sets its transform.
func (c *Config[I]) make(spec Spec) I {
	inf := c.New(spec)
	if c.Transform != nil {
		_ = inf.SetTransform(c.Transform) // not started: cannot fail
	}
	return inf
}
