package e2e

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"

	"github.com/freshinformer/freshinformer/cache"
	"github.com/freshinformer/freshinformer/freshness"
	"github.com/freshinformer/freshinformer/integration/testenv"
	"github.com/freshinformer/freshinformer/readyourwrites"
	"github.com/freshinformer/freshinformer/stalereads"
)

// TestReadYourWritesThroughFactory runs a reconciler's write-then-read
// against the real server, through the drop-in factory: each round
// updates a child ConfigMap and reads it back from the cache at once.
// Without read-your-writes some reads are stale; with it, none is. The
// stale-read detector reports exactly the stale ones.
func TestReadYourWritesThroughFactory(t *testing.T) {
	cs := testenv.Clientset(t)
	ns := testenv.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	var reported atomic.Int64
	var factory informers.SharedInformerFactory = cache.NewSharedInformerFactory(cs, 0, cache.WithNamespace(ns),
		cache.WithInformerOptions(cache.WithStaleReadDetection(func(stalereads.Report) { reported.Add(1) })))
	lister := factory.Core().V1().ConfigMaps().Lister()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }() // Shutdown waits for the informers to stop
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%v did not sync", typ)
		}
	}
	fresh := factory.(*cache.SharedInformerFactory)
	ryw := readyourwrites.New(fresh, 30*time.Second)

	parent, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "parent"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := readyourwrites.OwnerOf(parent)
	child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "child"}, Data: map[string]string{}}
	if child, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, child, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// round writes the child, optionally ensures freshness, then reads the
	// cache and reports whether the read reflects the write.
	round := func(i int, readYourWrites bool) bool {
		t.Helper()
		c := child.DeepCopy()
		c.Data = map[string]string{"round": strconv.Itoa(i)}
		written, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, c, metav1.UpdateOptions{})
		if err := ryw.Wrote(owner, written, err); err != nil {
			t.Fatal(err)
		}
		child = written
		if readYourWrites {
			if err := ryw.EnsureFresh(ctx, owner); err != nil {
				t.Fatal(err)
			}
		}
		got, err := lister.ConfigMaps(ns).Get("child")
		if err != nil {
			return false
		}
		cmp, err := freshness.Compare(got.ResourceVersion, written.ResourceVersion)
		return err == nil && cmp >= 0
	}

	const withRounds = 300
	seen := 0
	for i := range withRounds {
		if round(i, true) {
			seen++
		}
	}
	// Without it, stale reads are common but not certain in any one round:
	// go on until some show up (bounded).
	stale, without := 0, 0
	for without < 2000 && (without < 300 || stale == 0) {
		if !round(withRounds+without, false) {
			stale++
		}
		without++
	}
	t.Logf("read-your-writes on: %d of %d reads saw their own write (%.1f%%)", seen, withRounds, 100*float64(seen)/withRounds)
	t.Logf("read-your-writes off: %d of %d reads saw their own write (%.1f%%)", without-stale, without, 100*float64(without-stale)/float64(without))
	if seen != withRounds {
		t.Errorf("with read-your-writes, %d reads missed their own write", withRounds-seen)
	}
	if stale == 0 {
		t.Errorf("without read-your-writes, no stale read in %d rounds: the test shows nothing", without)
	}
	if n := reported.Load(); n != int64(stale) {
		t.Errorf("the stale-read detector reported %d stale reads, the test counted %d", n, stale)
	}
}
