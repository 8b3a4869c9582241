package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/freshinformer/freshinformer/integration/controlplane"
	"github.com/freshinformer/freshinformer/integration/testenv"
)

// The control socket snapshots etcd and restores it, as kcmbench -restore
// asks it to: a ConfigMap written after the snapshot is gone once the
// restore answered, and the kube-apiserver serves again. A restore of a
// snapshot it never took is refused.
func TestControlSocketRestoresEtcd(t *testing.T) {
	cp := testenv.NewPlane(t, controlplane.Options{})
	sock := filepath.Join(t.TempDir(), "control.sock")
	stop, err := serveControl(cp, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	post := func(path string, wantStatus int, out any) {
		t.Helper()
		resp, err := hc.Post("http://withcluster"+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != wantStatus {
			t.Fatalf("POST %s: %s, want %d", path, resp.Status, wantStatus)
		}
		if out != nil {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				t.Fatal(err)
			}
		}
	}
	client, err := cp.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var snap struct {
		ID       int
		Revision int64
	}
	post("/snapshot", http.StatusOK, &snap)
	if snap.ID != 1 || snap.Revision <= 0 {
		t.Fatalf("snapshot %+v", snap)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "after-snapshot"}}
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	post("/restore?snapshot=2&bump=0", http.StatusBadRequest, nil)
	post("/restore?snapshot=1&bump=0", http.StatusOK, &struct{ Seconds float64 }{})
	if _, err := client.CoreV1().ConfigMaps("default").Get(ctx, cm.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after the restore, the ConfigMap written after the snapshot: %v; want NotFound", err)
	}
}
