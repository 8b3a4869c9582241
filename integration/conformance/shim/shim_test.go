package shim

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	fcache "github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshctrl"
)

// TestImplementationFollowsEnv pins what the conformance runner relies on:
// without EnvImpl every constructor builds freshinformer's implementation,
// with EnvImpl=upstream none does.
func TestImplementationFollowsEnv(t *testing.T) {
	lw := &toolscache.ListWatch{}
	cfg := &rest.Config{Host: "http://127.0.0.1:1"}
	opts := crcache.Options{Mapper: meta.NewDefaultRESTMapper(nil)}
	for _, impl := range []string{"", "freshinformer", "upstream"} {
		t.Run("impl="+impl, func(t *testing.T) {
			t.Setenv(EnvImpl, impl)
			ours := impl != "upstream"
			if Upstream() == ours {
				t.Fatalf("Upstream() = %v", Upstream())
			}
			informers := map[string]toolscache.SharedInformer{
				"NewSharedInformer":                 NewSharedInformer(lw, &corev1.Pod{}, 0),
				"NewSharedIndexInformer":            NewSharedIndexInformer(lw, &corev1.Pod{}, 0, toolscache.Indexers{}),
				"NewSharedIndexInformerWithOptions": NewSharedIndexInformerWithOptions(lw, &corev1.Pod{}, toolscache.SharedIndexInformerOptions{}),
			}
			for name, inf := range informers {
				if _, isOurs := inf.(*fcache.FreshInformer); isOurs != ours {
					t.Errorf("%s built a %T", name, inf)
				}
			}
			c, err := NewCache(cfg, opts)
			if err != nil {
				t.Fatalf("NewCache: %v", err)
			}
			if _, isOurs := c.(*freshctrl.Cache); isOurs != ours {
				t.Errorf("NewCache built a %T", c)
			}
		})
	}
}
