package signature_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/signature"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"
)

// wantErr checks err against a sentinel (nil: success).
func wantErr(t *testing.T, name string, err, want error) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Errorf("%s: %v, want success", name, err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Errorf("%s: %v, want %v", name, err, want)
	}
}

// wantSays checks that err's message says each of parts.
func wantSays(t *testing.T, name string, err error, parts []string) {
	t.Helper()
	for _, m := range parts {
		if err == nil || !strings.Contains(err.Error(), m) {
			t.Errorf("%s: message %q does not say %q", name, err, m)
		}
	}
}

// Stripe: signatures made by the official stripe-go library (test-only).
func TestStripe(t *testing.T) {
	body := []byte(`{"id":"evt_1","object":"event","type":"payment_intent.succeeded"}`)
	now := time.Unix(1_750_000_000, 0)
	sign := func(secret string, at time.Time, payload []byte) string {
		return stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: payload, Secret: secret, Timestamp: at}).Header
	}
	header := sign("whsec_current", now, body)
	old := sign("whsec_previous", now, body)
	// During a roll Stripe signs with both secrets: t=…,v1=<new>,v1=<old>.
	rolled := header + ",v1=" + strings.SplitN(old, "v1=", 2)[1]
	opts := signature.Options{Now: now}

	for _, tc := range []struct {
		name    string
		body    []byte
		header  string
		secrets []string
		opts    signature.Options
		want    error
	}{
		{"valid", body, header, []string{"whsec_current"}, opts, nil},
		{"rotated: our old secret still listed", body, header, []string{"whsec_previous", "whsec_current"}, opts, nil},
		{"rotated: two v1 values, old secret", body, rolled, []string{"whsec_previous"}, opts, nil},
		{"rotated: two v1 values, new secret", body, rolled, []string{"whsec_current"}, opts, nil},
		{"tampered body", []byte(`{"id":"evt_2"}`), header, []string{"whsec_current"}, opts, signature.ErrNoValidSignature},
		{"body with one more space", append(append([]byte{}, body...), ' '), header, []string{"whsec_current"}, opts, signature.ErrNoValidSignature},
		{"wrong secret", body, header, []string{"whsec_other"}, opts, signature.ErrNoValidSignature},
		{"stale", body, sign("whsec_current", now.Add(-301*time.Second), body), []string{"whsec_current"}, opts, signature.ErrTooOld},
		{"at the tolerance", body, sign("whsec_current", now.Add(-300*time.Second), body), []string{"whsec_current"}, opts, nil},
		{"future", body, sign("whsec_current", now.Add(301*time.Second), body), []string{"whsec_current"}, opts, signature.ErrTooNew},
		{"custom tolerance", body, sign("whsec_current", now.Add(-20*time.Minute), body), []string{"whsec_current"}, signature.Options{Now: now, Tolerance: 30 * time.Minute}, nil},
		{"missing header", body, "", []string{"whsec_current"}, opts, signature.ErrMissingHeader},
		{"no timestamp", body, "v1=abcd", []string{"whsec_current"}, opts, signature.ErrMalformedHeader},
		{"not key=value", body, "garbage", []string{"whsec_current"}, opts, signature.ErrMalformedHeader},
		{"timestamp not a number", body, "t=soon,v1=abcd", []string{"whsec_current"}, opts, signature.ErrMalformedHeader},
		{"two timestamps", body, header + ",t=1", []string{"whsec_current"}, opts, signature.ErrMalformedHeader},
		{"only v0", body, strings.Replace(header, "v1=", "v0=", 1), []string{"whsec_current"}, opts, signature.ErrNoValidSignature},
		{"no secret", body, header, nil, opts, signature.ErrNoSecret},
	} {
		wantErr(t, tc.name, signature.Stripe(tc.body, tc.header, tc.secrets, tc.opts), tc.want)
	}
}

// A Stripe-Signature whose only v1 values are not HMACs fails as one with
// no valid signature (as stripe-go), and the message names the first of
// them, so a sender's bug is told apart from a missing signature; a
// malformed v1 beside a valid one is skipped.
func TestStripeNamesTheMalformedV1(t *testing.T) {
	body := []byte(`{"id":"evt_1"}`)
	now := time.Unix(1_750_000_000, 0)
	valid := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: "whsec_s", Timestamp: now}).Header
	validV1 := strings.SplitN(valid, "v1=", 2)[1]
	ts := "t=" + strconv.FormatInt(now.Unix(), 10)
	for _, tc := range []struct {
		name, header string
		want         error
		mentions     []string // what the message must say
	}{
		{"one short v1", ts + ",v1=00", signature.ErrNoValidSignature, []string{"v1 value 1", "64-hex-digit"}},
		{"not hex, then short", ts + ",v1=" + strings.Repeat("z", 64) + ",v1=00", signature.ErrNoValidSignature, []string{"v1 value 1 "}},
		{"v0, then one v1 too long", ts + ",v0=" + validV1 + ",v1=" + validV1 + "00", signature.ErrNoValidSignature, []string{"v1 value 1 "}},
		{"no v1 at all", ts + ",v0=" + validV1, signature.ErrNoValidSignature, []string{"no v1"}},
		{"malformed before the valid one", ts + ",v1=00,v1=" + validV1, nil, nil},
		{"malformed after the valid one", valid + ",v1=zz", nil, nil},
	} {
		err := signature.Stripe(body, tc.header, []string{"whsec_s"}, signature.Options{Now: now})
		wantErr(t, tc.name, err, tc.want)
		wantSays(t, tc.name, err, tc.mentions)
	}
}

// Standard Webhooks: the specification's own test vector, then variations.
func TestStandardWebhooks(t *testing.T) {
	const (
		secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		id     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		ts     = "1614265330"
		sig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	body := []byte(`{"test": 2432232314}`)
	opts := signature.Options{Now: time.Unix(1614265330, 0)}
	other := "whsec_" + "c2VjcmV0LXR3bw==" // base64("secret-two")

	for _, tc := range []struct {
		name         string
		body         []byte
		id, ts, sigs string
		secrets      []string
		opts         signature.Options
		want         error
	}{
		{"specification vector", body, id, ts, sig, []string{secret}, opts, nil},
		{"secret without whsec_ prefix", body, id, ts, sig, []string{strings.TrimPrefix(secret, "whsec_")}, opts, nil},
		{"several signatures, one valid", body, id, ts, "v1,bm9wZQ== v1a,xyz " + sig, []string{secret}, opts, nil},
		{"rotated secrets", body, id, ts, sig, []string{other, secret}, opts, nil},
		{"tampered body", []byte(`{"test": 2432232315}`), id, ts, sig, []string{secret}, opts, signature.ErrNoValidSignature},
		{"other id", body, "msg_other", ts, sig, []string{secret}, opts, signature.ErrNoValidSignature},
		{"wrong secret", body, id, ts, sig, []string{other}, opts, signature.ErrNoValidSignature},
		{"stale", body, id, ts, sig, []string{secret}, signature.Options{Now: time.Unix(1614265330+301, 0)}, signature.ErrTooOld},
		{"future", body, id, ts, sig, []string{secret}, signature.Options{Now: time.Unix(1614265330-301, 0)}, signature.ErrTooNew},
		{"missing id", body, "", ts, sig, []string{secret}, opts, signature.ErrMissingHeader},
		{"missing timestamp", body, id, "", sig, []string{secret}, opts, signature.ErrMissingHeader},
		{"missing signature", body, id, ts, "", []string{secret}, opts, signature.ErrMissingHeader},
		{"entry without comma", body, id, ts, "v1" + sig[3:], []string{secret}, opts, signature.ErrMalformedHeader},
		{"only other versions", body, id, ts, "v1a,abc", []string{secret}, opts, signature.ErrNoValidSignature},
		{"secret not base64", body, id, ts, sig, []string{"whsec_***"}, opts, signature.ErrInvalidSecret},
	} {
		wantErr(t, tc.name, signature.StandardWebhooks(tc.body, tc.id, tc.ts, tc.sigs, tc.secrets, tc.opts), tc.want)
	}
	h := http.Header{}
	h.Set("svix-id", id)
	h.Set("svix-timestamp", ts)
	h.Set("svix-signature", sig)
	wantErr(t, "svix header names", signature.ProviderStandardWebhooks.Verify(h, body, []string{secret}, opts), nil)
}

// GitHub: the example of GitHub's "Validating webhook deliveries".
func TestGitHub(t *testing.T) {
	const secret = "It's a Secret to Everybody"
	const header = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	body := []byte("Hello, World!")
	for _, tc := range []struct {
		name    string
		body    []byte
		header  string
		secrets []string
		want    error
	}{
		{"documented example", body, header, []string{secret}, nil},
		{"rotated secrets", body, header, []string{"new secret", secret}, nil},
		{"tampered body", []byte("Hello, World?"), header, []string{secret}, signature.ErrNoValidSignature},
		{"wrong secret", body, header, []string{"It's a secret to everybody"}, signature.ErrNoValidSignature},
		{"missing", body, "", []string{secret}, signature.ErrMissingHeader},
		{"sha1 form", body, "sha1=0123456789abcdef0123456789abcdef01234567", []string{secret}, signature.ErrMalformedHeader},
		{"short", body, "sha256=7571", []string{secret}, signature.ErrMalformedHeader},
		{"not hex", body, "sha256=" + strings.Repeat("z", 64), []string{secret}, signature.ErrMalformedHeader},
		{"no secret", body, header, []string{""}, signature.ErrNoSecret},
	} {
		wantErr(t, tc.name, signature.GitHub(tc.body, tc.header, tc.secrets), tc.want)
	}
}

// Slack: the example of Slack's "Verifying requests from Slack".
func TestSlack(t *testing.T) {
	const secret = "8f742231b10e8888abcd99yyyzzz85a5"
	const ts = "1531420618"
	const sig = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
	body := []byte("token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c")
	at := signature.Options{Now: time.Unix(1531420618, 0)}
	for _, tc := range []struct {
		name    string
		body    []byte
		ts, sig string
		secrets []string
		opts    signature.Options
		want    error
	}{
		{"documented example", body, ts, sig, []string{secret}, at, nil},
		{"rotated secrets", body, ts, sig, []string{"old", secret}, at, nil},
		{"tampered body", append([]byte("x"), body...), ts, sig, []string{secret}, at, signature.ErrNoValidSignature},
		{"other timestamp", body, "1531420619", sig, []string{secret}, at, signature.ErrNoValidSignature},
		{"wrong secret", body, ts, sig, []string{"nope"}, at, signature.ErrNoValidSignature},
		{"stale", body, ts, sig, []string{secret}, signature.Options{Now: time.Unix(1531420618+301, 0)}, signature.ErrTooOld},
		{"future", body, ts, sig, []string{secret}, signature.Options{Now: time.Unix(1531420618-301, 0)}, signature.ErrTooNew},
		{"missing timestamp", body, "", sig, []string{secret}, at, signature.ErrMissingHeader},
		{"missing signature", body, ts, "", []string{secret}, at, signature.ErrMissingHeader},
		{"v1 prefix", body, ts, "v1=" + sig[3:], []string{secret}, at, signature.ErrMalformedHeader},
		{"timestamp not a number", body, "yesterday", sig, []string{secret}, at, signature.ErrMalformedHeader},
	} {
		wantErr(t, tc.name, signature.Slack(tc.body, tc.ts, tc.sig, tc.secrets, tc.opts), tc.want)
	}
}

// Shopify publishes no worked example: the signatures come from an
// independent implementation, Node's crypto, run in a separate process.
func TestShopify(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not on PATH: it signs the Shopify test vectors")
	}
	body := `{"id":820982911946154508,"email":"jon@example.com","note":"ünïcode"}`
	sign := func(secret, payload string) string {
		out, err := exec.Command(node, "-e",
			`process.stdout.write(require('crypto').createHmac('sha256', process.argv[1]).update(Buffer.from(process.argv[2], 'utf8')).digest('base64'))`,
			secret, payload).Output()
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	header := sign("shpss_app_secret", body)
	for _, tc := range []struct {
		name    string
		body    string
		header  string
		secrets []string
		want    error
	}{
		{"node-signed", body, header, []string{"shpss_app_secret"}, nil},
		{"rotated secrets", body, header, []string{"shpss_new", "shpss_app_secret"}, nil},
		{"tampered body", body + " ", header, []string{"shpss_app_secret"}, signature.ErrNoValidSignature},
		{"wrong secret", body, header, []string{"shpss_other"}, signature.ErrNoValidSignature},
		{"missing", body, "", []string{"shpss_app_secret"}, signature.ErrMissingHeader},
		{"not base64", body, "%%%", []string{"shpss_app_secret"}, signature.ErrMalformedHeader},
		{"hex instead of base64", body, strings.Repeat("ab", 32), []string{"shpss_app_secret"}, signature.ErrMalformedHeader},
	} {
		wantErr(t, tc.name, signature.Shopify([]byte(tc.body), tc.header, tc.secrets), tc.want)
	}
}

func TestProviderVerifyReadsTheRightHeaders(t *testing.T) {
	h := http.Header{}
	h.Set("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
	wantErr(t, "github", signature.ProviderGitHub.Verify(h, []byte("Hello, World!"), []string{"It's a Secret to Everybody"}, signature.Options{}), nil)
	wantErr(t, "stripe without its header", signature.ProviderStripe.Verify(h, []byte("Hello, World!"), []string{"x"}, signature.Options{}), signature.ErrMissingHeader)
	for _, p := range signature.Providers {
		if got, err := signature.ParseProvider(string(p)); err != nil || got != p {
			t.Errorf("ParseProvider(%q) = %q, %v", p, got, err)
		}
		if len(p.Headers()) == 0 {
			t.Errorf("%s lists no headers", p)
		}
	}
	if _, err := signature.ParseProvider("paypal"); err == nil {
		t.Error("ParseProvider accepted paypal")
	}
	// A provider without a row in the scheme table is refused by each
	// method, by name.
	paypal := signature.Provider("paypal")
	for what, err := range map[string]error{
		"Verify":       paypal.Verify(h, []byte("x"), []string{"s"}, signature.Options{}),
		"CheckSecrets": paypal.CheckSecrets([]string{"s"}),
	} {
		if err == nil || !strings.Contains(err.Error(), `unknown provider "paypal"`) {
			t.Errorf("%s of paypal: %v", what, err)
		}
	}
	if _, err := paypal.Sign(signature.Unsigned{Body: []byte("x"), Secret: "s"}); err == nil {
		t.Error("Sign of paypal")
	}
}

// FuzzParsers: no header, however malformed, panics or verifies without the
// secret. Standard Webhooks is also fuzzed with a list that mixes a whsec_
// secret and a whpk_ key, from seeds that include a v1a signature of the
// same body under another message id (one changed byte away from valid).
func FuzzParsers(f *testing.F) {
	key := fixedKey(1)
	body := []byte(`{"test": 2432232314}`)
	otherID := signV1a(key, "msg_0", "1614265330", body)
	for _, seed := range []string{"t=1614265330,v1=abcd", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", "sha256=00", "v0=zz", "", ",,,", "t=,v1=", "=", "v1,",
		otherID, "v1a,", "v1a,!!!", "v1a," + base64.StdEncoding.EncodeToString(make([]byte, 63)), "v1,AAAA " + otherID, strings.Repeat(otherID+" ", 9)} {
		f.Add(seed, "1614265330", body)
	}
	f.Fuzz(func(t *testing.T, header, ts string, body []byte) {
		secrets := []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
		mixed := []string{secrets[0], whpk(key)}
		opts := signature.Options{Now: time.Unix(1614265330, 0)}
		for name, err := range map[string]error{
			"stripe":                             signature.Stripe(body, header, secrets, opts),
			"standardwebhooks":                   signature.StandardWebhooks(body, "msg_1", ts, header, secrets, opts),
			"standardwebhooks, whsec_ and whpk_": signature.StandardWebhooks(body, "msg_1", ts, header, mixed, opts),
			"github":                             signature.GitHub(body, header, secrets),
			"shopify":                            signature.Shopify(body, header, secrets),
			"slack":                              signature.Slack(body, ts, header, secrets, opts),
		} {
			if err == nil {
				t.Fatalf("%s verified a fuzzed header %q", name, header)
			}
			known := false
			for _, s := range []error{signature.ErrMissingHeader, signature.ErrMalformedHeader, signature.ErrNoValidSignature, signature.ErrTooOld, signature.ErrTooNew} {
				known = known || errors.Is(err, s)
			}
			if !known {
				t.Fatalf("%s: error %v wraps no sentinel", name, fmt.Sprint(err))
			}
		}
	})
}
