package controlplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// haCerts are the files every kube-apiserver of an HA plane shares, so that
// a client verifies and authenticates the same way whichever replica the
// load balancer picks, and a service-account token one replica signs is
// valid on the others (kubeadm copies the same files to each control-plane
// node for the same reason).
type haCerts struct {
	servingCA      []byte // PEM: the CA clients trust
	servingCert    string // file: serving certificate for 127.0.0.1 and localhost
	servingKey     string
	clientCA       string // file: --client-ca-file
	adminCert      []byte // PEM: client certificate, CN freshinformer-admin, O system:masters
	adminKey       []byte
	serviceAccount string // file: RSA key, --service-account-(signing-)key-file
}

// writeHACerts generates the CAs, certificates and keys into dir.
func writeHACerts(dir string) (*haCerts, error) {
	now := time.Now()
	serial := func() *big.Int {
		n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
		return n
	}
	newKey := func() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }
	type ca struct {
		cert *x509.Certificate
		key  crypto.Signer
		pem  []byte
	}
	newCA := func(name string) (*ca, error) {
		key, err := newKey()
		if err != nil {
			return nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber:          serial(),
			Subject:               pkix.Name{CommonName: name},
			NotBefore:             now.Add(-time.Hour),
			NotAfter:              now.Add(7 * 24 * time.Hour),
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
			BasicConstraintsValid: true,
			IsCA:                  true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
		if err != nil {
			return nil, err
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, err
		}
		return &ca{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
	}
	leaf := func(c *ca, tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
		key, err := newKey()
		if err != nil {
			return nil, nil, err
		}
		tmpl.SerialNumber = serial()
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(7*24*time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
		der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, key.Public(), c.key)
		if err != nil {
			return nil, nil, err
		}
		kb, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), nil
	}
	write := func(name string, b []byte) (string, error) {
		p := filepath.Join(dir, name)
		return p, os.WriteFile(p, b, 0o600)
	}

	servingCA, err := newCA("freshinformer-ha-serving-ca")
	if err != nil {
		return nil, fmt.Errorf("serving CA: %w", err)
	}
	clientCA, err := newCA("freshinformer-ha-client-ca")
	if err != nil {
		return nil, fmt.Errorf("client CA: %w", err)
	}
	sc, sk, err := leaf(servingCA, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		// 10.0.0.1: the "kubernetes" Service's IP in the service range.
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
	})
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	ac, ak, err := leaf(clientCA, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "freshinformer-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("admin client certificate: %w", err)
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("service-account key: %w", err)
	}

	h := &haCerts{servingCA: servingCA.pem, adminCert: ac, adminKey: ak}
	for _, f := range []struct {
		dst  *string
		name string
		b    []byte
	}{
		{&h.servingCert, "serving.crt", sc},
		{&h.servingKey, "serving.key", sk},
		{&h.clientCA, "client-ca.crt", clientCA.pem},
		{&h.serviceAccount, "sa.key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)})},
	} {
		if *f.dst, err = write(f.name, f.b); err != nil {
			return nil, err
		}
	}
	if _, err := write("serving-ca.crt", servingCA.pem); err != nil {
		return nil, err
	}
	return h, nil
}
