package keysvc_test

import (
	"testing"

	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/internal/keysvc/inbox"
)

// keysvc routes the path as it was sent, one segment for each {key}, {id}
// or {endpoint}, percent-decoded: a key "." or ".." (which url.PathEscape
// leaves as is) reaches its reservation, an empty segment is an empty key,
// and an unclean path is a JSON 404, never net/http's ServeMux cleaning it
// into a redirect to another route.
func TestRoutesMatchThePathAsSent(t *testing.T) {
	forEachStore(t, func(t *testing.T, store keysvc.Store) {
		c := start(t, keysvc.Config{Store: store})
		for _, key := range []string{".", ".."} {
			c.do("POST", "/v1/reservations", nil, map[string]string{keysvc.KeyHeader: key}).want(t, 201, "")
		}
		checkRoutes(t, c, []routeCase{
			{"GET", "/v1/reservations/.", 200, "", "."},
			{"GET", "/v1/reservations/..", 200, "", ".."},
			{"GET", "/v1/reservations/%2E", 200, "", "."},
			{"POST", "/v1/reservations/./done", 200, "", "."},
			{"DELETE", "/v1/reservations/..", 204, "", ""},
			{"GET", "/v1/reservations/..", 404, "not_found", ""},
			{"GET", "/v1/%72eservations/.", 200, "", "."}, // segments are compared decoded, as ServeMux does
			{"GET", "/v1/reservations/", 400, "invalid_key", ""},
			{"POST", "/v1/reservations//done", 400, "invalid_key", ""},
			{"DELETE", "/v1/reservations/", 400, "invalid_key", ""},
			{"GET", "/v1/inbox/ep/", 501, "inbox_unavailable", ""},
			{"POST", "/v1//keys", 404, "not_found", ""},
			{"GET", "/v1/reservations//k", 404, "not_found", ""},
			{"GET", "/v1/reservations/a/../b", 404, "not_found", ""},
			{"GET", "//healthz", 404, "not_found", ""},
			{"GET", "/v1/keys/", 404, "not_found", ""},
		})
	})
}

type routeCase struct {
	method, path string
	status       int
	code         string
	key          string // the key answered, when set
}

// checkRoutes sends each request without a body and checks its answer: the
// status, the code and a message for an error, JSON but for a 204.
func checkRoutes(t *testing.T, c client, cases []routeCase) {
	t.Helper()
	for _, tc := range cases {
		r := c.do(tc.method, tc.path, nil, nil)
		if r.status != tc.status || r.str("code") != tc.code || (tc.status >= 400 && r.str("error") == "") ||
			(tc.status != 204 && r.header.Get("Content-Type") != "application/json") || (tc.key != "" && r.str("key") != tc.key) {
			t.Errorf("%s %s: %d %s %q (Location %q), want %d %s %q", tc.method, tc.path, r.status, r.header.Get("Content-Type"), r.body,
				r.header.Get("Location"), tc.status, tc.code, tc.key)
		}
	}
}

// The inbox's {id} is one segment too, judged before the store is asked: an
// empty or non-numeric id is 400 invalid_id on both routes that take one, an
// id that names no entry 404; an empty endpoint is an unknown one.
func TestInboxIDsAreOneSegmentAsSent(t *testing.T) {
	in := openInbox(t, "ks_inbox_ids", `{"endpoints":[{"name":"stripe","provider":"stripe","target":"http://127.0.0.1:1/"}]}`, inbox.Options{})
	c := start(t, keysvc.Config{Store: newBoltStore(t), Inbox: in})
	checkRoutes(t, c, []routeCase{
		{"GET", "/v1/inbox/stripe/", 400, "invalid_id", ""},
		{"POST", "/v1/inbox/stripe//replay", 400, "invalid_id", ""},
		{"GET", "/v1/inbox/stripe/abc", 400, "invalid_id", ""},
		{"POST", "/v1/inbox/stripe/-1/replay", 400, "invalid_id", ""},
		{"GET", "/v1/inbox/stripe/999999", 404, "not_found", ""},
		{"POST", "/v1/inbox/stripe/999999/replay", 404, "not_found", ""},
		{"GET", "/v1/inbox//1", 404, "unknown_endpoint", ""},
		{"GET", "/v1/inbox/stripe/./", 404, "not_found", ""},
	})
}
