package freshctrl_test

import (
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshctrl"
	"github.com/freshinformer/freshinformer/freshtest"
	"github.com/freshinformer/freshinformer/readyourwrites"
	"github.com/freshinformer/freshinformer/writes"
)

// The stale-read detector, on in each part that reads or writes:
// client-go factories, a controller-runtime manager, and the writes
// transport (nil: log and count only, or a handler).
func ExampleOptions_staleReads() {
	cfg := &rest.Config{Host: "https://kube-apiserver.invalid"} // ctrl.GetConfigOrDie() in production
	client := freshtest.NewClientset()                          // kubernetes.NewForConfigOrDie(cfg) in production

	factory := cache.NewSharedInformerFactory(client, 0, // client-go; nil: log and count only, or a handler
		cache.WithInformerOptions(cache.WithStaleReadDetection(nil)))
	o := freshctrl.Options{DetectStaleReads: true} // controller-runtime
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{NewCache: o.NewCache, NewClient: o.NewClient})
	if err != nil {
		fmt.Println(err)
		return
	}
	ryw := readyourwrites.New(factory, 10*time.Second)
	cfg = writes.WrapConfig(cfg, ryw, writes.WithStaleWriteDetection(nil)) // stale writes
	_, fresh := mgr.GetCache().(*freshctrl.Cache)
	fmt.Println(fresh, cfg.WrapTransport != nil)
	// Output: true true
}
