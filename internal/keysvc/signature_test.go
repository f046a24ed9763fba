package keysvc_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/internal/keysvc/inbox"
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

// standardWebhooksV1a signs a delivery as a Standard Webhooks sender with an
// ed25519 key does (the spec: "v1a," and the base64 signature of
// "id.timestamp.body"), and returns its headers.
func standardWebhooksV1a(key ed25519.PrivateKey, id string, at time.Time, body []byte) map[string]string {
	ts := strconv.FormatInt(at.Unix(), 10)
	sig := ed25519.Sign(key, append([]byte(id+"."+ts+"."), body...))
	return map[string]string{"webhook-id": id, "webhook-timestamp": ts, "webhook-signature": "v1a," + base64.StdEncoding.EncodeToString(sig)}
}

func publicKeyLine(key ed25519.PrivateKey) string {
	return "whpk_" + base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey))
}

// keysvc verifies Standard Webhooks' ed25519 signatures with a whpk_ public
// key configured beside a whsec_ secret, as KEYSVC_SECRET_STANDARDWEBHOOKS
// gives them: a delivery signed with the key's private half passes
// /v1/verify and reserves its webhook-id, one signed with another key is a
// 401, and so is one made with the right key that was not configured.
func TestStandardWebhooksV1aVerified(t *testing.T) {
	now := time.Unix(1_750_000_000, 0)
	sender := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x5a}, ed25519.SeedSize))
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0xa5}, ed25519.SeedSize))
	body := []byte(`{"type":"invoice.paid","data":{"id":"in_1"}}`)
	configured := func(lines ...string) client {
		return start(t, keysvc.Config{Store: newBoltStore(t), Now: func() time.Time { return now },
			Secrets: map[signature.Provider][]string{signature.ProviderStandardWebhooks: lines}})
	}
	c := configured("whsec_"+base64.StdEncoding.EncodeToString([]byte("symmetric")), publicKeyLine(sender))

	r := c.do("POST", "/v1/verify?provider=standardwebhooks", body, standardWebhooksV1a(sender, "msg_1", now, body))
	r.want(t, 200, "")
	if r.json["valid"] != true {
		t.Fatalf("%s", r.body)
	}
	c.do("POST", "/v1/verify?provider=standardwebhooks", body, standardWebhooksV1a(other, "msg_1", now, body)).want(t, 401, "invalid_signature")
	c.do("POST", "/v1/verify?provider=standardwebhooks", append(body, ' '), standardWebhooksV1a(sender, "msg_1", now, body)).want(t, 401, "invalid_signature")
	c.do("POST", "/v1/verify?provider=standardwebhooks", body, standardWebhooksV1a(sender, "msg_1", now.Add(-10*time.Minute), body)).want(t, 401, "signature_too_old")

	forged := c.do("POST", "/v1/reservations?provider=standardwebhooks", body, standardWebhooksV1a(other, "msg_2", now, body))
	forged.want(t, 401, "invalid_signature")
	genuine := c.do("POST", "/v1/reservations?provider=standardwebhooks", body, standardWebhooksV1a(sender, "msg_2", now, body))
	genuine.want(t, 201, "")
	if genuine.str("key") != "swh::msg_2" {
		t.Errorf("key %q, want the webhook-id's swh::msg_2", genuine.str("key"))
	}

	wrong := configured(publicKeyLine(other))
	wrong.do("POST", "/v1/verify?provider=standardwebhooks", body, standardWebhooksV1a(sender, "msg_1", now, body)).want(t, 401, "invalid_signature")
}

// An endpoint's secret_file may hold whpk_ public keys, one per line, as it
// holds whsec_ secrets; a line that is not a 32-byte key stops the load,
// named by its position and never by its value.
func TestEndpointSecretFileTakesPublicKeys(t *testing.T) {
	sender := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x5a}, ed25519.SeedSize))
	dir := t.TempDir()
	good := filepath.Join(dir, "keys")
	bad := filepath.Join(dir, "bad-keys")
	short := "whpk_" + base64.StdEncoding.EncodeToString(make([]byte, 31))
	if os.WriteFile(good, []byte("whsec_c3ltbWV0cmlj\n\n"+publicKeyLine(sender)+"\n"), 0o600) != nil ||
		os.WriteFile(bad, []byte(publicKeyLine(sender)+"\n"+short+"\n"), 0o600) != nil {
		t.Fatal("write the key files")
	}
	endpoint := func(file string) string {
		return writeEndpoints(t, `{"endpoints":[{"name":"swh","provider":"standardwebhooks","target":"http://n8n/webhook/x","secret_file":"`+file+`"}]}`)
	}
	if _, err := inbox.LoadEndpoints(endpoint(good), nil); err != nil {
		t.Errorf("whsec_ and whpk_ lines: %v", err)
	}
	_, err := inbox.LoadEndpoints(endpoint(bad), nil)
	if err == nil || !strings.Contains(err.Error(), "key 2") || !strings.Contains(err.Error(), "31 bytes") {
		t.Errorf("a 31-byte whpk_: %v, want an error naming key 2 and its 31 bytes", err)
	}
	if err != nil && strings.Contains(err.Error(), strings.TrimPrefix(short, "whpk_")) {
		t.Errorf("the error repeats the key: %v", err)
	}
}
