package keysvc_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/signature"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"
)

func tokenLine(name, scope, token, prefix string) string {
	sum := sha256.Sum256([]byte(token))
	return strings.TrimSpace(fmt.Sprintf("%s %s %s %s", name, scope, hex.EncodeToString(sum[:]), prefix)) + "\n"
}

func TestParseTokensRefusesMistakes(t *testing.T) {
	for _, bad := range []string{
		"ci reserve notahash\n",
		"ci owner " + strings.Repeat("a", 64) + "\n",
		"ci reserve " + strings.Repeat("a", 64) + " prefix extra\n",
		tokenLine("a", "reserve", "x", "") + tokenLine("a", "admin", "y", ""),
		"ci reserve s3cr3t-token-in-clear\n",
		// sha256sum's output pasted whole: "HASH  -".
		tokenLine("ci", "guard", "x", "-"),
		tokenLine("ci", "guard", "x", "provider=paypal"),
		tokenLine("ci", "guard", "x", "a: b:"),
		tokenLine("ci", "guard", "x", "colour=blue"),
		tokenLine("ci", "guard", "x", strings.Repeat("p", keysvc.MaxTenantPrefixBytes+1)),
	} {
		if _, err := keysvc.ParseTokens(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		} else if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("the error repeats the line's secret: %v", err)
		}
	}
	tokens, err := keysvc.ParseTokens(strings.NewReader("# comment\n\n" + tokenLine("ci", "reserve", "x", "") + tokenLine("ops", "admin", "y", "gh:teamA:") +
		tokenLine("viewer", "read", "z", "") + tokenLine("n8n", "guard", "w", "prefix=shop: provider=stripe") + tokenLine("hook", "guard", "v", "provider=github")))
	if err != nil || tokens.Len() != 5 {
		t.Fatalf("%v %d", err, tokens.Len())
	}
}

// Every route against every kind of caller, on both stores: who gets in,
// who gets 401 (no token), 403 (a scope too small, or a key outside the
// tenant) or 404 (another tenant's key, whose existence is not told).
func TestRoutesByToken(t *testing.T) {
	const (
		reserveTok = "reserve-token-0123456789"
		guardTok   = "guard-token-0123456789"
		adminTok   = "admin-token-0123456789"
		teamATok   = "team-a-token-0123456789"
		teamBTok   = "team-b-token-0123456789"
	)
	tokens, err := keysvc.ParseTokens(strings.NewReader(tokenLine("ci", "reserve", reserveTok, "") + tokenLine("n8n", "guard", guardTok, "") +
		tokenLine("ops", "admin", adminTok, "") + tokenLine("team-a", "admin", teamATok, "teamA:") + tokenLine("team-b", "admin", teamBTok, "teamB:")))
	if err != nil {
		t.Fatal(err)
	}
	forEachStore(t, func(t *testing.T, store keysvc.Store) {
		base := start(t, keysvc.Config{Store: store, Tokens: tokens, SignatureAuth: true, ProtectMetrics: true,
			Secrets: map[signature.Provider][]string{signature.ProviderStripe: {"whsec_routes"}}}).base
		call := func(token, method, path string, body []byte, header map[string]string) int {
			req, _ := http.NewRequest(method, base+path, bytes.NewReader(body))
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			for k, v := range header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		// Keys the table works on: one of team A, reserved by team A, which
		// keysvc holds in team A's key space (another tenant's token names
		// it in its own, where it is not).
		teamAKey := "gh::delivery-1"
		if s := call(teamATok, "POST", "/v1/reservations?preset=github", []byte(`{}`), map[string]string{"X-GitHub-Delivery": "delivery-1"}); s != 201 {
			t.Fatalf("team A reserving its key: %d", s)
		}
		stripeBody := []byte(`{"id":"evt_signed_only","type":"t"}`)
		signed := map[string]string{"Stripe-Signature": stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{
			Payload: stripeBody, Secret: "whsec_routes", Timestamp: time.Now()}).Header}

		type caller struct {
			name, token string
			header      map[string]string
		}
		callers := []caller{{"none", "", nil}, {"reserve", reserveTok, nil}, {"guard", guardTok, nil}, {"admin", adminTok, nil},
			{"other tenant", teamBTok, nil}, {"signature only", "", signed}}
		for _, tc := range []struct {
			method, path string
			body         []byte
			want         []int // per caller, in the order above
		}{
			{"POST", "/v1/keys", []byte(`{"id":"evt_k"}`), []int{401, 200, 403, 200, 200, 401}},
			{"POST", "/v1/keys?provider=stripe", stripeBody, []int{401, 401, 403, 401, 401, 200}}, // the signature is checked first
			{"POST", "/v1/reservations", []byte(`{"id":"evt_r"}`), []int{401, 201, 200, 200, 201, 401}},
			{"POST", "/v1/reservations?provider=stripe", stripeBody, []int{401, 401, 401, 401, 401, 201}},
			{"GET", "/v1/reservations/" + url.PathEscape("teamA:"+teamAKey), nil, []int{401, 200, 403, 200, 404, 401}},
			{"POST", "/v1/reservations/" + url.PathEscape("teamA:"+teamAKey) + "/done", nil, []int{401, 403, 200, 200, 404, 401}},
			{"POST", "/v1/verify?provider=stripe", stripeBody, []int{401, 401, 403, 401, 401, 401}},
			{"GET", "/v1/token", nil, []int{401, 200, 200, 200, 200, 401}},
			{"GET", "/v1/token?scope=guard", nil, []int{401, 403, 200, 200, 200, 401}},
			{"GET", "/v1/inbox/stripe/1", nil, []int{401, 403, 403, 501, 501, 401}},
			{"POST", "/v1/inbox/stripe/1/replay", nil, []int{401, 403, 403, 501, 501, 401}},
			{"GET", "/v1/console", nil, []int{401, 403, 403, 200, 403, 401}},
			{"GET", "/metrics", nil, []int{401, 403, 403, 200, 200, 401}},
			{"GET", "/healthz", nil, []int{200, 200, 200, 200, 200, 200}},
			{"DELETE", "/v1/reservations/" + url.PathEscape("teamA:"+teamAKey), nil, []int{401, 403, 204, 404, 404, 401}},
		} {
			for i, c := range callers {
				header := c.header
				got := call(c.token, tc.method, tc.path, tc.body, header)
				if got != tc.want[i] {
					t.Errorf("%s %s as %s: %d, want %d", tc.method, tc.path, c.name, got, tc.want[i])
				}
			}
		}
		// The verify route checks a signature for a caller that has a token:
		// with the reserve token and a signature, 200.
		if s := call(reserveTok, "POST", "/v1/verify?provider=stripe", stripeBody, signed); s != 200 {
			t.Errorf("verify with a token and a signature: %d", s)
		}
		// A release refused for its scope changed nothing.
		if s := call(teamATok, "POST", "/v1/reservations?preset=github", []byte(`{}`), map[string]string{"X-GitHub-Delivery": "delivery-2"}); s != 201 {
			t.Fatalf("team A reserving a second key: %d", s)
		}
		second := "/v1/reservations/" + url.PathEscape("gh::delivery-2")
		if s := call(reserveTok, "DELETE", "/v1/reservations/"+url.PathEscape("teamA:gh::delivery-2"), nil, nil); s != 403 {
			t.Errorf("release with a reserve token: %d, want 403", s)
		}
		if s := call(teamATok, "GET", second, nil, nil); s != 200 {
			t.Errorf("the key refused a release is gone: %d", s)
		}
	})
}

// Over its rate a client gets 429 with Retry-After; a client from another
// address is not slowed by it.
func TestRateLimitPerClient(t *testing.T) {
	c := start(t, keysvc.Config{Store: newBoltStore(t), RateLimit: keysvc.RateLimit{Rate: 5, Burst: 5}})
	limited := 0
	var retryAfter string
	for range 30 {
		resp, err := http.Post(c.base+"/v1/keys", "application/json", strings.NewReader(`{"id":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			limited++
			retryAfter = resp.Header.Get("Retry-After")
		}
	}
	if limited < 20 || retryAfter == "" {
		t.Errorf("%d of 30 fast requests were limited (Retry-After %q), want at least 20 with a Retry-After", limited, retryAfter)
	}
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	for i := range 5 {
		resp, err := other.Post(c.base+"/v1/keys", "application/json", strings.NewReader(`{"id":"y"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("another client's request %d: %d, want 200", i, resp.StatusCode)
		}
	}

}
