package signature_test

import (
	"encoding/base64"
	"errors"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/idemhook/idemhook/signature"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"
)

// Sign signs as each sender does: its headers are those of independent
// signers (stripe-go; GitHub's and Slack's documented examples; Node's
// crypto for Shopify; the test's Standard Webhooks sender written from
// the specification), and Verify accepts them, for every provider.
func TestSignAsTheSenders(t *testing.T) {
	at := time.Unix(1_750_000_000, 0)
	body := []byte(`{"id":"evt_sign","type":"payment_intent.succeeded"}`)
	hmacKey := []byte("a symmetric secret of the endpoint")
	whsec := "whsec_" + base64.StdEncoding.EncodeToString(hmacKey)
	key := fixedKey(7)
	slackBody := []byte("token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J")
	for _, tc := range []struct {
		p    signature.Provider
		u    signature.Unsigned
		want map[string]string
	}{
		{signature.ProviderStripe, signature.Unsigned{Body: body, Secret: "whsec_stripe", Timestamp: at}, map[string]string{
			"Stripe-Signature": stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: "whsec_stripe", Timestamp: at}).Header}},
		{signature.ProviderGitHub, signature.Unsigned{Body: []byte("Hello, World!"), Secret: "It's a Secret to Everybody"}, map[string]string{
			"X-Hub-Signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}},
		{signature.ProviderSlack, signature.Unsigned{Body: slackBody, Secret: "8f742231b10e8888abcd99yyyzzz85a5", Timestamp: at}, map[string]string{
			"X-Slack-Request-Timestamp": "1750000000", "X-Slack-Signature": nodeHMAC(t, "hex", "8f742231b10e8888abcd99yyyzzz85a5", "v0:1750000000:"+string(slackBody), "v0=")}},
		{signature.ProviderShopify, signature.Unsigned{Body: body, Secret: "shpss_app_secret"}, map[string]string{
			"X-Shopify-Hmac-Sha256": nodeHMAC(t, "base64", "shpss_app_secret", string(body), "")}},
		{signature.ProviderStandardWebhooks, signature.Unsigned{Body: body, Secret: whsec, PrivateKey: key, ID: "msg_sign", Timestamp: at}, map[string]string{
			"Webhook-Id": "msg_sign", "Webhook-Timestamp": "1750000000",
			"Webhook-Signature": signV1(hmacKey, "msg_sign", "1750000000", body) + " " + signV1a(key, "msg_sign", "1750000000", body)}},
	} {
		t.Run(string(tc.p), func(t *testing.T) {
			got, err := tc.p.Sign(tc.u)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Errorf("headers %v, want %v", got, tc.want)
			}
			h := http.Header{}
			for name, v := range tc.want {
				if got[name] != v {
					t.Errorf("%s: %q, want %q", name, got[name], v)
				}
				h.Set(name, got[name])
			}
			secrets := []string{tc.u.Secret}
			if tc.u.PrivateKey != nil {
				secrets = []string{whpk(key)} // the v1a signature alone verifies it
			}
			at := tc.u.Timestamp
			if at.IsZero() {
				at = time.Now()
			}
			if err := tc.p.Verify(h, tc.u.Body, secrets, signature.Options{Now: at}); err != nil {
				t.Errorf("Verify refuses Sign's headers: %v", err)
			}
			if err := tc.p.Verify(h, append([]byte(" "), tc.u.Body...), secrets, signature.Options{Now: at}); !errors.Is(err, signature.ErrNoValidSignature) {
				t.Errorf("Verify of another body: %v, want ErrNoValidSignature", err)
			}
		})
	}
	for _, p := range signature.Providers {
		if _, err := p.Sign(signature.Unsigned{Body: body, Secret: whsec, ID: "msg_1"}); err != nil {
			t.Errorf("%s cannot sign: %v", p, err)
		}
	}
}

func TestSignRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    signature.Provider
		u    signature.Unsigned
		want error
	}{
		{"no secret", signature.ProviderGitHub, signature.Unsigned{Body: []byte("x")}, signature.ErrNoSecret},
		{"standard webhooks without an id", signature.ProviderStandardWebhooks, signature.Unsigned{Body: []byte("x"), Secret: "whsec_c2VjcmV0"}, signature.ErrMissingHeader},
		{"standard webhooks with a secret not base64", signature.ProviderStandardWebhooks, signature.Unsigned{Body: []byte("x"), Secret: "whsec_%%", ID: "msg_1"}, signature.ErrInvalidSecret},
	} {
		if _, err := tc.p.Sign(tc.u); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// nodeHMAC is prefix and the HMAC-SHA256 of payload under secret in
// encoding, computed by Node's crypto in a separate process.
func nodeHMAC(t *testing.T, encoding, secret, payload, prefix string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not on PATH: it signs the test vectors")
	}
	out, err := exec.Command(node, "-e",
		`process.stdout.write(require('crypto').createHmac('sha256', process.argv[1]).update(Buffer.from(process.argv[2], 'utf8')).digest(process.argv[3]))`,
		secret, payload, encoding).Output()
	if err != nil {
		t.Fatal(err)
	}
	return prefix + string(out)
}
