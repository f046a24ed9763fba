package keysvc_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemhook/idemhook/conformance"
	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/internal/keysvc"
)

type client struct {
	t     *testing.T
	base  string
	token string
}

// start serves a keysvc over real HTTP on loopback.
func start(t *testing.T, cfg keysvc.Config) client {
	t.Helper()
	srv := httptest.NewServer(keysvc.New(cfg))
	t.Cleanup(srv.Close)
	return client{t: t, base: srv.URL, token: cfg.Token}
}

type reply struct {
	status int
	header http.Header
	body   []byte
	json   map[string]any
}

func (c client) do(method, path string, body []byte, header map[string]string) reply {
	c.t.Helper()
	values := map[string][]string{}
	for k, v := range header {
		values[k] = []string{v}
	}
	return c.doHeaders(method, path, body, values)
}

// doHeaders is do with headers of several values, or of an empty one; a nil
// value sends no such header.
func (c client) doHeaders(method, path string, body []byte, header map[string][]string) reply {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range header {
		if v != nil {
			req.Header[http.CanonicalHeaderKey(k)] = v
		}
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, body: b}
	_ = json.Unmarshal(b, &r.json)
	return r
}

// noRedirects is the tests' HTTP client: it shows keysvc's own answer, a
// redirect included, where http.DefaultClient would follow it elsewhere.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (r reply) str(field string) string {
	s, _ := r.json[field].(string)
	return s
}

func (r reply) want(t *testing.T, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if code != "" && r.str("code") != code {
		t.Fatalf("error code %q, want %q: %s", r.str("code"), code, r.body)
	}
	if status >= 400 && r.str("error") == "" {
		t.Fatalf("error response without a message: %s", r.body)
	}
}

func TestKeysMatchTheVectors(t *testing.T) {
	c := start(t, keysvc.Config{Store: newBoltStore(t)})
	vectors, err := conformance.Vectors()
	if err != nil {
		t.Fatal(err)
	}
	var skipped []string
	defer func() {
		t.Logf("%d vectors through POST /v1/keys; not sendable over HTTP: %q", len(vectors)-len(skipped), skipped)
	}()
	for _, v := range vectors {
		body, _ := v.Body()
		header := map[string]string{"Content-Type": "application/octet-stream"}
		for k, val := range v.Headers {
			header[http.CanonicalHeaderKey(k)] = val // a form's content-type replaces the default
		}
		if strings.ContainsFunc(strings.Join(mapValues(v.Headers), ""), func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			skipped = append(skipped, v.Name) // no HTTP client sends a control character in a header
			continue
		}
		path := "/v1/keys"
		if v.Preset != "" {
			path += "?preset=" + url.QueryEscape(v.Preset) + "&scope=" + url.QueryEscape(v.Scope)
		}
		r := c.do("POST", path, body, header)
		if v.Error != "" {
			if r.status != 400 || r.str("code") != v.Error {
				t.Errorf("%s: %d %s, want 400 %s", v.Name, r.status, r.body, v.Error)
			}
			continue
		}
		if r.status != 200 || r.str("key") != v.Key || r.str("source") != v.Source {
			t.Errorf("%s: %d %s, want %q (%s)", v.Name, r.status, r.body, v.Key, v.Source)
		}
	}
}

func TestReservationLifecycle(t *testing.T) {
	forEachStore(t, func(t *testing.T, store keysvc.Store) {
		c := start(t, keysvc.Config{Store: store})
		body := []byte(`{"id":"evt_life","type":"t"}`)
		r := c.do("POST", "/v1/reservations", body, nil)
		r.want(t, 201, "")
		if r.json["reserved"] != true || r.str("key") != "evt:evt_life" || r.str("source") != "event_id" {
			t.Fatalf("first reservation: %s", r.body)
		}
		r = c.do("POST", "/v1/reservations", body, nil)
		r.want(t, 200, "")
		if r.json["reserved"] != false || r.str("first_seen") == "" {
			t.Fatalf("duplicate: %s", r.body)
		}
		path := "/v1/reservations/" + url.PathEscape("evt:evt_life")
		c.do("GET", path, nil, nil).want(t, 200, "")
		c.do("DELETE", path, nil, nil).want(t, 204, "")
		c.do("DELETE", path, nil, nil).want(t, 404, "not_found")
		c.do("GET", path, nil, nil).want(t, 404, "not_found")
		c.do("POST", "/v1/reservations", body, nil).want(t, 201, "")

		// Keys with '/', '%' and spaces travel percent-encoded.
		odd := "a/b %2F c?d#e"
		c.do("POST", "/v1/reservations", nil, map[string]string{keysvc.KeyHeader: odd}).want(t, 201, "")
		r = c.do("GET", "/v1/reservations/"+url.PathEscape(odd), nil, nil)
		r.want(t, 200, "")
		if r.str("key") != odd {
			t.Fatalf("key %q came back as %q", odd, r.str("key"))
		}
	})
}

func TestExplicitKeys(t *testing.T) {
	forEachStore(t, func(t *testing.T, store keysvc.Store) {
		c := start(t, keysvc.Config{Store: store})
		r := c.do("POST", "/v1/reservations", []byte(`{"id":"ignored"}`), map[string]string{keysvc.KeyHeader: "gh:delivery-1"})
		r.want(t, 201, "")
		if r.str("key") != "gh:delivery-1" || r.str("source") != "explicit" {
			t.Fatalf("%s", r.body)
		}
		c.do("POST", "/v1/reservations?key=gh:delivery-1", nil, nil).want(t, 200, "")
		c.do("POST", "/v1/reservations?key=a", nil, map[string]string{keysvc.KeyHeader: "b"}).want(t, 400, "conflicting_key")
		c.do("POST", "/v1/reservations?key=", nil, nil).want(t, 400, "invalid_key")
		c.do("POST", "/v1/reservations?key="+url.QueryEscape("a\x00b"), nil, nil).want(t, 400, "invalid_key")
		c.do("POST", "/v1/reservations?key="+strings.Repeat("k", eventkey.MaxKeyBytes+1), nil, nil).want(t, 400, "invalid_key")
		c.do("POST", "/v1/reservations", nil, nil).want(t, 400, "empty_body")
		c.do("GET", "/v1/reservations/"+url.PathEscape("bad\x01key"), nil, nil).want(t, 400, "invalid_key")
	})
}

func TestLease(t *testing.T) {
	forEachStore(t, func(t *testing.T, store keysvc.Store) {
		c := start(t, keysvc.Config{Store: store})
		body := []byte(`{"id":"evt_lease"}`)
		r := c.do("POST", "/v1/reservations?lease=60s", body, nil)
		r.want(t, 201, "")
		if r.str("state") != "processing" || r.json["attempt"] != float64(1) || r.str("lease_until") == "" {
			t.Fatalf("acquired: %s", r.body)
		}
		r = c.do("POST", "/v1/reservations?lease=60s", body, nil)
		r.want(t, 409, "in_progress")
		if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || ra > 60 {
			t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
		}
		path := "/v1/reservations/" + url.PathEscape("evt:evt_lease")
		r = c.do("POST", path+"/done", nil, nil)
		r.want(t, 200, "")
		if r.str("state") != "done" {
			t.Fatalf("done: %s", r.body)
		}
		r = c.do("POST", "/v1/reservations?lease=60s", body, nil)
		r.want(t, 200, "")
		if r.str("state") != "done" || r.json["reserved"] != false {
			t.Fatalf("after done: %s", r.body)
		}
		c.do("POST", "/v1/reservations/"+url.PathEscape("evt:absent")+"/done", nil, nil).want(t, 404, "not_found")

		// An expired lease is taken over.
		other := []byte(`{"id":"evt_expiring"}`)
		c.do("POST", "/v1/reservations?lease=1", other, nil).want(t, 201, "")
		time.Sleep(1100 * time.Millisecond)
		r = c.do("POST", "/v1/reservations?lease=1", other, nil)
		r.want(t, 201, "")
		if r.json["attempt"] != float64(2) {
			t.Fatalf("takeover: %s", r.body)
		}
		// A plain reservation of a leased key is a duplicate, never a second run.
		c.do("POST", "/v1/reservations", other, nil).want(t, 200, "")

		for _, bad := range []string{"0s", "-5s", "soon", "48h", ""} {
			c.do("POST", "/v1/reservations?lease="+url.QueryEscape(bad), body, nil).want(t, 400, "invalid_lease")
		}
	})
}

// 100 concurrent reservations of one body: exactly one 201 and 99 × 200.
func TestConcurrentReservations(t *testing.T) {
	forEachStore(t, func(t *testing.T, store keysvc.Store) {
		c := start(t, keysvc.Config{Store: store})
		body := []byte(`{"id":"evt_race","type":"charge.succeeded"}`)
		const n = 100
		statuses := make([]int, n)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				resp, err := http.Post(c.base+"/v1/reservations", "application/json", bytes.NewReader(body))
				if err != nil {
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				statuses[i] = resp.StatusCode
			}()
		}
		close(gate)
		wg.Wait()
		count := map[int]int{}
		for _, s := range statuses {
			count[s]++
		}
		if count[201] != 1 || count[200] != n-1 {
			t.Fatalf("statuses %v, want one 201 and %d × 200", count, n-1)
		}
	})
}

func TestBadRequestsAreJSON4xx(t *testing.T) {
	c := start(t, keysvc.Config{Store: newBoltStore(t), MaxBodyBytes: 64})
	c.do("POST", "/v1/keys", bytes.Repeat([]byte("x"), 65), nil).want(t, 413, "body_too_large")
	c.do("POST", "/v1/reservations", bytes.Repeat([]byte("x"), 65), nil).want(t, 413, "body_too_large")
	c.do("POST", "/v1/keys", bytes.Repeat([]byte("x"), 64), nil).want(t, 200, "")
	r := c.do("PUT", "/v1/reservations", nil, nil)
	r.want(t, 405, "method_not_allowed")
	if r.header.Get("Allow") != "POST" {
		t.Errorf("Allow %q", r.header.Get("Allow"))
	}
	c.do("GET", "/v2/anything", nil, nil).want(t, 404, "not_found")
	if r := c.do("GET", "/healthz", nil, map[string]string{"X-Request-Id": "trace-42"}); r.header.Get("X-Request-Id") != "trace-42" {
		t.Errorf("request id not echoed: %q", r.header.Get("X-Request-Id"))
	}
	if r := c.do("GET", "/healthz", nil, map[string]string{"X-Request-Id": "bad id with spaces"}); r.header.Get("X-Request-Id") == "" || strings.Contains(r.header.Get("X-Request-Id"), " ") {
		t.Errorf("invalid request id was echoed or none generated: %q", r.header.Get("X-Request-Id"))
	}
}

func TestBearerToken(t *testing.T) {
	store := newBoltStore(t)
	c := start(t, keysvc.Config{Store: store, Token: "s3cret-token"})
	c.do("POST", "/v1/keys", []byte(`{"id":"a"}`), nil).want(t, 200, "")
	anon := c
	anon.token = ""
	r := anon.do("POST", "/v1/keys", []byte(`{"id":"a"}`), nil)
	r.want(t, 401, "unauthorized")
	if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
	}
	wrong := c
	wrong.token = "s3cret-tokeN"
	wrong.do("POST", "/v1/reservations", []byte(`{"id":"a"}`), nil).want(t, 401, "unauthorized")
	if _, err := store.Lookup(t.Context(), "evt:a"); err == nil {
		t.Error("an unauthorized request reserved a key")
	}
	// Health, readiness, metrics and the document stay open for probes.
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/openapi.json"} {
		if r := anon.do("GET", p, nil, nil); r.status != 200 {
			t.Errorf("%s without token: %d", p, r.status)
		}
	}
}

// A store that cannot answer gives 503 with Retry-After, never a 2xx.
func TestStoreUnavailable(t *testing.T) {
	forEachStore(t, func(t *testing.T, store keysvc.Store) {
		c := start(t, keysvc.Config{Store: store})
		store.Close()
		for _, req := range []struct{ method, path string }{
			{"POST", "/v1/reservations"}, {"POST", "/v1/reservations?lease=30s"},
			{"GET", "/v1/reservations/k"}, {"DELETE", "/v1/reservations/k"}, {"POST", "/v1/reservations/k/done"}, {"GET", "/readyz"},
		} {
			r := c.do(req.method, req.path, []byte(`{"id":"evt_down"}`), nil)
			r.want(t, 503, "store_unavailable")
			if r.header.Get("Retry-After") == "" {
				t.Errorf("%s %s: no Retry-After", req.method, req.path)
			}
		}
		c.do("POST", "/v1/keys", []byte(`{"id":"x"}`), nil).want(t, 200, "")
		c.do("GET", "/healthz", nil, nil).want(t, 200, "")
		if m := string(c.do("GET", "/metrics", nil, nil).body); !strings.Contains(m, "keysvc_store_errors_total 6") {
			t.Errorf("metrics do not count the store errors:\n%s", m)
		}
	})
}

func TestMetrics(t *testing.T) {
	c := start(t, keysvc.Config{Store: newBoltStore(t)})
	c.do("POST", "/v1/reservations", []byte(`{"id":"m"}`), nil)
	c.do("POST", "/v1/reservations", []byte(`{"id":"m"}`), nil)
	m := string(c.do("GET", "/metrics", nil, nil).body)
	for _, want := range []string{
		`keysvc_requests_total{route="/v1/reservations",status="201"} 1`,
		`keysvc_requests_total{route="/v1/reservations",status="200"} 1`,
		`keysvc_reservations_total{outcome="new"} 1`,
		`keysvc_reservations_total{outcome="duplicate"} 1`,
		`keysvc_request_duration_seconds_count 2`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s\n%s", want, m)
		}
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// A large body is read once, hashed as it arrives when it cannot be a JSON
// object, and keyed exactly as eventkey keys it, with or without a
// Content-Length.
func TestLargeBodiesKeyedExactly(t *testing.T) {
	c := start(t, keysvc.Config{Store: newBoltStore(t), MaxBodyBytes: 4 << 20})
	random := make([]byte, 1<<20)
	for i := range random {
		random[i] = byte(i*7919 + i/3)
	}
	withID := append([]byte("\xEF\xBB\xBF  {\"id\":\"evt_big\",\"data\":\""), bytes.Repeat([]byte("x"), 1<<20)...)
	withID = append(withID, `"}`...)
	for _, body := range [][]byte{random, withID, []byte("   not json"), []byte("\xEF\xBB")} {
		want, _ := eventkey.Derive(body)
		if got := c.do("POST", "/v1/keys", body, nil).str("key"); got != want.Value {
			t.Errorf("%.20q… (%d bytes): key %q, want %q", body, len(body), got, want.Value)
		}
		// Without a Content-Length (chunked), in small pieces.
		req, _ := http.NewRequest("POST", c.base+"/v1/keys", io.MultiReader(bytes.NewReader(body[:len(body)/3]), bytes.NewReader(body[len(body)/3:])))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var got struct{ Key string }
		json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if got.Key != want.Value {
			t.Errorf("chunked %.20q…: key %q, want %q", body, got.Key, want.Value)
		}
	}
}

// Deriving a large body's key allocates far less than the body (issue 11:
// no second copy of a body without id): one that is only hashed is not
// kept, and the buffer of one read for its id is recycled. The handler is
// called directly, so every byte counted is keysvc's.
func TestLargeBodiesAreNotCopied(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop buffers at random")
	}
	const size = 4 << 20
	h := keysvc.New(keysvc.Config{Store: newBoltStore(t), MaxBodyBytes: 2 * size})
	random := make([]byte, size)
	for i := range random {
		random[i] = byte(i*7919 + i/3)
	}
	withID := append([]byte(`{"id":"evt_large","data":"`), bytes.Repeat([]byte("x"), size)...)
	withID = append(withID, `"}`...)
	for _, body := range [][]byte{random, withID} {
		want, _ := eventkey.Derive(body)
		derive := func() {
			req := httptest.NewRequest("POST", "/v1/keys", bytes.NewReader(body))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			var got struct{ Key string }
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.Key != want.Value {
				t.Fatalf("answered %d %s, want key %s", rec.Code, rec.Body, want.Value)
			}
		}
		derive() // the pooled buffers
		const n = 8
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			derive()
		}
		runtime.ReadMemStats(&after)
		// A collection may empty the pool once: that is one body in n.
		if per := (after.TotalAlloc - before.TotalAlloc) / n; per > size/4 {
			t.Errorf("deriving %s (%d bytes) allocated %d bytes per request: the body was copied", want.Source, len(body), per)
		}
	}
}

// With LogSample, one request line in N is logged, and every 5xx.
func TestLogSample(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(lockedWriter{&buf, &mu}, nil))
	store := newBoltStore(t)
	c := start(t, keysvc.Config{Store: store, Logger: logger, LogSample: 10})
	for i := range 40 {
		c.do("POST", "/v1/keys", fmt.Appendf(nil, `{"id":"e%d"}`, i), nil)
	}
	store.Close()
	for range 3 {
		c.do("POST", "/v1/reservations", []byte(`{"id":"down"}`), nil)
	}
	mu.Lock()
	defer mu.Unlock()
	lines := strings.Count(buf.String(), `"msg":"request"`)
	errors5xx := strings.Count(buf.String(), `"status":503`)
	if lines != 4+3 || errors5xx != 3 {
		t.Errorf("%d request lines (%d of them 503), want 4 sampled of 40 and all 3 503s:\n%s", lines, errors5xx, buf.String())
	}
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// Regressions of the key rule and the query string (issue 12): a key derived
// through a preset may be longer than evt: + 255 bytes, and release and done
// must take it; a query that does not decode is a 400 that says so, not a
// reservation of the body's key.
func TestLongPresetKeysAndMalformedQueries(t *testing.T) {
	forEachStore(t, func(t *testing.T, store keysvc.Store) {
		c := start(t, keysvc.Config{Store: store})
		scope := strings.Repeat("s", eventkey.MaxScopeBytes)
		id := strings.Repeat("d", eventkey.MaxIDBytes)
		r := c.do("POST", "/v1/reservations?preset=github&scope="+scope, []byte(`{}`), map[string]string{"X-GitHub-Delivery": id})
		r.want(t, 201, "")
		key := r.str("key")
		if len(key) <= len(eventkey.EventIDPrefix)+eventkey.MaxIDBytes {
			t.Fatalf("key %q is not longer than evt: + 255 bytes: the test proves nothing", key)
		}
		c.do("GET", "/v1/reservations/"+url.PathEscape(key), nil, nil).want(t, 200, "")
		c.do("DELETE", "/v1/reservations/"+url.PathEscape(key), nil, nil).want(t, 204, "")

		r = c.do("POST", "/v1/reservations?key=%ZZ", []byte(`{"id":"evt_body"}`), nil)
		r.want(t, 400, "invalid_query")
		if got := c.do("GET", "/v1/reservations/evt:evt_body", nil, nil); got.status != 404 {
			t.Errorf("a malformed query reserved the body's key: %d", got.status)
		}
	})
}

// A gzipped or deflated delivery is keyed like the same bytes sent plain,
// as n8n keys it (it decodes before its nodes run).
func TestEncodedBodiesKeyedDecoded(t *testing.T) {
	c := start(t, keysvc.Config{Store: newBoltStore(t)})
	for _, body := range [][]byte{[]byte(`{"id":"evt_gzip_1","type":"t"}`), []byte("plain text \xff")} {
		want, _ := eventkey.Derive(body)
		var gz, df bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(body)
		zw.Close()
		fw := zlib.NewWriter(&df)
		fw.Write(body)
		fw.Close()
		for enc, b := range map[string][]byte{"gzip": gz.Bytes(), "deflate": df.Bytes()} {
			if got := c.do("POST", "/v1/keys", b, map[string]string{"Content-Encoding": enc}).str("key"); got != want.Value {
				t.Errorf("%s %q: key %q, want %q", enc, body, got, want.Value)
			}
		}
	}
}

// The vectors again, each body arriving a byte at a time for its first
// bytes (a BOM or whitespace split across reads) and a large body without
// id that keysvc hashes as it streams: the key does not depend on how the
// bytes were cut.
func TestKeysMatchTheVectorsInPieces(t *testing.T) {
	srv := httptest.NewServer(keysvc.New(keysvc.Config{Store: newBoltStore(t)}))
	t.Cleanup(srv.Close)
	vectors, err := conformance.Vectors()
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("not json, hashed as it streams; "), 200<<10/32)
	bigSum := sha256.Sum256(big)
	type piecesCase struct {
		name, key, contentType string
		body                   []byte
	}
	cases := []piecesCase{{"200 KiB without id", "sha256:" + hex.EncodeToString(bigSum[:]), "text/plain", big}}
	for _, v := range vectors {
		if body, _ := v.Body(); v.Preset == "" && v.Error == "" {
			contentType := "text/plain"
			if ct, ok := v.Headers["content-type"]; ok {
				contentType = ct
			}
			cases = append(cases, piecesCase{v.Name, v.Key, contentType, body})
		}
	}
	for _, tc := range cases {
		conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST /v1/keys HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", tc.contentType, len(tc.body))
		rest := tc.body
		for i := 0; i < 4 && len(rest) > 1; i++ {
			conn.Write(rest[:1])
			rest = rest[1:]
			time.Sleep(2 * time.Millisecond)
		}
		conn.Write(rest)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got struct{ Key string }
		json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		conn.Close()
		if resp.StatusCode != 200 || got.Key != tc.key {
			t.Errorf("%s: %d %q, want %q", tc.name, resp.StatusCode, got.Key, tc.key)
		}
	}
}

// A client that sends its whole body before it reads hears the answer to a
// body it was refused: over the limit without a Content-Length (chunked: it
// is read up to the limit, answered, and the rest read and discarded), and
// refused before it is read (401, with a Content-Length over the limit).
// Once the body is read to its end, the same connection serves the next
// request. Before issue 41 the connection was closed with the body still
// arriving, and the reset threw the answer away.
func TestRefusedBodiesAreAnsweredToClientsThatSendAllFirst(t *testing.T) {
	srv := httptest.NewServer(keysvc.New(keysvc.Config{Store: newBoltStore(t), Token: "tok", MaxBodyBytes: 64 << 10}))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	chunked := func() []byte {
		var b bytes.Buffer
		for range 64 { // 4 MiB
			fmt.Fprintf(&b, "%x\r\n%s\r\n", len(chunk), chunk)
		}
		b.WriteString("0\r\n\r\n")
		return b.Bytes()
	}()
	large := bytes.Repeat([]byte("y"), 4<<20)
	for _, tc := range []struct {
		name, head string
		body       []byte
		status     int
	}{
		{"chunked, over the limit", "POST /v1/keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\nTransfer-Encoding: chunked\r\n\r\n", chunked, 413},
		{"no token, a Content-Length over the limit", fmt.Sprintf("POST /v1/reservations HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", len(large)), large, 401},
		{"no token, chunked", "POST /v1/reservations HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", chunked, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range 20 {
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				conn.SetDeadline(time.Now().Add(20 * time.Second))
				if _, err := conn.Write(append([]byte(tc.head), tc.body...)); err != nil {
					conn.Close()
					t.Fatalf("try %d: send: %v", i+1, err)
				}
				br := bufio.NewReader(conn)
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					conn.Close()
					t.Fatalf("try %d: %v", i+1, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.status {
					t.Fatalf("try %d: %d, want %d", i+1, resp.StatusCode, tc.status)
				}
				// The body was read to its end: the connection serves on.
				io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
				resp, err = http.ReadResponse(br, nil)
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("try %d: the next request on the connection: %v", i+1, err)
				}
				resp.Body.Close()
				conn.Close()
			}
		})
	}
}
