package keysvc_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/keysvc"
)

// FuzzHandlers throws arbitrary methods, paths, queries, headers and bodies
// at the handler: nothing a caller sends may panic or produce a 500, and
// every error is JSON with a code. Seeds are in testdata/fuzz/FuzzHandlers.
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
	} {
		f.Add(seed.method, seed.target, seed.key, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, method, target, key string, body []byte) {
		if !validMethod(method) || !strings.HasPrefix(target, "/") {
			return
		}
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return
		}
		store := newBoltStore(t)
		h := keysvc.New(keysvc.Config{Store: store, MaxBodyBytes: 4096})
		req := httptest.NewRequest(method, "http://keysvc.test/", strings.NewReader(string(body)))
		req.URL = u
		req.RequestURI = u.RequestURI()
		if key != "" {
			req.Header[keysvc.KeyHeader] = []string{key}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s (key %q): %d %s", method, target, key, rec.Code, rec.Body.String())
		}
		if rec.Code >= 400 {
			var e struct{ Error, Code string }
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code == "" || e.Error == "" {
				t.Fatalf("%s %s: %d with a non-JSON error body %q", method, target, rec.Code, rec.Body.String())
			}
		}
	})
}

func validMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead, http.MethodOptions:
		return true
	}
	return false
}
