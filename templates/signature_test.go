package templates_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/signature"
	"github.com/idemhook/idemhook/signature/provider"
	"github.com/idemhook/idemhook/templates"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"
)

type sigCase struct {
	name     string
	provider signature.Provider
	secret   string
	body     []byte
	headers  map[string]string
	now      time.Time
	// jsCode, when set, is the workflow's expected outcome where it must
	// differ from package signature's (a body that is not UTF-8).
	jsCode string
}

type sigHarnessCase struct {
	Prepare  string            `json:"prepare"`
	Check    string            `json:"check"`
	Reject   string            `json:"reject"`
	Secret   string            `json:"secret"`
	Encoding string            `json:"encoding"`
	NowMs    int64             `json:"nowMs"`
	Body     string            `json:"body"`
	Headers  map[string]string `json:"headers"`
}

// The workflow's three-step signature check (a Code node script, n8n's
// Crypto node, an If node's expression) reaches the same verdict as package
// signature on every case, and its 401 the same reason code.
func TestSignatureScriptsAgreeWithGo(t *testing.T) {
	cases := signatureCases()
	results := runSignatureCheck(t, cases, prepareScript)
	for i, c := range cases {
		if got := results[i]; checkVerdict(t, c, got) && !got.BodyKept {
			t.Errorf("%s: the raw body did not travel through the check", c.name)
		}
	}
}

// The inbox receiver prepares the check in its receipt's Code node
// (templates.SignedReceiptScript): the same verdicts, and each receipt
// carries the key package eventkey derives and the body's exact bytes, read
// from n8n once.
func TestSignedReceiptAgreesWithGo(t *testing.T) {
	cases := signatureCases()
	results := runSignatureCheck(t, cases, func(c sigCase) (string, error) {
		return templates.SignedReceiptScript(templates.Receipt{DefaultAccount: "default"}, string(c.provider), 300)
	})
	for i, c := range cases {
		got := results[i]
		checkVerdict(t, c, got)
		want, err := eventkey.Derive(c.body)
		if err != nil {
			t.Fatal(err)
		}
		if got.Key != want.String() {
			t.Errorf("%s: the receipt's key is %q, want %q", c.name, got.Key, want)
		}
		if got.Body != base64.StdEncoding.EncodeToString(c.body) {
			t.Errorf("%s: the receipt's body is %q, not the request's bytes", c.name, got.Body)
		}
		if got.Reads != 1 {
			t.Errorf("%s: the body was read %d times, want once (each read is a call from the task runner to n8n)", c.name, got.Reads)
		}
	}
}

// prepareScript is the first step of the reserve pattern's check.
func prepareScript(c sigCase) (string, error) {
	return templates.SignaturePrepareScript(string(c.provider), 300)
}

// signatureCases are requests signed right and wrong for each provider a
// workflow checks.
func signatureCases() []sigCase {
	now := time.Unix(1_750_000_000, 0)
	stripeBody := []byte(`{"id":"evt_sig_1","type":"charge.succeeded"}`)
	stripeSig := func(secret string, at time.Time) string {
		return stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: stripeBody, Secret: secret, Timestamp: at}).Header
	}
	shopifyBody := []byte(`{"id":820982911946154508,"note":"ünïcode"}`)
	m := hmac.New(sha256.New, []byte("shpss_secret"))
	m.Write(shopifyBody)
	shopifySig := base64.StdEncoding.EncodeToString(m.Sum(nil))
	slackBody := []byte("token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c")
	slackHeaders := map[string]string{"x-slack-request-timestamp": "1531420618", "x-slack-signature": "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"}
	github := map[string]string{"x-hub-signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}
	rolled := stripeSig("whsec_new", now) + ",v1=" + stripeSig("whsec_old", now)[len("t=1750000000,v1="):]

	return []sigCase{
		{"stripe valid", "stripe", "whsec_new", stripeBody, map[string]string{"stripe-signature": stripeSig("whsec_new", now)}, now, ""},
		{"stripe during a roll", "stripe", "whsec_new", stripeBody, map[string]string{"stripe-signature": rolled}, now, ""},
		{"stripe forged", "stripe", "whsec_new", stripeBody, map[string]string{"stripe-signature": stripeSig("whsec_attacker", now)}, now, ""},
		{"stripe tampered", "stripe", "whsec_new", append([]byte(" "), stripeBody...), map[string]string{"stripe-signature": stripeSig("whsec_new", now)}, now, ""},
		{"stripe stale", "stripe", "whsec_new", stripeBody, map[string]string{"stripe-signature": stripeSig("whsec_new", now.Add(-301*time.Second))}, now, ""},
		{"stripe future", "stripe", "whsec_new", stripeBody, map[string]string{"stripe-signature": stripeSig("whsec_new", now.Add(301*time.Second))}, now, ""},
		{"stripe missing", "stripe", "whsec_new", stripeBody, map[string]string{}, now, ""},
		{"stripe malformed", "stripe", "whsec_new", stripeBody, map[string]string{"stripe-signature": "v1=ab"}, now, ""},
		{"stripe v1 not an HMAC", "stripe", "whsec_new", stripeBody, map[string]string{"stripe-signature": "t=1750000000,v1=00"}, now, ""},
		{"stripe v1 not hex", "stripe", "whsec_new", stripeBody, map[string]string{"stripe-signature": "t=1750000000,v1=" + strings.Repeat("zz", 32)}, now, ""},
		{"stripe body not UTF-8", "stripe", "whsec_new", []byte("\xff\xfe"), map[string]string{"stripe-signature": ""}, now, ""},
		{"github documented", "github", "It's a Secret to Everybody", []byte("Hello, World!"), github, now, ""},
		{"github tampered", "github", "It's a Secret to Everybody", []byte("Hello, World?"), github, now, ""},
		{"github malformed", "github", "It's a Secret to Everybody", []byte("Hello, World!"), map[string]string{"x-hub-signature-256": "sha1=00"}, now, ""},
		{"github not UTF-8", "github", "k", []byte("\xff"), map[string]string{"x-hub-signature-256": "sha256=" + hmacHex("k", []byte("\xff"))}, now, "invalid_signature"},
		{"shopify valid", "shopify", "shpss_secret", shopifyBody, map[string]string{"x-shopify-hmac-sha256": shopifySig}, now, ""},
		{"shopify wrong secret", "shopify", "shpss_other", shopifyBody, map[string]string{"x-shopify-hmac-sha256": shopifySig}, now, ""},
		{"shopify malformed", "shopify", "shpss_secret", shopifyBody, map[string]string{"x-shopify-hmac-sha256": "abc"}, now, ""},
		{"slack documented", "slack", "8f742231b10e8888abcd99yyyzzz85a5", slackBody, slackHeaders, time.Unix(1531420618, 0), ""},
		{"slack stale", "slack", "8f742231b10e8888abcd99yyyzzz85a5", slackBody, slackHeaders, time.Unix(1531420618+301, 0), ""},
		{"slack missing timestamp", "slack", "8f742231b10e8888abcd99yyyzzz85a5", slackBody, map[string]string{"x-slack-signature": slackHeaders["x-slack-signature"]}, time.Unix(1531420618, 0), ""},
	}

}

// checkVerdict reports whether the workflow's verdict is package
// signature's, with the same reason code.
func checkVerdict(t *testing.T, c sigCase, got sigVerdict) bool {
	t.Helper()
	h := http.Header{}
	for k, v := range c.headers {
		h.Set(k, v)
	}
	want := signature.Code(c.provider.Verify(h, c.body, []string{c.secret}, signature.Options{Now: c.now}))
	if c.jsCode != "" {
		want = c.jsCode
	}
	if got.Valid != (want == "") || got.Code != want {
		t.Errorf("%s: workflow says valid=%v code=%q, want code %q", c.name, got.Valid, got.Code, want)
		return false
	}
	return true
}

func hmacHex(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

type sigVerdict struct {
	Valid    bool   `json:"valid"`
	Code     string `json:"code"`
	BodyKept bool   `json:"bodyKept"`
	// Key and Body are the receipt's, when the first step builds one.
	Key  string `json:"key"`
	Body string `json:"body"`
	// Reads counts the first step's reads of the body.
	Reads int `json:"reads"`
}

// runSignatureCheck runs each case through the workflow's signature check
// (testdata/signature-harness.js), its first step the script prepare
// returns, the Crypto node encoding its HMAC as
// package provider's table says (hex for a provider a workflow cannot
// check).
func runSignatureCheck(t *testing.T, cases []sigCase, prepare func(sigCase) (string, error)) []sigVerdict {
	t.Helper()
	dir := t.TempDir()
	checkFile := filepath.Join(dir, "signature-valid.js")
	rejectFile := filepath.Join(dir, "signature-rejection.js")
	if err := os.WriteFile(checkFile, []byte(templates.SignatureValidExpression), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rejectFile, []byte(templates.SignatureRejectionExpression), 0o600); err != nil {
		t.Fatal(err)
	}
	var hcases []sigHarnessCase
	for i, c := range cases {
		src, err := prepare(c)
		if err != nil {
			t.Fatal(err)
		}
		prep := filepath.Join(dir, "prepare-"+strconv.Itoa(i)+".js")
		if err := os.WriteFile(prep, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		enc := "hex"
		if p, _ := provider.Lookup(string(c.provider)); p.WorkflowHMAC != "" {
			enc = p.WorkflowHMAC
		}
		hcases = append(hcases, sigHarnessCase{Prepare: prep, Check: checkFile, Reject: rejectFile, Secret: c.secret, Encoding: enc,
			NowMs: c.now.UnixMilli(), Body: base64.StdEncoding.EncodeToString(c.body), Headers: c.headers})
	}
	casesFile := filepath.Join(dir, "cases.json")
	raw, _ := json.Marshal(hcases)
	if err := os.WriteFile(casesFile, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	out := runNode(t, "signature-harness.js", casesFile)
	var results []sigVerdict
	if err := json.Unmarshal(out, &results); err != nil || len(results) != len(cases) {
		t.Fatalf("harness output %s: %v", out, err)
	}
	return results
}
