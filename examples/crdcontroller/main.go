// Command crdcontroller runs the example CRD controller (package
// controller) against $KUBECONFIG: it installs its CRDs, makes Counters
// and counts them up, one status write per reconcile, and prints how many
// reconciles read a Counter older than the controller's own last write of
// it. -mode=fresh (the default) makes the code-generated factory's
// informers FreshInformers, one call per kind, and parks each reconcile
// until the cache holds the controller's writes; -mode=plain keeps the
// generated informers as they are.
//
//	make demo DEMO_CMD="go run ./examples/crdcontroller -mode=plain"
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/freshinformer/freshinformer/examples/crdcontroller/controller"
)

func main() {
	var (
		kubeconfig = flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
		namespace  = flag.String("namespace", "freshinformer-crdcontroller", "namespace to work in (created if missing)")
		counters   = flag.Int("counters", 10, "Counters to create")
		target     = flag.Int("target", 100, "count each Counter must reach")
		workers    = flag.Int("workers", 2, "reconcile workers")
		mode       = flag.String("mode", "fresh", "fresh (FreshInformers, reconciles wait for their own writes) or plain (the generated informers as they are)")
		timeout    = flag.Duration("timeout", 5*time.Minute, "give up after this long")
	)
	flag.Parse()
	if *mode != "fresh" && *mode != "plain" {
		fmt.Fprintln(os.Stderr, "crdcontroller: -mode must be fresh or plain")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "crdcontroller: loading kubeconfig:", err)
		os.Exit(1)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	stats, elapsed, err := controller.CountUp(ctx, cfg, *namespace, *counters, *target, *workers, *mode == "fresh")
	fmt.Printf("[crdcontroller] mode %s: %d counters to %d by %d workers in %s: %v\n", *mode, *counters, *target, *workers, elapsed.Round(time.Millisecond), stats)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crdcontroller:", err)
		os.Exit(1)
	}
}
