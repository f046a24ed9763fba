package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/signature"
)

// The test's signing secret. It goes into n8n only through
// `n8n import:credentials` (encrypted at rest) or keysvc's environment.
const stripeSecret = "whsec_e2eSigningSecretThatMustNotLeak0123456789"

func stripeSigned(secret string, body []byte) map[string]string {
	return stripeSignedAt(secret, body, time.Now())
}

// stripeSignedAt signs body as Stripe does at a time of the caller's (an
// hour ago: outside the tolerance).
func stripeSignedAt(secret string, body []byte, at time.Time) map[string]string {
	h, err := signature.ProviderStripe.Sign(signature.Unsigned{Body: body, Secret: secret, Timestamp: at})
	if err != nil {
		panic(err) // a secret of the test's own
	}
	return h
}

// Verify before reserve, in the workflow: a forged Stripe delivery carrying
// a real event id gets 401 and reserves nothing; the genuine delivery
// afterwards is processed; the secret appears in no generated file, no
// workflow stored by n8n, no execution and no log.
func TestForgedStripeDeliveryInWorkflow(t *testing.T) {
	needStack(t)
	ctx := context.Background()
	opts := seedOptions("v1", generator.HashingCodeNode)
	opts.Verify = "stripe"
	opts.VerifyCredential = "Stripe signing secret (e2e v1)"
	importSecretCredential(t, opts.VerifyCredential, stripeSecret)
	d := deploy(t, opts)
	testForgedStripeDelivery(t, d, opts)

	for name, b := range readDir(t, d.dir) {
		if strings.Contains(b, stripeSecret) {
			t.Errorf("the signing secret is in the generated %s", name)
		}
	}
	var leaks int
	if err := st.N8NDB.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM workflow_entity WHERE nodes::text LIKE '%' || $1 || '%') +
		(SELECT count(*) FROM credentials_entity WHERE data LIKE '%' || $1 || '%') +
		(SELECT count(*) FROM execution_data WHERE data LIKE '%' || $1 || '%')`, stripeSecret).Scan(&leaks); err != nil {
		t.Fatal(err)
	}
	if leaks != 0 {
		t.Errorf("the signing secret is stored in clear in n8n's database (%d rows)", leaks)
	}
	for _, log := range st.Logs() {
		if b, err := os.ReadFile(log); err == nil && strings.Contains(string(b), stripeSecret) {
			t.Errorf("the signing secret is in %s", log)
		}
	}
}

// The same through keysvc, which holds the secret in its environment.
func TestForgedStripeDeliveryThroughKeysvc(t *testing.T) {
	needStack(t)
	opts := seedOptions("v2", generator.HashingKeysvc)
	opts.Verify = "stripe"
	opts.KeysvcURL = startKeysvc(t, opts.EventsTable, "KEYSVC_SECRET_STRIPE="+stripeSecret)
	d := deploy(t, opts)
	testForgedStripeDelivery(t, d, opts)
	for name, b := range readDir(t, d.dir) {
		if strings.Contains(b, stripeSecret) {
			t.Errorf("the signing secret is in the generated %s", name)
		}
	}
	logs, _ := filepath.Glob(filepath.Join(st.LogDir, "keysvc-"+opts.EventsTable+".log"))
	for _, log := range append(logs, st.Logs()...) {
		if b, err := os.ReadFile(log); err == nil && strings.Contains(string(b), stripeSecret) {
			t.Errorf("the signing secret is in %s", log)
		}
	}
}

func testForgedStripeDelivery(t *testing.T, d deployment, opts generator.Options) {
	body := []byte(`{"id":"evt_real_payment","object":"event","type":"payment_intent.succeeded"}`)

	forged := post(t, d.url, "application/json", body, stripeSigned("whsec_attacker", body))
	if forged.status != 401 {
		t.Errorf("forged delivery: %d %s, want 401", forged.status, forged.body)
	}
	unsigned := post(t, d.url, "application/json", body, nil)
	if unsigned.status != 401 || !strings.Contains(unsigned.body, "missing_signature") {
		t.Errorf("unsigned delivery: %d %s, want 401 missing_signature", unsigned.status, unsigned.body)
	}
	if keys := storedKeys(t, opts.EventsTable); len(keys) != 0 {
		t.Fatalf("a forged delivery reserved %q", keys)
	}

	genuine := post(t, d.url, "application/json", body, stripeSigned(stripeSecret, body))
	if genuine.status != 200 || !strings.Contains(genuine.body, `"processed"`) {
		t.Errorf("genuine delivery after the forgery: %d %s, want 200 processed", genuine.status, genuine.body)
	}
	retry := post(t, d.url, "application/json", body, stripeSigned(stripeSecret, body))
	if retry.status != 200 || !strings.Contains(retry.body, `"duplicate"`) {
		t.Errorf("genuine retry: %d %s, want 200 duplicate", retry.status, retry.body)
	}
	execs, _ := st.WaitExecutions(context.Background(), d.workflowID, 4)
	if n := countRows(t, opts.BusinessTable); n != 1 {
		t.Errorf("%s has %d rows, want 1 (executions %s)", opts.BusinessTable, n, executionIDs(execs))
	}
}

// importSecretCredential imports an n8n Crypto credential holding an HMAC
// secret, as the README tells users.
func importSecretCredential(t *testing.T, name, secret string) {
	t.Helper()
	cred, _ := json.Marshal([]map[string]any{{
		"id": fmt.Sprintf("cred%x", sha256.Sum256([]byte(name)))[:16], "name": name, "type": "crypto",
		"data": map[string]any{"hmacSecret": secret},
	}})
	file := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(file, cred, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := st.ImportCredentials(context.Background(), file); err != nil {
		t.Fatal(err)
	}
	os.Remove(file)
}

func readDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		out[e.Name()] = string(b)
	}
	return out
}
