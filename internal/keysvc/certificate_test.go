package keysvc

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeSelfSigned writes a certificate for 127.0.0.1 named cn, and its key.
func writeSelfSigned(t *testing.T, certFile, keyFile, cn string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func servedName(t *testing.T, c *certificate) string {
	t.Helper()
	pair, err := c.get(nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.Subject.CommonName
}

// A renewed certificate is served once its files change, without a
// restart: at the next look (at most certRecheck after the last), or at
// once on Reload (SIGHUP). Files that do not load leave the one served.
func TestRenewedCertificateIsServed(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeSelfSigned(t, certFile, keyFile, "first")
	c, err := loadCertificate(certFile, keyFile, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if got := servedName(t, c); got != "first" {
		t.Fatalf("served %q", got)
	}
	writeSelfSigned(t, certFile, keyFile, "renewed")
	if got := servedName(t, c); got != "first" {
		t.Errorf("the files were looked at again within certRecheck: served %q", got)
	}
	c.checked = time.Now().Add(-certRecheck) // a minute later
	if got := servedName(t, c); got != "renewed" {
		t.Errorf("after certRecheck, served %q, want the renewed certificate", got)
	}
	writeSelfSigned(t, certFile, keyFile, "signalled")
	if err := c.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := servedName(t, c); got != "signalled" {
		t.Errorf("after Reload, served %q", got)
	}
	if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Reload(); err == nil {
		t.Error("a broken key file reloaded")
	}
	c.checked = time.Time{}
	if got := servedName(t, c); got != "signalled" {
		t.Errorf("with a broken key file, served %q, want the previous certificate", got)
	}
	if _, err := loadCertificate(certFile, keyFile, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("keysvc would start with a broken key file")
	}
}
