package e2e

// Smoke tests of the harness itself: they pin down the server behaviour the
// freshness library relies on (watch events, bookmarks, 410 Gone) so a
// change in the real binaries shows up here first.

import (
	"context"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/freshinformer/freshinformer/integration/testenv"
)

// smokeRVNum parses a resource version. Resource versions are opaque to clients;
// the tests compare them numerically only to assert server behaviour.
func smokeRVNum(t *testing.T, rv string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		t.Fatalf("resource version %q is not a number: %v", rv, err)
	}
	return n
}

// smokeNextEvent returns the next event of w, failing the test when ctx ends or
// the watch closes first.
func smokeNextEvent(ctx context.Context, t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatalf("watch closed before the next event")
		}
		return ev
	case <-ctx.Done():
		t.Fatalf("no watch event: %v", ctx.Err())
	}
	return watch.Event{}
}

func smokeCreateConfigMap(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) *corev1.ConfigMap {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Data:       map[string]string{"n": "0"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating configmap: %v", err)
	}
	return cm
}

func smokeUpdateConfigMap(ctx context.Context, t *testing.T, cs kubernetes.Interface, cm *corev1.ConfigMap, n int) *corev1.ConfigMap {
	t.Helper()
	cm = cm.DeepCopy()
	cm.Data["n"] = strconv.Itoa(n)
	out, err := cs.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("updating configmap: %v", err)
	}
	return out
}

// smokeConsistentRV is the resource version of a consistent (quorum) list: the
// newest state the server had when it answered.
func smokeConsistentRV(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string) string {
	t.Helper()
	l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatalf("consistent list: %v", err)
	}
	return l.ResourceVersion
}

// smokeExpectExpired asserts that ev is the 410 Gone / Expired error event.
func smokeExpectExpired(t *testing.T, ev watch.Event) {
	t.Helper()
	if ev.Type != watch.Error {
		t.Fatalf("got %s event, want ERROR 410 Expired", ev.Type)
	}
	err := apierrors.FromObject(ev.Object)
	if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Fatalf("got error %v (reason %q), want 410 Expired/Gone", err, apierrors.ReasonForError(err))
	}
	t.Logf("watch error as expected: %v", err)
}

func TestWatchSeesConfigMapChanges(t *testing.T) {
	defer goleak.VerifyNone(t, append(testenv.GoleakOptions(), goleak.IgnoreCurrent())...)
	ctx := testenv.Context(t, 30*time.Second)
	cs := testenv.Clientset(t)
	// A connection this test opens (the shared transport's were closed by
	// a test that restarted the apiserver) stays in the transport's pool
	// with its read loop running: close it before looking for leaks.
	defer utilnet.CloseIdleConnectionsFor(cs.CoreV1().RESTClient().(*rest.RESTClient).Client.Transport)
	ns := testenv.Namespace(t)

	w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: smokeConsistentRV(ctx, t, cs, ns)})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()

	cm := smokeCreateConfigMap(ctx, t, cs, ns, "smoke")
	ev := smokeNextEvent(ctx, t, w)
	if ev.Type != watch.Added || ev.Object.(*corev1.ConfigMap).ResourceVersion != cm.ResourceVersion {
		t.Fatalf("got %s %v, want ADDED at rv %s", ev.Type, ev.Object, cm.ResourceVersion)
	}

	cm2 := smokeUpdateConfigMap(ctx, t, cs, cm, 1)
	ev = smokeNextEvent(ctx, t, w)
	got, ok := ev.Object.(*corev1.ConfigMap)
	if ev.Type != watch.Modified || !ok || got.ResourceVersion != cm2.ResourceVersion || got.Data["n"] != "1" {
		t.Fatalf("got %s %v, want MODIFIED at rv %s", ev.Type, ev.Object, cm2.ResourceVersion)
	}
	if smokeRVNum(t, cm2.ResourceVersion) <= smokeRVNum(t, cm.ResourceVersion) {
		t.Fatalf("update rv %s not after create rv %s", cm2.ResourceVersion, cm.ResourceVersion)
	}
}

// TestQuietWatchGetsBookmark: a watch that sees no events still learns the
// server's progress through BOOKMARK events, whose resource version reaches
// at least that of a consistent list made before the watch. This needs
// etcd progress notifications (--watch-progress-notify-interval) feeding
// the apiserver's watch cache.
//
// The watch cache only sends a bookmark whose resource version is newer
// than the watch's start, i.e. after etcd's revision moved on (on an idle
// cluster: the apiserver's own lease renewal, every ~10 s) and the cache
// heard of it (progress notification, every 5 s here).
func TestQuietWatchGetsBookmark(t *testing.T) {
	cs := testenv.Clientset(t)
	ns := testenv.Namespace(t)

	cases := []struct {
		name    string
		timeout *int64 // watch timeoutSeconds
		within  time.Duration
	}{
		// The watch cache bookmarks every watcher about once a minute.
		{name: "periodic", within: 90 * time.Second},
		// ...and 2 s before a watch's own timeout, if by then it has a
		// newer resource version than the watch started at (with
		// timeoutSeconds <= 10 it often has not, and none comes).
		{name: "before-timeout", timeout: smokePtr(int64(30)), within: 45 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testenv.Context(t, tc.within)
			want := smokeConsistentRV(ctx, t, cs, ns)
			start := time.Now()
			w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{
				ResourceVersion:     want,
				AllowWatchBookmarks: true,
				TimeoutSeconds:      tc.timeout,
			})
			if err != nil {
				t.Fatalf("watch: %v", err)
			}
			defer w.Stop()
			for {
				ev := smokeNextEvent(ctx, t, w)
				if ev.Type != watch.Bookmark {
					t.Fatalf("quiet watch got %s event, want only BOOKMARK", ev.Type)
				}
				got := ev.Object.(*corev1.ConfigMap).ResourceVersion
				t.Logf("BOOKMARK rv %s after %v (consistent list rv %s)", got, time.Since(start).Round(time.Millisecond), want)
				if smokeRVNum(t, got) >= smokeRVNum(t, want) {
					return
				}
			}
		})
	}
}

// TestCompactionExpiresOldResourceVersions: after etcd compaction, requests
// that etcd itself must answer at an old resource version fail with 410,
// while the watch cache keeps serving watches from its own history.
func TestCompactionExpiresOldResourceVersions(t *testing.T) {
	ctx := testenv.Context(t, 90*time.Second)
	cp := testenv.Plane(t)
	cs := testenv.Clientset(t)
	ns := testenv.Namespace(t)

	cm := smokeCreateConfigMap(ctx, t, cs, ns, "compacted")
	oldCM := cm.ResourceVersion
	for i := 1; i <= 3; i++ {
		cm = smokeUpdateConfigMap(ctx, t, cs, cm, i)
	}
	pt, err := cs.CoreV1().PodTemplates(ns).Create(ctx, &corev1.PodTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "uncached"},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "example.invalid/none"}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating podtemplate: %v", err)
	}
	oldPT := pt.ResourceVersion
	// One more write: the compaction keeps only the newest revision.
	smokeUpdateConfigMap(ctx, t, cs, cm, 4)

	rev, err := cp.CompactEtcd(ctx)
	if err != nil {
		t.Fatalf("compact: %v", err)
	}
	t.Logf("compacted etcd at revision %d; configmap rv %s, podtemplate rv %s", rev, oldCM, oldPT)

	t.Run("uncached watch expires", func(t *testing.T) {
		ctx := testenv.Context(t, 15*time.Second)
		w, err := cs.CoreV1().PodTemplates(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: oldPT})
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		defer w.Stop()
		smokeExpectExpired(t, smokeNextEvent(ctx, t, w))
	})

	t.Run("exact list expires", func(t *testing.T) {
		ctx := testenv.Context(t, 30*time.Second)
		// Served from a watch-cache snapshot until the apiserver notices
		// the compaction (it polls every 15 s), then from etcd.
		start := time.Now()
		var err error
		for ctx.Err() == nil {
			_, err = cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{
				ResourceVersion: oldCM, ResourceVersionMatch: metav1.ResourceVersionMatchExact,
			})
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
		t.Fatalf("exact list at compacted rv %s never failed with 410; last error %v", oldCM, err)
	})

	t.Run("cached watch still replays", func(t *testing.T) {
		ctx := testenv.Context(t, 15*time.Second)
		w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: oldCM})
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		defer w.Stop()
		ev := smokeNextEvent(ctx, t, w)
		if ev.Type != watch.Modified {
			t.Fatalf("got %s, want MODIFIED replayed from the watch cache", ev.Type)
		}
	})
}

func TestAPIServerRestart(t *testing.T) {
	ctx := testenv.Context(t, 90*time.Second)
	cp := testenv.Plane(t)
	cs := testenv.Clientset(t)
	ns := testenv.Namespace(t)

	before := smokeCreateConfigMap(ctx, t, cs, ns, "before-restart")
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: before.ResourceVersion})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()

	t0 := time.Now()
	if err := cp.RestartAPIServer(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Logf("kube-apiserver restarted in %v", time.Since(t0).Round(time.Millisecond))

	// The open watch ends with the old process.
	select {
	case ev, ok := <-w.ResultChan():
		if ok {
			t.Fatalf("watch across restart delivered %s, want closed", ev.Type)
		}
	case <-ctx.Done():
		t.Fatalf("watch across restart did not close: %v", ctx.Err())
	}

	// The same clientset (same port, same certificates) works again.
	got, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, before.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get after restart: %v", err)
	}
	if got.ResourceVersion != before.ResourceVersion {
		t.Fatalf("rv after restart %s, want %s (etcd kept)", got.ResourceVersion, before.ResourceVersion)
	}
	smokeCreateConfigMap(ctx, t, cs, ns, "after-restart")

	// The new watch cache starts at etcd's revision at restart: a watch from
	// an older resource version is 410 Gone, even without compaction.
	w2, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: before.ResourceVersion})
	if err != nil {
		t.Fatalf("watch after restart: %v", err)
	}
	defer w2.Stop()
	smokeExpectExpired(t, smokeNextEvent(ctx, t, w2))
}

func smokePtr[T any](v T) *T { return &v }
