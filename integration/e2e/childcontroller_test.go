package e2e

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/freshinformer/freshinformer/integration/testenv"
)

// The README's complete controllers, examples/childcontroller (client-go)
// and freshctrl/examples/childreconciler (controller-runtime), run as their
// users run them against the real control plane: 20 parents, each updated
// 5 times in quick succession, with the controller's watch events late.
// Every child must end holding its parent's data, and the stale-read
// detector must report nothing (without read-your-writes it reports
// some: 17 in a run of the client-go one without its EnsureFresh).
func TestChildControllersKeepChildrenWithoutStaleReads(t *testing.T) {
	t.Run("client-go", func(t *testing.T) { testChildController(t, "examples/childcontroller") })
	t.Run("controller-runtime", func(t *testing.T) { testChildController(t, "freshctrl/examples/childreconciler") })
}

func testChildController(t *testing.T, dir string) {
	const parents, updates = 20, 5
	bin := buildExample(t, dir)
	name := filepath.Base(dir)
	ns := testenv.Namespace(t)
	// The controller talks to the apiserver through a proxy that hands it
	// every watch event 200 ms late, while each parent is updated every
	// 50 ms: an update written before the controller's write of the child
	// reaches it after that write and before the child's own event, so the
	// reconcile it triggers reads the child stale unless it waits for it.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: proxy, cluster: {server: %q}}]
contexts: [{name: proxy, context: {cluster: proxy, user: proxy}}]
users: [{name: proxy, user: {}}]
current-context: proxy
`, watchDelayProxy(t, 200*time.Millisecond))), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-namespace", ns, "-metrics-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

	ctx := testenv.Context(t, 3*time.Minute)
	cs := testenv.Clientset(t)
	var wg sync.WaitGroup
	errs := make(chan error, parents)
	for i := range parents {
		wg.Go(func() {
			p, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("parent-%d", i), Labels: map[string]string{"app": "demo"}},
				Data:       map[string]string{"step": "0", "parent": fmt.Sprint(i)},
			}, metav1.CreateOptions{})
			for step := 1; step <= updates && err == nil; step++ {
				time.Sleep(50 * time.Millisecond)
				p.Data["step"] = fmt.Sprint(step)
				p, err = cs.CoreV1().ConfigMaps(ns).Update(ctx, p, metav1.UpdateOptions{})
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	// Every child converges on its parent's last data.
	var wrong []string
	for ctx.Err() == nil {
		wrong = wrong[:0]
		for i := range parents {
			want := map[string]string{"step": fmt.Sprint(updates), "parent": fmt.Sprint(i)}
			child, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, fmt.Sprintf("parent-%d-child", i), metav1.GetOptions{})
			if err != nil || !maps.Equal(child.Data, want) || len(child.OwnerReferences) != 1 {
				wrong = append(wrong, fmt.Sprintf("parent-%d-child: %v %v", i, childData(child), err))
			}
		}
		if len(wrong) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, tail(stderr.String(), 4000))
		}
	case <-time.After(time.Minute):
		t.Fatalf("%s did not stop within a minute of SIGTERM\n%s", name, tail(stderr.String(), 4000))
	}
	if len(wrong) > 0 {
		t.Errorf("%d children wrong after %d parents x %d updates:\n%s", len(wrong), parents, updates, strings.Join(wrong, "\n"))
	}
	var stale int
	if _, err := fmt.Sscanf(strings.TrimSpace(stdout.String()), name+": %d stale reads reported", &stale); err != nil {
		t.Fatalf("%s's output %q: %v", name, stdout.String(), err)
	}
	if stale != 0 || strings.Contains(stderr.String(), "the object has been modified") { // a 409 Conflict: a write on stale state
		t.Errorf("%d stale reads reported; log:\n%s", stale, tail(stderr.String(), 4000))
	}
	t.Logf("%d children right, %d stale reads", parents, stale)
}

func childData(cm *corev1.ConfigMap) map[string]string {
	if cm == nil {
		return nil
	}
	return cm.Data
}

// watchDelayProxy serves the shared plane over plain HTTP, without
// credentials, and hands every watch stream's bytes on d after they came.
func watchDelayProxy(t *testing.T, d time.Duration) string {
	t.Helper()
	cfg := testenv.Config(t)
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		Transport:     rt,
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			switch resp.Request.URL.Query().Get("watch") {
			case "true", "1":
				resp.Body = newDelayedBody(resp.Body, d)
			}
			return nil
		},
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL
}

// delayedBody reads its stream as fast as it comes and hands each piece
// on d after it came, in order.
type delayedBody struct {
	inner  io.ReadCloser
	chunks chan delayedChunk
	rest   []byte
	err    error
}

type delayedChunk struct {
	at   time.Time
	data []byte
	err  error
}

func newDelayedBody(inner io.ReadCloser, d time.Duration) *delayedBody {
	b := &delayedBody{inner: inner, chunks: make(chan delayedChunk, 4096)}
	go func() {
		defer close(b.chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := inner.Read(buf)
			b.chunks <- delayedChunk{at: time.Now().Add(d), data: buf[:n], err: err}
			if err != nil {
				return
			}
		}
	}()
	return b
}

func (b *delayedBody) Read(p []byte) (int, error) {
	for len(b.rest) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		c, ok := <-b.chunks
		if !ok {
			return 0, io.EOF
		}
		time.Sleep(time.Until(c.at))
		b.rest, b.err = c.data, c.err
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}

func (b *delayedBody) Close() error { return b.inner.Close() }
