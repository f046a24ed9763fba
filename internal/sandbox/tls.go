package sandbox

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// tlsOnly gives the server in data a self-signed certificate (server.crt
// and server.key, where ssl=on looks) and a pg_hba.conf that lets the
// stack's own user in over plain TCP and every other user over TLS only.
func tlsOnly(data string, owner *syscall.Credential) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"server.crt":  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"server.key":  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		"pg_hba.conf": []byte("host all " + pgUser + " 127.0.0.1/32 scram-sha-256\nhostssl all all 127.0.0.1/32 scram-sha-256\nlocal all all trust\n"),
	}
	for name, b := range files {
		path := filepath.Join(data, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return err
		}
		if owner != nil {
			if err := os.Chown(path, int(owner.Uid), int(owner.Gid)); err != nil {
				return err
			}
		}
	}
	return nil
}
