package controlplane

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The replicas share one serving certificate, valid for 127.0.0.1 under the
// CA that clients trust, and the admin client certificate is under the
// client CA, in group system:masters.
func TestHACertsServeLoopbackAndAuthenticateAdmin(t *testing.T) {
	c, err := writeHACerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(c.servingCert, c.servingKey)
	if err != nil {
		t.Fatal(err)
	}
	serving, _ := x509.ParseCertificate(pair.Certificate[0])
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(c.servingCA)
	if _, err := serving.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1"}); err != nil {
		t.Errorf("serving certificate for 127.0.0.1: %v", err)
	}
	if _, err := tls.X509KeyPair(c.adminCert, c.adminKey); err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(c.adminCert)
	admin, _ := x509.ParseCertificate(block.Bytes)
	caPEM, err := os.ReadFile(c.clientCA)
	if err != nil {
		t.Fatal(err)
	}
	clientRoots := x509.NewCertPool()
	clientRoots.AppendCertsFromPEM(caPEM)
	if _, err := admin.Verify(x509.VerifyOptions{Roots: clientRoots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("admin certificate under the client CA: %v", err)
	}
	if len(admin.Subject.Organization) != 1 || admin.Subject.Organization[0] != "system:masters" {
		t.Errorf("admin groups %v, want [system:masters]", admin.Subject.Organization)
	}
}

// HAProxy's configuration checks every replica's /readyz over TLS and
// balances TCP connections round robin.
func TestHAProxyConfigChecksEveryReplica(t *testing.T) {
	h := &HAControlPlane{lbPort: 6443, lbSocket: "haproxy.sock",
		apis: []*haAPIServer{{port: 1001}, {port: 1002}, {port: 1003}}}
	cfg := h.haproxyConfig()
	for _, want := range []string{"mode tcp", "balance roundrobin", "http-check connect ssl", "uri /readyz",
		"bind 127.0.0.1:6443", "server apiserver-0 127.0.0.1:1001 check", "server apiserver-2 127.0.0.1:1003 check"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("configuration lacks %q:\n%s", want, cfg)
		}
	}
}

// HAProxy itself accepts the configuration (when it is installed).
func TestHAProxyAcceptsConfig(t *testing.T) {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy not installed (make haproxy)")
	}
	dir := t.TempDir()
	h := &HAControlPlane{lbPort: 6443, lbSocket: filepath.Join(dir, "haproxy.sock"),
		apis: []*haAPIServer{{port: 1001}, {port: 1002}, {port: 1003}}}
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(h.haproxyConfig()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-c", "-f", cfg).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
}

// Every member is restored with its own name, data directory and peer URL,
// and the cluster's member list and token, as it was started: otherwise the
// restored members would not form one cluster. The revision flags go to
// every member alike.
func TestHARestoreArgsPerMember(t *testing.T) {
	h := &HAControlPlane{workDir: "/tmp/freshinformer-controlplane-ha-x", etcdPeers: "etcd-0=http://127.0.0.1:2380,etcd-1=http://127.0.0.1:2382",
		etcd: []*etcdMember{{name: "etcd-0", peerPort: 2380, dataDir: "d0"}, {name: "etcd-1", peerPort: 2382, dataDir: "d1"}}}
	snap := Snapshot{Path: "snap.db"}
	for i, m := range h.etcd {
		for _, opts := range []RestoreOptions{{}, {BumpRevision: 1000, MarkCompacted: true}} {
			got := strings.Join(h.restoreArgs(m, snap, opts), " ")
			want := "snapshot restore snap.db --name " + m.name + " --data-dir " + m.dataDir +
				" --initial-cluster " + h.etcdPeers + " --initial-cluster-token freshinformer-controlplane-ha-x" +
				" --initial-advertise-peer-urls http://127.0.0.1:" + []string{"2380", "2382"}[i]
			if opts.BumpRevision > 0 {
				want += " --bump-revision 1000 --mark-compacted"
			}
			if got != want {
				t.Errorf("member %d, %+v:\n got %s\nwant %s", i, opts, got, want)
			}
		}
	}
	// The token is the one the members were started with.
	if a := strings.Join(h.etcdArgs(h.etcd[0]), " "); !strings.Contains(a, "--initial-cluster-token=freshinformer-controlplane-ha-x") {
		t.Errorf("etcd flags lack the restore's token: %s", a)
	}
}
