package keysvc_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/internal/keysvc/console"
	"github.com/idemhook/idemhook/internal/keysvc/inbox"
	"github.com/idemhook/idemhook/internal/keysvc/inbox/inboxtest"
)

// FuzzHandlers throws arbitrary methods, paths, queries, headers and bodies
// at the handler: nothing a caller sends may panic or produce a 5xx (but
// the 501 of a keysvc without an inbox), and every error is JSON with a
// code. Seeds are in testdata/fuzz/FuzzHandlers.
func FuzzHandlers(f *testing.F) {
	for _, seed := range []struct{ method, target, key, body string }{
		{"POST", "/v1/keys", "", `{"id":"evt_1"}`},
		{"POST", "/v1/reservations", "", `{"id":"evt_1"}`},
		{"POST", "/v1/reservations?lease=30s", "", `{"id":"evt_2"}`},
		{"POST", "/v1/reservations?key=abc&lease=1", "abc", ""},
		{"GET", "/v1/reservations/evt:evt_1", "", ""},
		{"DELETE", "/v1/reservations/evt%3Aevt_1", "", ""},
		{"POST", "/v1/reservations/evt:evt_2/done", "", ""},
		{"PATCH", "/v1/reservations/%FF", "\x00", "\xff"},
		{"GET", "/metrics", "", ""},
		{"GET", "/v1/console", "", ""},
		{"GET", "/v1/console/inbox", "", ""},
		{"GET", "/v1/console/inbox/entries?state=failed,forwarded&type=t&since=2026-12-01T00:00:00Z&limit=5&before=9", "", ""},
		{"GET", "/v1/console/inbox/entries?endpoint=plain&until=2026-12-01T00:00:00%2B02:00", "", ""},
		{"GET", "/v1/console/inbox/entries/1", "", ""},
		{"GET", "/v1/console/inbox/entries/1/body", "", ""},
		{"POST", "/v1/console/inbox/replay", "", `{"ids":[1,2],"dry_run":true}`},
		{"POST", "/v1/console/inbox/retry", "", `{"filter":{"state":"received","endpoint":"plain"},"expect":0}`},
		{"GET", "/v1/console/pattern", "", ""},
		{"GET", "/v1/console/pattern/events?state=failed,rejected&type=charge.refunded", "", ""},
		{"GET", "/v1/console/pattern/tasks?state=failed&kind=order_confirmation&limit=200", "", ""},
		{"POST", "/v1/console/pattern/events/retry", "", `{"filter":{"since":"2026-01-01T00:00:00Z"},"dry_run":true}`},
		{"POST", "/v1/console/pattern/tasks/retry", "", `{"ids":[1]}`},
		{"GET", "/console/", "", ""},
		{"GET", "/console/console.css", "", ""},
	} {
		f.Add(seed.method, seed.target, seed.key, []byte(seed.body))
	}
	// Without an inbox the inbox's and the console's routes answer 501,
	// which is keysvc's configuration, not the request, speaking. With
	// PostgreSQL, the same requests also reach a keysvc that has an inbox
	// and the n8n pattern's views, so that the console's routes read and
	// act on real tables: there, no 5xx at all.
	type server struct {
		handler  func(testing.TB) http.Handler
		allow501 bool
	}
	servers := []server{{func(t testing.TB) http.Handler {
		return keysvc.New(keysvc.Config{Store: newBoltStore(t), MaxBodyBytes: 4096})
	}, true}}
	if pg != nil {
		withInbox := fuzzConsoleHandler(f)
		servers = append(servers, server{func(testing.TB) http.Handler { return withInbox }, false})
	}
	f.Fuzz(func(t *testing.T, method, target, key string, body []byte) {
		if !validMethod(method) || !strings.HasPrefix(target, "/") {
			return
		}
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return
		}
		for _, s := range servers {
			h := s.handler(t)
			req := httptest.NewRequest(method, "http://keysvc.test/", strings.NewReader(string(body)))
			req.URL = u
			req.RequestURI = u.RequestURI()
			if key != "" {
				req.Header[keysvc.KeyHeader] = []string{key}
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 500 && !(rec.Code == http.StatusNotImplemented && s.allow501) {
				t.Fatalf("%s %s (key %q): %d %s", method, target, key, rec.Code, rec.Body.String())
			}
			if rec.Code >= 400 && method != http.MethodHead {
				var e struct{ Error, Code string }
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code == "" || e.Error == "" {
					t.Fatalf("%s %s: %d with a non-JSON error body %q", method, target, rec.Code, rec.Body.String())
				}
			}
		}
	})
}

// fuzzConsoleHandler is a keysvc with an inbox and the pattern's views on
// the test PostgreSQL, its tables filled as newConsoleFixture's.
func fuzzConsoleHandler(f *testing.F) http.Handler {
	ctx := context.Background()
	const schema = "ks_console_fuzz"
	inboxtest.Pattern(f, pg.Business, schema)
	in := openInbox(f, schema, `{"endpoints":[{"name":"plain","target":"http://127.0.0.1:1/","max_attempts":1}]}`, inbox.Options{RecoverAfter: time.Hour})
	e, _ := in.Endpoint("plain")
	for _, body := range []string{`{"id":"evt_fuzz_1","type":"t"}`, `{"id":"evt_fuzz_2","type":"t"}`} {
		if _, err := in.Receive(ctx, e, http.Header{}, []byte(body)); err != nil {
			f.Fatal(err)
		}
	}
	p, err := console.OpenPattern(ctx, pg.Business, schema, nil)
	if err != nil {
		f.Fatal(err)
	}
	return keysvc.New(keysvc.Config{Store: newBoltStore(f), Inbox: in, Pattern: p, MaxBodyBytes: 4096})
}

func validMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead, http.MethodOptions:
		return true
	}
	return false
}
