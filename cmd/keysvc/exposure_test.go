package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// syncBuffer collects keysvc's log while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeAddr(t *testing.T, ip string) string {
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// serveKeysvc runs keysvc (run, as main does) until the test ends and
// returns its base URL and log.
func serveKeysvc(t *testing.T, addr string, args ...string) (string, *syncBuffer) {
	t.Helper()
	t.Setenv("DATABASE_URL", "")
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"--addr", addr, "--db-file", filepath.Join(t.TempDir(), "keysvc.db")}, args...), io.Discard, logs)
	}()
	t.Cleanup(func() { cancel(); <-done })
	host := strings.Replace(addr, "0.0.0.0", "127.0.0.1", 1)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get("http://" + host + "/healthz"); err == nil {
			resp.Body.Close()
			return "http://" + host, logs
		}
		select {
		case code := <-done:
			t.Fatalf("keysvc exited %d:\n%s", code, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("keysvc did not start:\n%s", logs.String())
		}
	}
}

// On an address others can reach, keysvc refuses to start without a token,
// and says how to proceed; --insecure-no-auth starts it with a warning.
func TestProtectedMode(t *testing.T) {
	t.Setenv("KEYSVC_TOKEN", "")
	var stderr bytes.Buffer
	if _, code, ok := parseConfig([]string{"--addr", "0.0.0.0:8080"}, io.Discard, &stderr); ok || code != 2 ||
		!strings.Contains(stderr.String(), "KEYSVC_TOKEN") || !strings.Contains(stderr.String(), "--insecure-no-auth") {
		t.Errorf("0.0.0.0 without a token: ok=%v code=%d %q", ok, code, stderr.String())
	}
	if _, _, ok := parseConfig([]string{"--addr", "127.0.0.1:8080"}, io.Discard, io.Discard); !ok {
		t.Error("loopback without a token was refused")
	}
	_, logs := serveKeysvc(t, freeAddr(t, "0.0.0.0"), "--insecure-no-auth")
	// Logged as keysvc starts serving: it may follow the first answer.
	warned := func() bool {
		return strings.Contains(logs.String(), `"level":"WARN"`) && strings.Contains(logs.String(), "insecure-no-auth")
	}
	for deadline := time.Now().Add(5 * time.Second); !warned() && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
	}
	if !warned() {
		t.Errorf("--insecure-no-auth started without a warning:\n%s", logs.String())
	}
}

// Two tokens are active; one is removed from the file and SIGHUP sent: it is
// refused from then on, without a restart, and the other still works.
func TestTokenRotationOnSIGHUP(t *testing.T) {
	line := func(name, token string) string {
		sum := sha256.Sum256([]byte(token))
		return name + " reserve " + hex.EncodeToString(sum[:]) + "\n"
	}
	file := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(file, []byte(line("old", "old-token-123")+line("new", "new-token-456")), 0o600)
	base, logs := serveKeysvc(t, freeAddr(t, "127.0.0.1"), "--tokens-file", file)
	status := func(token string) int {
		req, _ := http.NewRequest("POST", base+"/v1/keys", strings.NewReader(`{"id":"evt_rot"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if status("old-token-123") != 200 || status("new-token-456") != 200 {
		t.Fatal("both tokens should work before the rotation")
	}
	os.WriteFile(file, []byte(line("new", "new-token-456")), 0o600)
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), "tokens reloaded"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no reload after SIGHUP:\n%s", logs.String())
		}
	}
	if s := status("old-token-123"); s != 401 {
		t.Errorf("the removed token: %d, want 401", s)
	}
	if s := status("new-token-456"); s != 200 {
		t.Errorf("the kept token: %d, want 200", s)
	}
	if strings.Contains(logs.String(), "new-token-456") || strings.Contains(logs.String(), "old-token-123") {
		t.Error("a token is in the log")
	}
}

// A client that sends its headers one byte at a time is cut at the header
// timeout; a thousand idle connections from one address do not keep another
// client from being served.
func TestSlowAndIdleClients(t *testing.T) {
	base, _ := serveKeysvc(t, freeAddr(t, "127.0.0.1"), "--read-header-timeout", "2s", "--max-conns-per-client", "200")
	host := strings.TrimPrefix(base, "http://")

	slow, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	start := time.Now()
	cut := make(chan time.Duration, 1)
	go func() {
		for _, b := range []byte("POST /v1/keys HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 60)) {
			if _, err := slow.Write([]byte{b}); err != nil {
				break
			}
			time.Sleep(time.Second / 2)
		}
	}()
	go func() {
		slow.SetReadDeadline(time.Now().Add(20 * time.Second))
		io.Copy(io.Discard, slow)
		cut <- time.Since(start)
	}()
	if d := <-cut; d > 6*time.Second {
		t.Errorf("a slow-loris client was cut after %s, want about the 2s header timeout", d)
	}

	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range 1000 {
		c, err := net.Dial("tcp", host)
		if err != nil {
			break
		}
		idle = append(idle, c)
	}
	other := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	resp, err := other.Post(base+"/v1/keys", "application/json", strings.NewReader(`{"id":"evt_served"}`))
	if err != nil {
		t.Fatalf("with %d idle connections open, another client was not served: %v", len(idle), err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("another client: %d", resp.StatusCode)
	}
	t.Logf("%d idle connections opened from 127.0.0.1; a client from 127.0.0.2 was served", len(idle))
}

// With --tls-cert and --tls-key keysvc serves HTTPS, with HTTP/2.
func TestTLSWithHTTP2(t *testing.T) {
	addr, pool := serveKeysvcTLS(t)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	resp, err := client.Get("https://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Proto != "HTTP/2.0" {
		t.Errorf("HTTPS: %d over %s, want 200 over HTTP/2.0", resp.StatusCode, resp.Proto)
	}
}

// serveKeysvcTLS runs keysvc with a self-signed certificate for 127.0.0.1
// until the test ends, and returns its address and the pool that trusts it.
func serveKeysvcTLS(t *testing.T) (string, *x509.CertPool) {
	t.Helper()
	dir := t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	keyDER, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)

	addr := freeAddr(t, "127.0.0.1")
	t.Setenv("DATABASE_URL", "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--addr", addr, "--db-file", filepath.Join(dir, "k.db"), "--tls-cert", certFile, "--tls-key", keyFile}, io.Discard, io.Discard)
	}()
	t.Cleanup(func() { cancel(); <-done })
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var resp *http.Response
		if resp, err = client.Get("https://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			return addr, pool
		}
	}
	t.Fatal(err)
	return "", nil
}

// --insecure-no-auth warns at start and then every hour, until keysvc stops
// (in a synctest bubble: three hours pass at once).
func TestInsecureWarningRepeatsHourly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			warnInsecure(ctx, slog.New(slog.NewJSONHandler(&logs, nil)))
			close(done)
		}()
		time.Sleep(3*time.Hour + time.Minute)
		synctest.Wait()
		if n := strings.Count(logs.String(), `"level":"WARN"`); n != 4 {
			t.Errorf("after 3 hours: %d warnings, want 4 (at start and hourly)\n%s", n, logs.String())
		}
		cancel()
		<-done
	})
}

// On an address others can reach, /metrics (who calls keysvc, how often)
// needs the admin scope unless --protect-metrics=false opens it; on
// loopback it is open unless asked closed.
func TestMetricsClosedOnAPublicAddress(t *testing.T) {
	t.Setenv("KEYSVC_TOKEN", "metrics-test-token")
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--addr", "0.0.0.0:8080"}, true},
		{[]string{"--addr", "0.0.0.0:8080", "--protect-metrics=false"}, false},
		{[]string{"--addr", "127.0.0.1:8080"}, false},
		{[]string{"--addr", "127.0.0.1:8080", "--protect-metrics"}, true},
	} {
		cfg, _, ok := parseConfig(tc.args, io.Discard, io.Discard)
		if !ok || cfg.protectMetrics != tc.want {
			t.Errorf("%v: protect metrics %v (ok %v), want %v", tc.args, cfg.protectMetrics, ok, tc.want)
		}
	}
	base, _ := serveKeysvc(t, freeAddr(t, "0.0.0.0"))
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("/metrics without a token on 0.0.0.0: %d, want 401", resp.StatusCode)
	}
}

// A renewed certificate is served after SIGHUP, without a restart (and
// after its files change, within a minute: internal/keysvc's
// TestRenewedCertificateIsServed).
func TestCertificateReloadOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	pool := x509.NewCertPool()
	writeCert := func(cn string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
		der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		keyDER, _ := x509.MarshalECPrivateKey(key)
		os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
		os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
		c, _ := x509.ParseCertificate(der)
		pool.AddCert(c)
	}
	writeCert("first")
	addr := freeAddr(t, "127.0.0.1")
	t.Setenv("DATABASE_URL", "")
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--addr", addr, "--db-file", filepath.Join(dir, "k.db"), "--tls-cert", certFile, "--tls-key", keyFile}, io.Discard, logs)
	}()
	t.Cleanup(func() { cancel(); <-done })
	served := func() string {
		// A new connection each time: a handshake reads the certificate.
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			resp, err := client.Get("https://" + addr + "/healthz")
			if err == nil {
				resp.Body.Close()
				return resp.TLS.PeerCertificates[0].Subject.CommonName
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
		}
	}
	if got := served(); got != "first" {
		t.Fatalf("served %q", got)
	}
	writeCert("renewed")
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), "TLS certificate reloaded"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no reload after SIGHUP:\n%s", logs.String())
		}
	}
	if got := served(); got != "renewed" {
		t.Errorf("after SIGHUP, served %q, want the renewed certificate", got)
	}
}

// docs/keysvc.md's curl reservation, its replay and its release, run as
// written against keysvc with a guard token: the answers its comments show.
func TestDocumentedCurlReservation(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed (.ci/run installs it)")
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "keysvc.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "A reservation with curl")
	_, rest, ok2 := strings.Cut(rest, "```sh\n")
	block, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/keysvc.md has no curl reservation block")
	}
	const token = "documented-guard-token"
	sum := sha256.Sum256([]byte(token))
	file := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(file, []byte("docs guard "+hex.EncodeToString(sum[:])+"\n"), 0o600)
	base, _ := serveKeysvc(t, freeAddr(t, "127.0.0.1"), "--tokens-file", file)
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", block)
	cmd.Env = append(os.Environ(), "KEYSVC_URL="+base, "TOKEN="+token)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the documented commands failed: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], `"key":"evt:evt_curl_1","reserved":true`) ||
		!strings.Contains(lines[1], `"reserved":false`) || !strings.Contains(lines[1], `"state":"done"`) || lines[2] != "204" {
		t.Errorf("the documented commands printed:\n%s", out)
	}
}
