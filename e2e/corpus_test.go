package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/generator"
)

// Hostile deliveries to the generated workflow through real n8n: the
// workflow never answers a 5xx, and a delivery that is refused reserves
// nothing. n8n itself answers three of them before any node of the
// workflow runs, in ways the workflow cannot change (the README's Limits
// list them, and keysvc's inbox in front of n8n refuses them with a 4xx):
// a body over N8N_PAYLOAD_SIZE_MAX and a gzip header on a plain body get
// n8n's 500 "There was a problem executing the workflow", and JSON nested
// 100,000 deep gets no answer at all (n8n's execution fails with a
// RangeError). Those are asserted as exactly that, so a change in n8n or
// a 5xx of the workflow's own still fails the test.
func TestBadInputThroughN8N(t *testing.T) {
	const noAnswer = "no answer"
	// n8n's own answers, documented: its 5xx message, or noAnswer.
	n8nAnswers := map[string]string{
		"JSON nested 100,000 deep":    noAnswer,
		"body of 20 MB":               "There was a problem executing the workflow",
		"gzip header on a plain body": "There was a problem executing the workflow",
	}
	needStack(t)
	opts := seedOptions("bi1", generator.HashingCodeNode)
	d := deploy(t, opts)
	host := strings.TrimPrefix(st.WebhookURL, "http://")
	path := "/webhook/" + opts.WebhookPath
	raw := func(method string, header map[string]string, body []byte) []byte {
		var b bytes.Buffer
		fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, path, host)
		if header["Transfer-Encoding"] == "" && header["Content-Length"] == "" {
			fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
		}
		for k, v := range header {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
		b.WriteString("\r\n")
		b.Write(body)
		return b.Bytes()
	}
	manyHeaders := map[string]string{"Content-Type": "application/json"}
	for i := range 10000 {
		manyHeaders[fmt.Sprintf("X-H-%d", i)] = "v"
	}
	json := map[string]string{"Content-Type": "application/json"}
	cases := []struct {
		name string
		req  []byte
		key  string // the key this body would reserve, if accepted
	}{
		{"JSON that does not parse", raw("POST", json, []byte(`{"id":"evt_c_bad",`)), "evt:evt_c_bad"},
		{"JSON nested 100,000 deep", raw("POST", json, []byte(`{"id":"evt_c_deep","a":`+strings.Repeat("[", 100000)+strings.Repeat("]", 100000)+`}`)), "evt:evt_c_deep"},
		{"body of 20 MB", raw("POST", json, append([]byte(`{"id":"evt_c_big","x":"`), append(bytes.Repeat([]byte("a"), 20<<20), `"}`...)...)), "evt:evt_c_big"},
		{"gzip header on a plain body", raw("POST", map[string]string{"Content-Type": "application/json", "Content-Encoding": "gzip"}, []byte(`{"id":"evt_c_gz"}`)), "evt:evt_c_gz"},
		{"unknown Content-Encoding", raw("POST", map[string]string{"Content-Type": "application/json", "Content-Encoding": "br"}, []byte(`{"id":"evt_c_br"}`)), "evt:evt_c_br"},
		{"Content-Length and Transfer-Encoding both", []byte("POST " + path + " HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: application/json\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), ""},
		{"two Content-Lengths that differ", []byte("POST " + path + " HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}x"), ""},
		{"bad chunked encoding", []byte("POST " + path + " HTTP/1.1\r\nHost: " + host + "\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"), ""},
		{"invalid UTF-8 in a header", raw("POST", map[string]string{"Content-Type": "application/json", "X-Note": "\xff\xfe"}, []byte(`{"id":"evt_c_hdr"}`)), ""},
		{"10,000 headers", raw("POST", manyHeaders, []byte(`{"id":"evt_c_many"}`)), "evt:evt_c_many"},
		{"a header of 100 kB", raw("POST", map[string]string{"Content-Type": "application/json", "X-Big": strings.Repeat("b", 100000)}, []byte(`{"id":"evt_c_bighdr"}`)), "evt:evt_c_bighdr"},
		{"unknown method", raw("BREW", json, []byte(`{"id":"evt_c_brew"}`)), "evt:evt_c_brew"},
		{"PUT instead of POST", raw("PUT", json, []byte(`{"id":"evt_c_put"}`)), "evt:evt_c_put"},
		{"no Host header", []byte("POST " + path + " HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"), ""},
		{"empty body", raw("POST", json, nil), ""},
		{"multipart body", raw("POST", map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, []byte("--x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nb\r\n--x--\r\n")), ""},
		{"form body with an id field", raw("POST", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, []byte("id=evt_c_form")), ""},
		{"id with a control character", raw("POST", json, []byte(`{"id":"evt\u0007c"}`)), ""},
		{"id of 10 kB", raw("POST", json, []byte(`{"id":"`+strings.Repeat("i", 10000)+`"}`)), ""},
		{"id with SQL in it", raw("POST", json, []byte(`{"id":"x'); DROP TABLE `+opts.EventsTable+`; --"}`)), ""},
		{"id with an n8n expression in it", raw("POST", json, []byte(`{"id":"{{ $env.HOME }}"}`)), ""},
	}
	refused := map[string]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			conn, err := net.Dial("tcp", host)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// Providers give up on an attempt after tens of seconds.
			conn.SetDeadline(time.Now().Add(20 * time.Second))
			go conn.Write(c.req)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				// n8n may close a connection it cannot parse: not a 5xx,
				// nothing reserved, but no answer either.
				t.Logf("no answer after %s: %v", time.Since(start).Round(time.Millisecond), err)
				if n8nAnswers[c.name] != noAnswer {
					t.Errorf("no answer for bad input")
				}
				if c.key != "" {
					refused[c.key] = true
				}
				return
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
			resp.Body.Close()
			t.Logf("%d in %s: %s", resp.StatusCode, time.Since(start).Round(time.Millisecond), bytes.TrimSpace(body))
			if resp.StatusCode >= 500 && (n8nAnswers[c.name] == "" || !strings.Contains(string(body), n8nAnswers[c.name])) {
				t.Errorf("a 5xx for bad input: %d %s", resp.StatusCode, body)
			}
			if resp.StatusCode >= 300 && c.key != "" {
				refused[c.key] = true
			}
		})
	}
	var sql int
	st.Business.QueryRow(t.Context(), "SELECT count(*) FROM information_schema.tables WHERE table_name = $1", opts.EventsTable).Scan(&sql)
	if sql != 1 {
		t.Fatal("the events table is gone")
	}
	for key := range refused {
		if hasKey(t, opts.EventsTable, key) {
			t.Errorf("a refused delivery reserved %q", key)
		}
	}
	// After all that, the workflow still works.
	if r := post(t, d.url, "application/json", []byte(`{"id":"evt_c_after"}`), nil); r.status != 200 {
		t.Errorf("after the corpus: %d %s", r.status, r.body)
	}
}
