package keysvc_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/internal/keysvc"
)

// A key the caller names, in the Idempotency-Key header or the key
// parameter, is a key as soon as it is present, even empty: it is judged by
// the key rule, never skipped for the body's key. Repeated, every value must
// be the same key.
func TestPresentKeyIsAKeyEvenEmpty(t *testing.T) {
	forEachStore(t, func(t *testing.T, store keysvc.Store) {
		c := start(t, keysvc.Config{Store: store})
		for i, tc := range []struct {
			name   string
			query  string
			header []string // values of Idempotency-Key; nil: absent
			status int
			code   string
			key    string // the key reserved, for a 201
		}{
			{"absent: the body's key", "", nil, 201, "", "evt:evt_present_0"},
			{"empty header", "", []string{""}, 400, "invalid_key", ""},
			{"header of spaces (trimmed to empty)", "", []string{"   "}, 400, "invalid_key", ""},
			{"empty parameter", "?key=", nil, 400, "invalid_key", ""},
			{"empty header and a parameter", "?key=k3", []string{""}, 400, "invalid_key", ""},
			{"a header and an empty parameter", "?key=", []string{"k4"}, 400, "invalid_key", ""},
			{"the header twice, the same key", "", []string{"k5", "k5"}, 201, "", "k5"},
			{"the header twice, two keys", "", []string{"k6a", "k6b"}, 400, "conflicting_key", ""},
			{"the parameter twice, two keys", "?key=k7a&key=k7b", nil, 400, "conflicting_key", ""},
			{"header and parameter agree", "?key=k8", []string{"k8"}, 201, "", "k8"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				body := fmt.Appendf(nil, `{"id":"evt_present_%d"}`, i)
				r := c.doHeaders("POST", "/v1/reservations"+tc.query, body, map[string][]string{keysvc.KeyHeader: tc.header})
				r.want(t, tc.status, tc.code)
				if tc.status == 201 && r.str("key") != tc.key {
					t.Fatalf("reserved %q, want %q", r.str("key"), tc.key)
				}
				if tc.status != 201 {
					c.do("GET", "/v1/reservations/"+url.PathEscape(fmt.Sprintf("evt:evt_present_%d", i)), nil, nil).want(t, 404, "not_found")
				}
			})
		}
	})
}

// Every route that takes a key judges it by one rule, eventkey.ValidKey (1
// to MaxKeyBytes bytes of UTF-8 with no control character: the longest key
// keysvc derives, so that every key it answers can be passed back), and
// answers an invalid one 400 invalid_key before the store is asked. A valid
// key that was never reserved is 404 wherever it is looked up.
func TestOneKeyRuleOnEveryRoute(t *testing.T) {
	forEachStore(t, func(t *testing.T, store keysvc.Store) {
		c := start(t, keysvc.Config{Store: store})
		for i, tc := range []struct {
			name  string
			key   string
			valid bool
		}{
			{"one byte", "k", true},
			{"300 bytes: longer than an id, as long as a preset's key", "p:" + strings.Repeat("k", 298), true},
			{"MaxKeyBytes", strings.Repeat("m", eventkey.MaxKeyBytes), true},
			{"a dot", ".", true},
			{"two dots", "..", true},
			{"a slash, a percent sign and a question mark", "a/%2F?b", true},
			{"empty", "", false},
			{"MaxKeyBytes+1", strings.Repeat("m", eventkey.MaxKeyBytes+1), false},
			{"a control character", "a\x01b", false},
			{"a tab", "a\tb", false},
			{"DEL", "a\x7fb", false},
			{"invalid UTF-8", "a\xffb", false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				path := "/v1/reservations/" + url.PathEscape(tc.key)
				body := fmt.Appendf(nil, `{"id":"evt_rule_%d"}`, i)
				// An HTTP client cannot send a control character other
				// than a tab in a header (net/http refuses it before
				// keysvc: see TestNetHTTPRefusesBeforeKeysvc); an empty
				// header is TestPresentKeyIsAKeyEvenEmpty's.
				headerSendable := tc.key != "" && !strings.ContainsFunc(tc.key, func(r rune) bool { return r != '\t' && (r < 0x20 || r == 0x7f) })
				if !tc.valid {
					if headerSendable {
						c.doHeaders("POST", "/v1/reservations", body, map[string][]string{keysvc.KeyHeader: {tc.key}}).want(t, 400, "invalid_key")
					}
					c.do("POST", "/v1/reservations?key="+url.QueryEscape(tc.key), body, nil).want(t, 400, "invalid_key")
					c.do("GET", path, nil, nil).want(t, 400, "invalid_key")
					c.do("DELETE", path, nil, nil).want(t, 400, "invalid_key")
					c.do("POST", path+"/done", nil, nil).want(t, 400, "invalid_key")
					c.do("GET", "/v1/reservations/"+url.PathEscape(fmt.Sprintf("evt:evt_rule_%d", i)), nil, nil).want(t, 404, "not_found")
					return
				}
				c.do("GET", path, nil, nil).want(t, 404, "not_found")
				c.do("DELETE", path, nil, nil).want(t, 404, "not_found")
				c.do("POST", path+"/done", nil, nil).want(t, 404, "not_found")
				r := c.doHeaders("POST", "/v1/reservations", body, map[string][]string{keysvc.KeyHeader: {tc.key}})
				r.want(t, 201, "")
				if r.str("key") != tc.key || r.str("source") != "explicit" {
					t.Fatalf("reserved %s", r.body)
				}
				c.do("POST", "/v1/reservations?key="+url.QueryEscape(tc.key), body, nil).want(t, 200, "")
				if r := c.do("GET", path, nil, nil); r.status != 200 || r.str("key") != tc.key {
					t.Fatalf("GET %s: %d %s", path, r.status, r.body)
				}
				c.do("DELETE", path, nil, nil).want(t, 204, "")
			})
		}
	})
}
