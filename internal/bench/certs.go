package bench

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

// The certificate kinds keysvc serves HTTPS with in the bench, to measure
// which one a call through n8n costs least with: each a chain of its own
// kind (an authority and its leaf), as an operator's own authority, or a
// public one, would issue.
const (
	certECDSA = "ECDSA P-256"
	certRSA   = "RSA-2048"
)

// certKinds are the kinds, in the order the series are shown.
var certKinds = []string{certECDSA, certRSA}

// benchCerts are the chains' files: a leaf and its key for each kind, and
// one file of both authorities for n8n's NODE_EXTRA_CA_CERTS.
type benchCerts struct {
	authorities string
	leaves      map[string][2]string // kind → certificate file, key file
}

// makeBenchCerts writes a chain of each kind into dir, for 127.0.0.1.
func makeBenchCerts(dir string) (benchCerts, error) {
	certs := benchCerts{authorities: filepath.Join(dir, "authorities.pem"), leaves: map[string][2]string{}}
	var authorities []byte
	for i, kind := range certKinds {
		caKey, leafKey, err := keyPair(kind)
		if err != nil {
			return benchCerts{}, err
		}
		ca := &x509.Certificate{SerialNumber: big.NewInt(int64(2*i + 1)), Subject: pkix.Name{CommonName: "idemhook bench " + kind + " authority"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
		caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, caKey.Public(), caKey)
		if err != nil {
			return benchCerts{}, err
		}
		caCert, err := x509.ParseCertificate(caDER)
		if err != nil {
			return benchCerts{}, err
		}
		leaf := &x509.Certificate{SerialNumber: big.NewInt(int64(2*i + 2)), Subject: pkix.Name{CommonName: "keysvc bench"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, leafKey.Public(), caKey)
		if err != nil {
			return benchCerts{}, err
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(leafKey)
		if err != nil {
			return benchCerts{}, err
		}
		name := fmt.Sprintf("keysvc-%d", i)
		pair := [2]string{filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")}
		if err := os.WriteFile(pair[0], pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}), 0o600); err != nil {
			return benchCerts{}, err
		}
		if err := os.WriteFile(pair[1], pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
			return benchCerts{}, err
		}
		certs.leaves[kind] = pair
		authorities = append(authorities, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})...)
	}
	return certs, os.WriteFile(certs.authorities, authorities, 0o600)
}

// keyPair makes an authority's key and a leaf's, of kind.
func keyPair(kind string) (ca, leaf crypto.Signer, err error) {
	gen := func() (crypto.Signer, error) {
		if kind == certRSA {
			return rsa.GenerateKey(rand.Reader, 2048)
		}
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if ca, err = gen(); err != nil {
		return nil, nil, err
	}
	leaf, err = gen()
	return ca, leaf, err
}
