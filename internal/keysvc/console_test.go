package keysvc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/internal/keysvc/console"
	"github.com/idemhook/idemhook/internal/keysvc/inbox"
	"github.com/idemhook/idemhook/internal/keysvc/inbox/inboxtest"
)

const (
	consoleRead   = "console-read-token-0123456789"
	consoleAdmin  = "console-admin-token-0123456789"
	consoleResv   = "console-reserve-token-0123456789"
	consoleTenant = "console-tenant-token-0123456789"
)

func consoleTokens(t *testing.T) *keysvc.Tokens {
	t.Helper()
	tokens, err := keysvc.ParseTokens(strings.NewReader(tokenLine("viewer", "read", consoleRead, "") + tokenLine("ops", "admin", consoleAdmin, "") +
		tokenLine("ci", "reserve", consoleResv, "") + tokenLine("team-a", "admin", consoleTenant, "gh:teamA:")))
	if err != nil {
		t.Fatal(err)
	}
	return tokens
}

// consoleFixture is a keysvc whose inbox and n8n pattern share schema, with
// one failed entry (its target answered 500), one forwarded, and the
// pattern's tables holding a rejected event and a failed task.
type consoleFixture struct {
	c                 client
	in                *inbox.Inbox
	failed, forwarded int64
	schema            string
}

func newConsoleFixture(t *testing.T, schema string, cfg keysvc.Config) consoleFixture {
	t.Helper()
	if pg == nil {
		t.Skip("PostgreSQL tests skipped with -short")
	}
	ctx := context.Background()
	tables := inboxtest.Pattern(t, pg.Business, schema)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Idempotency-Key"), "fail") {
			http.Error(w, "down", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(target.Close)
	in := openInbox(t, schema, fmt.Sprintf(`{"endpoints":[{"name":"plain","target":%q,"max_attempts":1}]}`, target.URL), inbox.Options{RecoverAfter: time.Hour})
	p, err := console.OpenPattern(ctx, pg.Business, schema, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store, cfg.Inbox, cfg.Pattern = newBoltStore(t), in, p
	if cfg.Tokens == nil {
		cfg.Tokens = consoleTokens(t)
	}
	f := consoleFixture{c: start(t, cfg), in: in, schema: schema}
	e, _ := in.Endpoint("plain")
	for _, id := range []string{"evt_console_fail", "evt_console_ok"} {
		r, err := in.Receive(ctx, e, http.Header{"Content-Type": {"application/json"}}, []byte(`{"id":"`+id+`","type":"payment_intent.succeeded"}`))
		if err != nil {
			t.Fatal(err)
		}
		if id == "evt_console_fail" {
			f.failed = r.InboxID
		} else {
			f.forwarded = r.InboxID
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		a, _ := in.Entry(ctx, "", f.failed)
		b, _ := in.Entry(ctx, "", f.forwarded)
		if a.State == "failed" && b.State == "forwarded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fixture's entries are %s and %s", a.State, b.State)
		}
	}
	if _, err := pg.Business.Exec(ctx, `INSERT INTO `+tables.Inbox().String()+` (account, event_id, event_type, body, state, last_error)
VALUES ('default', 'evt:n8n_rejected', 'charge.refunded', '\x7b7d', 'rejected', 'a partial refund')`); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.Business.Exec(ctx, `INSERT INTO `+tables.Outbox().String()+` (operation_key, kind, payload, state, last_error)
VALUES ('order_confirmation:o-1', 'order_confirmation', '{}', 'failed', 'the API answered 400')`); err != nil {
		t.Fatal(err)
	}
	return f
}

func (c client) as(token string) client {
	c.token = token
	return c
}

// Who may use each console route: read views, admin also reads bodies and
// acts, a reserve token and a tenant's token see nothing; the page itself
// is open (it holds no data).
func TestConsoleRoutesByScope(t *testing.T) {
	f := newConsoleFixture(t, "ks_console_scope", keysvc.Config{})
	dry := []byte(`{"filter":{},"dry_run":true}`)
	entry := fmt.Sprintf("/v1/console/inbox/entries/%d", f.failed)
	callers := []struct{ name, token string }{{"none", ""}, {"read", consoleRead}, {"admin", consoleAdmin}, {"reserve", consoleResv}, {"tenant", consoleTenant}}
	for _, tc := range []struct {
		method, path string
		body         []byte
		want         []int
	}{
		{"GET", "/v1/console", nil, []int{401, 200, 200, 403, 403}},
		{"GET", "/v1/console/inbox", nil, []int{401, 200, 200, 403, 403}},
		{"GET", "/v1/console/inbox/entries?state=failed", nil, []int{401, 200, 200, 403, 403}},
		{"GET", entry, nil, []int{401, 200, 200, 403, 403}},
		{"GET", entry + "/body", nil, []int{401, 403, 200, 403, 403}},
		{"POST", "/v1/console/inbox/replay", dry, []int{401, 403, 200, 403, 403}},
		{"POST", "/v1/console/inbox/retry", dry, []int{401, 403, 200, 403, 403}},
		{"GET", "/v1/console/pattern", nil, []int{401, 200, 200, 403, 403}},
		{"GET", "/v1/console/pattern/events", nil, []int{401, 200, 200, 403, 403}},
		{"GET", "/v1/console/pattern/tasks", nil, []int{401, 200, 200, 403, 403}},
		{"POST", "/v1/console/pattern/events/retry", dry, []int{401, 403, 200, 403, 403}},
		{"POST", "/v1/console/pattern/tasks/retry", dry, []int{401, 403, 200, 403, 403}},
		{"GET", "/console/", nil, []int{200, 200, 200, 200, 200}},
		{"GET", "/console/console.js", nil, []int{200, 200, 200, 200, 200}},
	} {
		for i, caller := range callers {
			if got := f.c.as(caller.token).do(tc.method, tc.path, tc.body, nil).status; got != tc.want[i] {
				t.Errorf("%s %s as %s: %d, want %d", tc.method, tc.path, caller.name, got, tc.want[i])
			}
		}
	}
	read := f.c.as(consoleRead).do("GET", "/v1/console", nil, nil)
	admin := f.c.as(consoleAdmin).do("GET", "/v1/console", nil, nil)
	if read.json["bodies"] != false || admin.json["bodies"] != true || !strings.Contains(string(read.body), `"scope":"read"`) || !strings.Contains(string(read.body), `"schema":"ks_console_scope"`) {
		t.Errorf("sessions: read %s, admin %s", read.body, admin.body)
	}
}

// Bodies go to admin tokens only, as JSON (a string, or base64 when not
// UTF-8), never as a document a browser could render; --console-bodies=false
// hides them from admin too.
func TestConsoleBodies(t *testing.T) {
	f := newConsoleFixture(t, "ks_console_bodies", keysvc.Config{})
	r := f.c.as(consoleAdmin).do("GET", fmt.Sprintf("/v1/console/inbox/entries/%d/body", f.failed), nil, nil)
	r.want(t, 200, "")
	if r.header.Get("Content-Type") != "application/json" || r.str("encoding") != "utf-8" || r.str("body") != `{"id":"evt_console_fail","type":"payment_intent.succeeded"}` || r.str("content_type") != "application/json" {
		t.Errorf("body: %s %s", r.header.Get("Content-Type"), r.body)
	}
	e, _ := f.in.Endpoint("plain")
	bin, err := f.in.Receive(context.Background(), e, http.Header{}, []byte{0xff, 0xfe, 0})
	if err != nil {
		t.Fatal(err)
	}
	r = f.c.as(consoleAdmin).do("GET", fmt.Sprintf("/v1/console/inbox/entries/%d/body", bin.InboxID), nil, nil)
	if r.str("encoding") != "base64" || r.str("body") != "//4A" {
		t.Errorf("a binary body: %s", r.body)
	}
	detail := f.c.as(consoleRead).do("GET", fmt.Sprintf("/v1/console/inbox/entries/%d", f.failed), nil, nil)
	if strings.Contains(string(detail.body), "evt_console_fail\\\",") || detail.json["body"] != nil || detail.json["headers"] == nil {
		t.Errorf("the entry as read sees it: %s", detail.body)
	}
	hidden := newConsoleFixture(t, "ks_console_hidden", keysvc.Config{HideBodies: true})
	hidden.c.as(consoleAdmin).do("GET", fmt.Sprintf("/v1/console/inbox/entries/%d/body", hidden.failed), nil, nil).want(t, 403, "bodies_hidden")
	if s := hidden.c.as(consoleAdmin).do("GET", "/v1/console", nil, nil); s.json["bodies"] != false {
		t.Errorf("with bodies hidden the session says %s", s.body)
	}
}

// consoleBadInput is bad input to the console's routes and the 4xx it gets
// (withInbox: on a keysvc that has an inbox; without one, input that
// parses gets 501 instead).
var consoleBadInput = []struct {
	method, path, body string
	status             int
	code               string
	needsInbox         bool
}{
	{"GET", "/v1/console/inbox/entries?limit=0", "", 400, "invalid_page_size", false},
	{"GET", "/v1/console/inbox/entries?limit=100000", "", 400, "invalid_page_size", false},
	{"GET", "/v1/console/inbox/entries?limit=ten", "", 400, "invalid_page_size", false},
	{"GET", "/v1/console/inbox/entries?before=-1", "", 400, "invalid_cursor", false},
	{"GET", "/v1/console/inbox/entries?before=99999999999999999999", "", 400, "invalid_cursor", false},
	{"GET", "/v1/console/inbox/entries?state=lost", "", 400, "invalid_filter", false},
	{"GET", "/v1/console/inbox/entries?state=failed&state=forwarded", "", 400, "invalid_filter", false},
	{"GET", "/v1/console/inbox/entries?since=yesterday", "", 400, "invalid_filter", false},
	{"GET", "/v1/console/inbox/entries?since=2026-12-02T00:00:00Z&until=2026-12-01T00:00:00Z", "", 400, "invalid_filter", false},
	{"GET", "/v1/console/inbox/entries?endpoint=%2F..%2F", "", 400, "invalid_filter", false},
	{"GET", "/v1/console/inbox/entries?type=%00", "", 400, "invalid_filter", false},
	{"GET", "/v1/console/inbox/entries?order=id", "", 400, "unknown_parameter", false},
	{"GET", "/v1/console/inbox/entries?state=%ZZ", "", 400, "invalid_query", false},
	{"GET", "/v1/console/inbox/entries/0", "", 400, "invalid_id", false},
	{"GET", "/v1/console/inbox/entries/-7", "", 400, "invalid_id", false},
	{"GET", "/v1/console/inbox/entries/abc", "", 400, "invalid_id", false},
	{"GET", "/v1/console/inbox/entries/99999999999999999999", "", 400, "invalid_id", false},
	{"GET", "/v1/console/inbox/entries/", "", 400, "invalid_id", false},
	{"GET", "/v1/console/inbox/entries/99999999/body", "", 404, "not_found", true},
	{"GET", "/v1/console/inbox/entries/99999999", "", 404, "not_found", true},
	{"POST", "/v1/console/inbox/replay", "", 400, "invalid_body", false},
	{"POST", "/v1/console/inbox/replay", "[]", 400, "invalid_body", false},
	{"POST", "/v1/console/inbox/replay", `{"ids":[1],"filter":{}}`, 400, "invalid_body", false},
	{"POST", "/v1/console/inbox/replay", `{"ids":[0]}`, 400, "invalid_id", false},
	{"POST", "/v1/console/inbox/replay", `{"ids":[1],"expect":1001}`, 400, "invalid_body", false},
	{"POST", "/v1/console/inbox/retry", `{"filter":{"state":"lost"}}`, 400, "invalid_filter", false},
	{"POST", "/v1/console/inbox/retry", `{"filter":{"limit":"2"}}`, 400, "unknown_parameter", false},
	{"POST", "/v1/console/inbox/replay", `{"ids":[` + strings.Repeat("1,", 1000) + `1]}`, 400, "selection_too_large", false},
	{"POST", "/v1/console/inbox/replay", `{"filter":{},"expect":999}`, 409, "selection_changed", true},
	{"POST", "/v1/console/inbox/replay", `{"ids":[` + strings.Repeat("1,", 8_500_000) + `1]}`, 413, "body_too_large", false}, // over the default --max-body, 16 MiB
	{"GET", "/v1/console/pattern/tasks?state=forwarded", "", 400, "invalid_filter", false},
	{"GET", "/v1/console/pattern/events?kind=x", "", 400, "unknown_parameter", false},
	{"POST", "/v1/console/pattern/tasks/retry", `{"ids":["a"]}`, 400, "invalid_body", false},
	{"POST", "/v1/console/pattern/events/retry", `{"filter":{"endpoint":"plain"}}`, 400, "unknown_parameter", false},
	{"GET", "/console/nope.js", "", 404, "not_found", false},
	{"GET", "/console/..", "", 404, "not_found", false},
	{"HEAD", "/console/", "", 405, "method_not_allowed", false},
	{"DELETE", "/v1/console/inbox/entries/1", "", 405, "method_not_allowed", false},
}

// Bad input to the console's routes gets a 4xx with a JSON {error, code}
// that says what to change, never a 5xx, on a keysvc with an inbox and on
// one without.
func TestConsoleRefusesBadInput(t *testing.T) {
	check := func(t *testing.T, c client, withInbox bool) {
		for _, tc := range consoleBadInput {
			want, code := tc.status, tc.code
			if tc.needsInbox && !withInbox {
				want, code = 501, "inbox_unavailable"
			}
			r := c.do(tc.method, tc.path, []byte(tc.body), nil)
			if r.status != want || (tc.method != "HEAD" && r.str("code") != code) || (tc.method != "HEAD" && r.str("error") == "") {
				t.Errorf("%s %s %.40q: %d %s, want %d %s", tc.method, tc.path, tc.body, r.status, r.body, want, code)
			}
		}
	}
	t.Run("no inbox", func(t *testing.T) {
		check(t, start(t, keysvc.Config{Store: newBoltStore(t), Token: consoleAdmin}), false)
	})
	t.Run("inbox", func(t *testing.T) {
		f := newConsoleFixture(t, "ks_console_input", keysvc.Config{})
		check(t, f.c.as(consoleAdmin), true)
		// A filter that selects more than 1,000 entries changes nothing.
		if _, err := pg.Business.Exec(context.Background(), `INSERT INTO ks_console_input.inbox_events (account, event_id, body, state, endpoint)
SELECT 'default', 'bulk:' || i, '\x7b7d', 'failed', 'plain' FROM generate_series(1, 1001) i`); err != nil {
			t.Fatal(err)
		}
		f.c.as(consoleAdmin).do("POST", "/v1/console/inbox/replay", []byte(`{"filter":{}}`), nil).want(t, 400, "selection_too_large")
		r := f.c.as(consoleAdmin).do("GET", "/v1/console/inbox", nil, nil)
		if !strings.Contains(string(r.body), `"state":"failed","count":1002`) {
			t.Errorf("after a refused selection: %s", r.body)
		}
	})
}

// The page is served with a policy that allows its own files and calls to
// keysvc only, and it names no other origin; /console sends a browser to
// it.
func TestConsolePage(t *testing.T) {
	c := start(t, keysvc.Config{Store: newBoltStore(t)})
	r := c.do("GET", "/console/", nil, nil)
	r.want(t, 200, "")
	csp := r.header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "form-action 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("the policy %q lacks %s", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") || r.header.Get("X-Content-Type-Options") != "nosniff" || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
		t.Errorf("headers %v", r.header)
	}
	if redirect := c.do("GET", "/console", nil, nil); redirect.status != 302 || redirect.header.Get("Location") != "/console/" {
		t.Errorf("GET /console: %d %s", redirect.status, redirect.header.Get("Location"))
	}
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|@import|<script>|style=`)
	for _, name := range []string{"", "console.js", "console.css"} {
		b, _, _ := console.File(name)
		if m := external.Find(b); m != nil {
			t.Errorf("console file %q holds %q: no other origin, no inline script or style", name, m)
		}
	}
	var doc map[string]any
	if err := json.Unmarshal(c.do("GET", "/openapi.json", nil, nil).body, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(doc["paths"].(map[string]any)["/v1/inbox/{endpoint}"]), "at least once") {
		t.Error("openapi.json does not state that forwarding is at least once")
	}
}
