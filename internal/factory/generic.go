package factory

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
)

// genericInformer is client-go's informers.GenericInformer over one of the
// factory's informers: ForResource hands it out.
type genericInformer struct {
	informer toolscache.SharedIndexInformer
	resource schema.GroupResource
}

func (g genericInformer) Informer() toolscache.SharedIndexInformer { return g.informer }

func (g genericInformer) Lister() toolscache.GenericLister {
	return toolscache.NewGenericLister(g.informer.GetIndexer(), g.resource)
}
