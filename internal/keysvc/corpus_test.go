package keysvc_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/signature"
)

// hostile is one request of the bad-input corpus, written on the wire as
// is, so that malformed requests reach the server as an attacker sends them.
type hostile struct {
	name string
	raw  func(host string) []byte
	// want is the accepted status range; every answer must also be quick
	// and say what to change, but for quiet: net/http's own refusals of
	// requests it cannot parse, which carry no body.
	min, max int
	quiet    bool
}

func req(method, path string, header map[string]string, body []byte) func(string) []byte {
	return func(host string) []byte {
		var b bytes.Buffer
		fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, path, host)
		if _, ok := header["Content-Length"]; !ok && header["Transfer-Encoding"] == "" {
			fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
		}
		for k, v := range header {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
		b.WriteString("\r\n")
		b.Write(body)
		return b.Bytes()
	}
}

func rawReq(s string) func(string) []byte {
	return func(host string) []byte { return []byte(strings.ReplaceAll(s, "HOST", host)) }
}

const corpusToken = "corpus-token-0123456789abcdef"

func corpusStripeHeader(ts string, sigs ...string) map[string]string {
	parts := []string{"t=" + ts}
	for _, s := range sigs {
		parts = append(parts, "v1="+s)
	}
	return map[string]string{"Stripe-Signature": strings.Join(parts, ",")}
}

// corpus is at least 60 hostile requests. Each gets a 4xx (or, where noted,
// a documented answer), never a 5xx, a panic, a hang or a reservation.
func corpus() []hostile {
	auth := map[string]string{"Authorization": "Bearer " + corpusToken}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{"Authorization": "Bearer " + corpusToken}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	deep := []byte(`{"id":"evt_deep","a":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`)
	manyHeaders := map[string]string{"Authorization": "Bearer " + corpusToken}
	for i := range 10000 {
		manyHeaders[fmt.Sprintf("X-H-%d", i)] = "v"
	}
	manySigs := make([]string, 1000)
	for i := range manySigs {
		manySigs[i] = strings.Repeat("ab", 32)
	}
	now := strconv.FormatInt(time.Now().Unix(), 10)
	big := bytes.Repeat([]byte("a"), 20<<20)
	cs := []hostile{
		// The query string and keys in paths.
		{"malformed percent-encoding in the key parameter", req("POST", "/v1/reservations?key=%ZZ", auth, []byte(`{"id":"evt_q1"}`)), 400, 400, false},
		{"malformed percent-encoding in another parameter", req("POST", "/v1/reservations?lease=%G0", auth, []byte(`{"id":"evt_q2"}`)), 400, 400, false},
		{"truncated percent-encoding", req("POST", "/v1/keys?preset=%4", auth, []byte(`{"id":"evt_q3"}`)), 400, 400, false},
		{"malformed percent-encoding in the path", req("GET", "/v1/reservations/evt%ZZ", auth, nil), 400, 404, false},
		{"key with a control character (header)", req("POST", "/v1/reservations", with(map[string]string{"Idempotency-Key": "a\x01b"}), []byte(`x`)), 400, 400, false},
		{"key with a control character (query)", req("POST", "/v1/reservations?key=a%07b", auth, []byte(`x`)), 400, 400, false},
		{"key with a newline (query)", req("POST", "/v1/reservations?key=a%0Ab", auth, []byte(`x`)), 400, 400, false},
		{"key of 10 kB (query)", req("POST", "/v1/reservations?key="+strings.Repeat("k", 10000), auth, []byte(`x`)), 400, 400, false},
		{"key of 10 kB (header)", req("POST", "/v1/reservations", with(map[string]string{"Idempotency-Key": strings.Repeat("k", 10000)}), []byte(`x`)), 400, 400, false},
		{"key of 10 kB (path)", req("GET", "/v1/reservations/"+strings.Repeat("k", 10000), auth, nil), 400, 400, false},
		{"key that is invalid UTF-8 (query)", req("POST", "/v1/reservations?key=%FF%FE", auth, []byte(`x`)), 400, 400, false},
		{"empty key parameter", req("POST", "/v1/reservations?key=", auth, []byte(`x`)), 400, 400, false},
		{"header key and query key that differ", req("POST", "/v1/reservations?key=a", with(map[string]string{"Idempotency-Key": "b"}), []byte(`x`)), 400, 400, false},
		{"lease that is not a duration", req("POST", "/v1/reservations?lease=soon", auth, []byte(`{"id":"evt_l1"}`)), 400, 400, false},
		{"lease of zero", req("POST", "/v1/reservations?lease=0s", auth, []byte(`{"id":"evt_l2"}`)), 400, 400, false},
		{"lease of a hundred years", req("POST", "/v1/reservations?lease=876000h", auth, []byte(`{"id":"evt_l3"}`)), 400, 400, false},
		{"negative lease", req("POST", "/v1/reservations?lease=-5m", auth, []byte(`{"id":"evt_l4"}`)), 400, 400, false},
		{"unknown preset", req("POST", "/v1/keys?preset=paypal", auth, []byte(`{"id":"evt_p1"}`)), 400, 400, false},
		{"scope with a slash", req("POST", "/v1/keys?preset=github&scope=a/b", auth, []byte(`{"id":"evt_p2"}`)), 400, 400, false},
		{"scope of 1 kB", req("POST", "/v1/keys?preset=github&scope="+strings.Repeat("s", 1000), auth, []byte(`{}`)), 400, 400, false},
		{"scope on a preset without scopes", req("POST", "/v1/keys?scope=x", auth, []byte(`{"id":"evt_p3"}`)), 400, 400, false},
		{"unknown provider", req("POST", "/v1/reservations?provider=paypal", auth, []byte(`{"id":"evt_p4"}`)), 400, 400, false},
		{"provider without a secret", req("POST", "/v1/reservations?provider=github", auth, []byte(`{"id":"evt_p5"}`)), 501, 501, false},
		// Bodies.
		{"empty body", req("POST", "/v1/reservations", auth, nil), 400, 400, false},
		{"body of 20 MB", req("POST", "/v1/reservations", auth, big), 413, 413, false},
		{"declared 20 MB, sent 10 bytes", req("POST", "/v1/reservations", with(map[string]string{"Content-Length": strconv.Itoa(20 << 20)}), []byte(`{"id":"x"}`)), 400, 413, false},
		// A valid body the spec hashes (too_deep): the scanner stops at 1,000
		// levels without recursing further, so nothing overflows.
		{"JSON nested 100,000 deep", req("POST", "/v1/keys", auth, deep), 200, 200, false},
		{"JSON nested 100,000 deep, unbalanced", req("POST", "/v1/keys", auth, deep[:len(deep)/2]), 200, 200, false},
		{"gzip header on a plain body", req("POST", "/v1/reservations", with(map[string]string{"Content-Encoding": "gzip"}), []byte(`{"id":"evt_gz"}`)), 400, 400, false},
		{"gzip body that is cut short", req("POST", "/v1/reservations", with(map[string]string{"Content-Encoding": "gzip"}), gzipped([]byte(`{"id":"evt_gz2"}`))[:15]), 400, 400, false},
		{"gzip bomb: 1 kB that unpacks to 100 MB", req("POST", "/v1/keys", with(map[string]string{"Content-Encoding": "gzip"}), gzipped(make([]byte, 100<<20))), 413, 413, false},
		{"deflate header on a plain body", req("POST", "/v1/keys", with(map[string]string{"Content-Encoding": "deflate"}), []byte(`{"id":"evt_df"}`)), 400, 400, false},
		{"brotli body", req("POST", "/v1/keys", with(map[string]string{"Content-Encoding": "br"}), []byte(`{"id":"evt_br"}`)), 415, 415, false},
		{"bad chunked encoding", rawReq("POST /v1/reservations HTTP/1.1\r\nHost: HOST\r\nAuthorization: Bearer " + corpusToken + "\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"), 400, 400, false},
		{"Content-Length and Transfer-Encoding both", rawReq("POST /v1/reservations HTTP/1.1\r\nHost: HOST\r\nAuthorization: Bearer " + corpusToken + "\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 400, 400, false},
		{"two Content-Lengths that differ", rawReq("POST /v1/reservations HTTP/1.1\r\nHost: HOST\r\nAuthorization: Bearer " + corpusToken + "\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"), 400, 400, false},
		{"negative Content-Length", rawReq("POST /v1/reservations HTTP/1.1\r\nHost: HOST\r\nContent-Length: -1\r\n\r\n"), 400, 400, false},
		{"Content-Length that is not a number", rawReq("POST /v1/reservations HTTP/1.1\r\nHost: HOST\r\nContent-Length: ten\r\n\r\n"), 400, 400, false},
		{"unknown Transfer-Encoding", rawReq("POST /v1/reservations HTTP/1.1\r\nHost: HOST\r\nTransfer-Encoding: compress\r\n\r\n"), 400, 501, false},
		// Headers and request lines.
		{"invalid UTF-8 in a header value", req("POST", "/v1/keys", with(map[string]string{"X-Note": "\xff\xfe\xfd"}), []byte(`{"id":"evt_h1"}`)), 200, 200, false},
		{"invalid UTF-8 in the signature header", req("POST", "/v1/reservations?provider=stripe", with(map[string]string{"Stripe-Signature": "t=\xff,v1=\xfe"}), []byte(`{"id":"evt_h2"}`)), 401, 401, false},
		{"invalid UTF-8 in the request id", req("POST", "/v1/keys", with(map[string]string{"X-Request-Id": "\xff\xfe"}), []byte(`{"id":"evt_h3"}`)), 200, 200, false},
		{"10,000 headers", req("POST", "/v1/keys", manyHeaders, []byte(`{"id":"evt_h4"}`)), 431, 431, false},
		{"a header of 100 kB", req("POST", "/v1/keys", with(map[string]string{"X-Big": strings.Repeat("b", 100000)}), []byte(`{"id":"evt_h5"}`)), 431, 431, false},
		{"header without a colon", rawReq("POST /v1/keys HTTP/1.1\r\nHost: HOST\r\nnot a header\r\nContent-Length: 2\r\n\r\n{}"), 400, 400, false},
		{"no Host header", rawReq("POST /v1/keys HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"), 400, 400, false},
		{"unknown method", req("BREW", "/v1/reservations", auth, []byte(`{"id":"evt_m1"}`)), 405, 405, false},
		{"PUT on reservations", req("PUT", "/v1/reservations", auth, []byte(`{"id":"evt_m2"}`)), 405, 405, false},
		{"method with spaces", rawReq("PO ST /v1/keys HTTP/1.1\r\nHost: HOST\r\n\r\n"), 400, 400, false},
		{"HTTP/0.9 request line", rawReq("GET /\r\n\r\n"), 400, 505, false},
		{"HTTP/2 preface on HTTP/1.1", rawReq("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 400, 505, true},
		// The mux cleans the path with a redirect; the clean path is a 404.
		{"absolute path traversal", req("GET", "/../../etc/passwd", auth, nil), 307, 404, false},
		{"planner path traversal", req("GET", "/planner/..%2f..%2fgo.mod", nil, nil), 400, 404, false},
		{"unknown route", req("GET", "/v2/reservations", auth, nil), 404, 404, false},
		// Signatures and timestamps.
		{"stripe signature with 1,000 v1 entries", req("POST", "/v1/reservations?provider=stripe", corpusStripeHeader(now, manySigs...), []byte(`{"id":"evt_s1"}`)), 401, 401, false},
		{"stripe timestamp far in the past", req("POST", "/v1/reservations?provider=stripe", corpusStripeHeader("1", strings.Repeat("ab", 32)), []byte(`{"id":"evt_s2"}`)), 401, 401, false},
		{"stripe timestamp far in the future", req("POST", "/v1/reservations?provider=stripe", corpusStripeHeader("99999999999", strings.Repeat("ab", 32)), []byte(`{"id":"evt_s3"}`)), 401, 401, false},
		{"stripe timestamp that is not a number", req("POST", "/v1/reservations?provider=stripe", corpusStripeHeader("yesterday", strings.Repeat("ab", 32)), []byte(`{"id":"evt_s4"}`)), 401, 401, false},
		{"stripe timestamp that overflows", req("POST", "/v1/reservations?provider=stripe", corpusStripeHeader(strings.Repeat("9", 40), strings.Repeat("ab", 32)), []byte(`{"id":"evt_s5"}`)), 401, 401, false},
		{"stripe signature that is not hex", req("POST", "/v1/reservations?provider=stripe", corpusStripeHeader(now, "zz"), []byte(`{"id":"evt_s6"}`)), 401, 401, false},
		{"stripe header of 10 kB", req("POST", "/v1/reservations?provider=stripe", map[string]string{"Stripe-Signature": strings.Repeat("t=1,", 2500)}, []byte(`{"id":"evt_s7"}`)), 401, 401, false},
		{"no signature at all", req("POST", "/v1/reservations?provider=stripe", nil, []byte(`{"id":"evt_s8"}`)), 401, 401, false},
		{"signature on the verify route, forged", req("POST", "/v1/verify?provider=stripe", with(corpusStripeHeader(now, strings.Repeat("ab", 32))), []byte(`{"id":"evt_s9"}`)), 401, 401, false},
		// Tokens.
		{"no token", req("POST", "/v1/reservations", nil, []byte(`{"id":"evt_t1"}`)), 401, 401, false},
		{"a prefix of the right token", req("POST", "/v1/reservations", map[string]string{"Authorization": "Bearer " + corpusToken[:len(corpusToken)-1]}, []byte(`{"id":"evt_t2"}`)), 401, 401, false},
		{"the right token and more", req("POST", "/v1/reservations", map[string]string{"Authorization": "Bearer " + corpusToken + "x"}, []byte(`{"id":"evt_t3"}`)), 401, 401, false},
		{"the right token's hash", req("POST", "/v1/reservations", map[string]string{"Authorization": "Bearer " + hashOf(corpusToken)}, []byte(`{"id":"evt_t4"}`)), 401, 401, false},
		{"basic authentication", req("POST", "/v1/reservations", map[string]string{"Authorization": "Basic " + corpusToken}, []byte(`{"id":"evt_t5"}`)), 401, 401, false},
		{"bearer with no token", req("POST", "/v1/reservations", map[string]string{"Authorization": "Bearer "}, []byte(`{"id":"evt_t6"}`)), 401, 401, false},
		{"a token with a newline", rawReq("POST /v1/reservations HTTP/1.1\r\nHost: HOST\r\nAuthorization: Bearer " + corpusToken + "\r\n x\r\nContent-Length: 2\r\n\r\n{}"), 400, 401, false},
		{"inbox without PostgreSQL", req("POST", "/v1/inbox/stripe", nil, []byte(`{"id":"evt_i1"}`)), 401, 501, false},
		{"inbox id that is not a number", req("GET", "/v1/inbox/stripe/abc", auth, nil), 400, 501, false},
	}
	return cs
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// The corpus against keysvc over real HTTP, on PostgreSQL: every answer in
// its expected 4xx range, never a 5xx (but the 501s of features not
// configured), never a hang past the server's timeouts, and no key reserved.
func TestBadInputCorpus(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	store := newPGStore(t)
	srv := httptest.NewUnstartedServer(keysvc.New(keysvc.Config{Store: store, Token: corpusToken,
		Secrets: map[signature.Provider][]string{signature.ProviderStripe: {"whsec_corpus"}}}))
	srv.Config.ReadHeaderTimeout = 5 * time.Second
	srv.Config.ReadTimeout = 10 * time.Second
	srv.Config.MaxHeaderBytes = 64 << 10
	srv.Start()
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	cs := corpus()
	if len(cs) < 60 {
		t.Fatalf("the corpus has %d requests, want at least 60", len(cs))
	}
	for _, c := range cs {
		t.Run(c.name, func(t *testing.T) {
			status, body, took := send(t, host, c.raw(host))
			if status < c.min || status > c.max {
				t.Errorf("%d (%s), want %d-%d: %.200s", status, took, c.min, c.max, body)
			}
			if status >= 500 && status != 501 && status != 505 {
				t.Errorf("a 5xx for bad input: %d %.200s", status, body)
			}
			if took > 15*time.Second {
				t.Errorf("answered after %s: past the server's timeouts", took)
			}
			if status >= 400 && !c.quiet && len(bytes.TrimSpace(body)) == 0 {
				t.Errorf("%d without a message saying what to change", status)
			}
		})
	}
	var reserved int
	pg.Business.QueryRow(context.Background(), "SELECT count(*) FROM "+store.Table()).Scan(&reserved)
	if reserved != 0 {
		t.Errorf("the corpus reserved %d keys", reserved)
	}
}

// send writes raw to host and reads the answer's status and body.
func send(t *testing.T, host string, raw []byte) (int, []byte, time.Duration) {
	start := time.Now()
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	go conn.Write(raw) // a large body may still be going out when the answer comes
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer after %s: %v", time.Since(start), err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, body, time.Since(start)
}
