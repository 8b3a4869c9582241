package freshctrl

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/freshinformer/freshinformer/freshctrl/internal/fakeapi"
)

// TestFakeHooksRefuseWhatTheyCannotServe: package fake's hooks take only
// freshctrl's cache, and only before it has made an informer (one made
// earlier would list and watch the API server).
func TestFakeHooksRefuseWhatTheyCannotServe(t *testing.T) {
	none := func(fakeapi.Informer) toolscache.ListerWatcher { return nil }
	foreign := &informertest.FakeInformers{}
	if err := fakeapi.SetListerWatchers(foreign, none); err == nil {
		t.Error("SetListerWatchers took controller-runtime's fake cache")
	}
	if _, err := fakeapi.NewClient(nil, foreign, client.CacheOptions{}, 0); err == nil {
		t.Error("NewClient took controller-runtime's fake cache")
	}
	cc, err := Options{DisableMetrics: true}.NewCache(offlineConfig(), crcache.Options{Scheme: scheme.Scheme, Mapper: staticMapper()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cc.GetInformer(waitCtx(t), &corev1.ConfigMap{}, crcache.BlockUntilSynced(false)); err != nil {
		t.Fatal(err)
	}
	if err := fakeapi.SetListerWatchers(cc, none); err == nil {
		t.Error("SetListerWatchers took a cache that has made an informer")
	}
}
