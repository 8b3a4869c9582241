// Command clientgo is the binary-size baseline: a small controller's
// informers on client-go's own factory. Its twin, ../fresh, is the same
// program on freshinformer's factory; hack/binsize.sh compares the two.
package main

import (
	"context"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	config, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	client := kubernetes.NewForConfigOrDie(config)
	factory := informers.NewSharedInformerFactory(client, 0)
	pods := factory.Core().V1().Pods().Lister()
	configMaps := factory.Core().V1().ConfigMaps().Lister()
	ctx := context.Background()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	p, _ := pods.List(labels.Everything())
	c, _ := configMaps.List(labels.Everything())
	fmt.Println(len(p), len(c))
}
