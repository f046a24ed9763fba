package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// testTLS is a certificate authority of the tests' own, which the shared
// stack's n8n trusts (NODE_EXTRA_CA_CERTS, as an operator gives n8n a
// private CA), and a certificate it signed for 127.0.0.1: keysvc serves it
// with --tls-cert/--tls-key, as it serves a public authority's.
type testTLS struct {
	CAFile, CertFile, KeyFile string
	client                    *http.Client // trusts the CA, as n8n does
}

// e2eTLS is the shared stack's (TestMain makes it).
var e2eTLS *testTLS

func newTestTLS(dir string) (*testTLS, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "idemhook e2e CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "keysvc e2e"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	t := &testTLS{CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "keysvc.pem"), KeyFile: filepath.Join(dir, "keysvc-key.pem")}
	for file, block := range map[string]*pem.Block{
		t.CAFile: {Type: "CERTIFICATE", Bytes: caDER}, t.CertFile: {Type: "CERTIFICATE", Bytes: leafDER}, t.KeyFile: {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", file, err)
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	t.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	return t, nil
}

// keysvcArgs are keysvc's flags to serve HTTPS with the certificate.
func (t *testTLS) keysvcArgs() []string {
	return []string{"--tls-cert", t.CertFile, "--tls-key", t.KeyFile}
}
