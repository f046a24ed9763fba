package keysvc_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/keysvc"
	"github.com/idemhook/idemhook/signature"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"
)

func stripeHeader(secret string, at time.Time, body []byte) string {
	return stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at}).Header
}

// Verify before reserve: a forged delivery carrying a real event id gets 401
// and reserves nothing, so the genuine delivery afterwards is processed.
func TestProviderVerificationBeforeReservation(t *testing.T) {
	forEachStore(t, func(t *testing.T, store keysvc.Store) {
		now := time.Unix(1_750_000_000, 0)
		c := start(t, keysvc.Config{Store: store, Now: func() time.Time { return now },
			Secrets: map[signature.Provider][]string{signature.ProviderStripe: {"whsec_live", "whsec_rolled_out"}}})
		body := []byte(`{"id":"evt_real_1","type":"charge.succeeded"}`)

		forged := c.do("POST", "/v1/reservations?provider=stripe", body, map[string]string{"Stripe-Signature": stripeHeader("whsec_attacker", now, body)})
		forged.want(t, 401, "invalid_signature")
		if _, err := store.Lookup(t.Context(), "evt:evt_real_1"); err == nil {
			t.Fatal("a forged delivery reserved the key")
		}
		c.do("POST", "/v1/reservations?provider=stripe", body, nil).want(t, 401, "missing_signature")
		c.do("POST", "/v1/reservations?provider=stripe", body, map[string]string{"Stripe-Signature": "t=x"}).want(t, 401, "malformed_signature")
		c.do("POST", "/v1/reservations?provider=stripe", body, map[string]string{"Stripe-Signature": stripeHeader("whsec_live", now.Add(-10*time.Minute), body)}).want(t, 401, "signature_too_old")
		c.do("POST", "/v1/reservations?provider=stripe", body, map[string]string{"Stripe-Signature": stripeHeader("whsec_live", now.Add(10*time.Minute), body)}).want(t, 401, "signature_too_new")
		// A forged request with an explicit key reserves nothing either.
		c.do("POST", "/v1/reservations?provider=stripe&key=evt:evt_real_1", body, nil).want(t, 401, "missing_signature")

		genuine := c.do("POST", "/v1/reservations?provider=stripe", body, map[string]string{"Stripe-Signature": stripeHeader("whsec_live", now, body)})
		genuine.want(t, 201, "")
		if genuine.str("key") != "evt:evt_real_1" {
			t.Fatalf("key %q", genuine.str("key"))
		}
		// The retry, signed anew (with the other configured secret), is a duplicate.
		c.do("POST", "/v1/reservations?provider=stripe", body, map[string]string{"Stripe-Signature": stripeHeader("whsec_rolled_out", now.Add(time.Minute), body)}).want(t, 200, "")

		c.do("POST", "/v1/reservations?provider=paypal", body, nil).want(t, 400, "unknown_provider")
		c.do("POST", "/v1/reservations?provider=github", body, nil).want(t, 501, "provider_not_configured")
		m := string(c.do("GET", "/metrics", nil, nil).body)
		if !strings.Contains(m, `keysvc_signature_verifications_total{outcome="invalid_signature"} 1`) ||
			!strings.Contains(m, `keysvc_signature_verifications_total{outcome="valid"} 2`) {
			t.Errorf("verification metrics:\n%s", m)
		}
	})
}

func TestVerifyOnly(t *testing.T) {
	c := start(t, keysvc.Config{Store: newBoltStore(t),
		Secrets: map[signature.Provider][]string{signature.ProviderGitHub: {"It's a Secret to Everybody"}}})
	sig := map[string]string{"X-Hub-Signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}
	r := c.do("POST", "/v1/verify?provider=github", []byte("Hello, World!"), sig)
	r.want(t, 200, "")
	if r.json["valid"] != true {
		t.Fatalf("%s", r.body)
	}
	c.do("POST", "/v1/verify?provider=github", []byte("Hello, World?"), sig).want(t, 401, "invalid_signature")
	c.do("POST", "/v1/verify", []byte("Hello, World!"), sig).want(t, 400, "unknown_provider")
	c.do("POST", "/v1/verify?provider=slack", []byte("x"), nil).want(t, 501, "provider_not_configured")
}

// The provider's preset gives the key: GitHub's delivery id, scoped by the
// hook id, after the documented signature verifies.
func TestProviderPresetKey(t *testing.T) {
	c := start(t, keysvc.Config{Store: newBoltStore(t),
		Secrets: map[signature.Provider][]string{signature.ProviderGitHub: {"It's a Secret to Everybody"}}})
	h := map[string]string{
		"X-Hub-Signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
		"X-GitHub-Delivery":   "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		"X-GitHub-Hook-ID":    "292430182",
	}
	r := c.do("POST", "/v1/reservations?provider=github", []byte("Hello, World!"), h)
	r.want(t, 201, "")
	if r.str("key") != "gh:292430182:72d3162e-cc78-11e3-81ab-4c9367dc0958" || r.str("source") != "provider_id" {
		t.Fatalf("%s", r.body)
	}
	r = c.do("POST", "/v1/keys?provider=github&scope=org-hooks", []byte("Hello, World!"), h)
	r.want(t, 200, "")
	if r.str("key") != "gh:org-hooks:72d3162e-cc78-11e3-81ab-4c9367dc0958" {
		t.Fatalf("%s", r.body)
	}
	c.do("POST", "/v1/keys?preset=github&scope="+url.QueryEscape("no spaces"), []byte("x"), h).want(t, 400, "invalid_scope")
	c.do("POST", "/v1/keys?preset=paypal", []byte("x"), nil).want(t, 400, "invalid_preset")
}
