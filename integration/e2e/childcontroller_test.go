package e2e

import (
	"bytes"
	"fmt"
	"maps"
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

	"github.com/freshinformer/freshinformer/integration/testenv"
)

// The README's complete controllers, examples/childcontroller (client-go)
// and freshctrl/examples/childreconciler (controller-runtime), run as their
// users run them against the real control plane: 20 parents, each updated
// 5 times in quick succession. Every child must end holding its parent's
// data, and the stale-read detector must report nothing.
func TestChildControllersKeepChildrenWithoutStaleReads(t *testing.T) {
	t.Run("client-go", func(t *testing.T) { testChildController(t, "examples/childcontroller") })
	t.Run("controller-runtime", func(t *testing.T) { testChildController(t, "freshctrl/examples/childreconciler") })
}

func testChildController(t *testing.T, dir string) {
	const parents, updates = 20, 5
	bin := buildExample(t, dir)
	name := filepath.Base(dir)
	ns := testenv.Namespace(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := testenv.Plane(t).WriteKubeConfig(kubeconfig); err != nil {
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
