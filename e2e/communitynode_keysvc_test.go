package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/conformance"
	"github.com/idemhook/idemhook/internal/communitynode"
	"github.com/idemhook/idemhook/internal/generator"
)

// Tokens of the keysvc the verifiable node's tests run: a guard token (what
// the node needs and no more), a read token (too small), and guard tokens
// of two tenants.
const (
	nodeGuardToken = "node-guard-token-0123456789"
	nodeReadToken  = "node-read-token-0123456789"
	tenantAToken   = "tenant-a-guard-token-0123456789"
	tenantBToken   = "tenant-b-guard-token-0123456789"
)

// nodeKeysvc is a keysvc over HTTPS (a certificate n8n trusts through
// NODE_EXTRA_CA_CERTS) with the tokens above, reserving in table; env adds
// to its environment (providers' secrets).
func nodeKeysvc(t *testing.T, name, table string, env ...string) *keysvcProc {
	t.Helper()
	args := append([]string{"--table", table, "--create-schema", "--tokens-file", nodeTokensFile(t)}, e2eTLS.keysvcArgs()...)
	return launchKeysvc(t, name, args, env)
}

// nodeTokensFile writes the tokens above to a tokens file.
func nodeTokensFile(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tokens")
	var lines strings.Builder
	for _, tok := range []struct{ name, scope, token, prefix string }{
		{"n8n", "guard", nodeGuardToken, ""}, {"viewer", "read", nodeReadToken, ""},
		{"tenant-a", "guard", tenantAToken, "tenantA:"}, {"tenant-b", "guard", tenantBToken, "tenantB:"},
	} {
		sum := sha256.Sum256([]byte(tok.token))
		fmt.Fprintf(&lines, "%s %s %s %s\n", tok.name, tok.scope, hex.EncodeToString(sum[:]), tok.prefix)
	}
	if err := os.WriteFile(file, []byte(lines.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// nodeOnKeysvcOptions are the workflow `generate --hashing node --node-store
// keysvc` writes for prefix, and a keysvc it reserves through, with an
// Idemhook Keysvc API credential of token.
func nodeOnKeysvcOptions(t *testing.T, prefix, token string) (generator.Options, *keysvcProc) {
	t.Helper()
	opts := seedOptions(prefix, generator.HashingNode)
	opts.NodeStore = generator.NodeStoreKeysvc
	ks := nodeKeysvc(t, prefix, opts.EventsTable)
	opts.KeysvcCredential = "keysvc (e2e " + prefix + ")"
	if _, err := api.CreateCredential(context.Background(), opts.KeysvcCredential, communitynode.KeysvcCredential, map[string]any{"url": ks.url, "token": token}); err != nil {
		t.Fatalf("create the %s credential: %v", communitynode.KeysvcCredential, err)
	}
	return opts, ks
}

// The Idempotency Guard of n8n-nodes-idemhook, the package n8n can verify,
// installed from its packed tarball, with keysvc over HTTPS as its store
// and a guard-scope token: the seed's run, 32 concurrent deliveries, the
// lease, a failing step released, keysvc stopped.
func TestVerifiableNode(t *testing.T) {
	needStack(t)
	t.Run("seed run", func(t *testing.T) {
		opts, _ := nodeOnKeysvcOptions(t, "vn1", nodeGuardToken)
		testSeedRun(t, opts)
	})
	t.Run("32 concurrent deliveries", func(t *testing.T) {
		opts, _ := nodeOnKeysvcOptions(t, "vn2", nodeGuardToken)
		testConcurrentOnce(t, deploy(t, opts), opts.BusinessTable, "evt_vn_concurrent", 32)
	})
	t.Run("business failure", func(t *testing.T) {
		opts, _ := nodeOnKeysvcOptions(t, "vn3", nodeGuardToken)
		testBusinessFailure(t, opts)
	})
	t.Run("lease", func(t *testing.T) {
		opts, _ := nodeOnKeysvcOptions(t, "vn4", nodeGuardToken)
		testLeaseGuard(t, "vn4", opts)
	})
	t.Run("keysvc stopped", func(t *testing.T) {
		opts, ks := nodeOnKeysvcOptions(t, "vn5", nodeGuardToken)
		d := deploy(t, opts)
		if r := post(t, d.url, "application/json", []byte(`{"id":"evt_vn_up"}`), nil); r.status != 200 || !strings.Contains(r.body, `"processed"`) {
			t.Fatalf("with keysvc up: %d %s", r.status, r.body)
		}
		ks.kill()
		r := post(t, d.url, "application/json", []byte(`{"id":"evt_vn_down"}`), nil)
		if r.status != 503 || r.retryAfter == "" {
			t.Errorf("keysvc stopped: %d %s (Retry-After %q), want 503 with Retry-After", r.status, r.body, r.retryAfter)
		}
		if n := countRows(t, opts.BusinessTable); n != 1 {
			t.Errorf("%s has %d rows, want 1: the business step ran with keysvc stopped", opts.BusinessTable, n)
		}
		if hasKey(t, opts.EventsTable, "evt:evt_vn_down") {
			t.Error("evt:evt_vn_down was reserved with keysvc stopped")
		}
	})
}

// Every conformance vector's key through the verifiable node, with each
// preset, equals `idemhook key`'s: without a signature check the node
// derives it with the Code node's code and sends keysvc only the key (a key
// of any UTF-8, in the query), and keysvc stores it as given.
func TestVerifiableNodeVectors(t *testing.T) {
	needStack(t)
	opts, _ := nodeOnKeysvcOptions(t, "vn6", nodeGuardToken)
	testVectors(t, opts, func(conformance.Vector) bool { return true })
	testPresetVectors(t, func(t *testing.T, i int) generator.Options {
		opts, _ := nodeOnKeysvcOptions(t, fmt.Sprintf("vnp%d", i), nodeGuardToken)
		return opts
	})
}

// The credential's test asks keysvc whether the token has the guard scope:
// a read-scope token fails, and n8n says which scope it needs; a guard
// token passes.
func TestVerifiableNodeCredentialTest(t *testing.T) {
	needStack(t)
	ctx := context.Background()
	ks := nodeKeysvc(t, "vn7", "vn7_processed_events")
	for _, tc := range []struct {
		token, status, says string
	}{
		{nodeReadToken, "Error", "guard scope"},
		{"not-a-token-keysvc-knows", "Error", "does not know this token"},
		{nodeGuardToken, "OK", ""},
		{tenantAToken, "OK", ""},
	} {
		cred, err := api.CreateCredential(ctx, "keysvc (e2e vn7 "+tc.token[:8]+")", communitynode.KeysvcCredential, map[string]any{"url": ks.url, "token": tc.token})
		if err != nil {
			t.Fatal(err)
		}
		got, err := api.TestCredential(ctx, cred.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != tc.status || !strings.Contains(got.Message, tc.says) {
			t.Errorf("credential test with %s: %s %q, want %s saying %q", tc.token, got.Status, got.Message, tc.status, tc.says)
		}
	}
}

// Two n8n workflows (two instances, or two endpoints Stripe sends one
// event to) sharing keysvc through tokens of two tenants: each runs its
// step for the event; neither can complete or release the other's key.
func TestVerifiableNodeTenants(t *testing.T) {
	needStack(t)
	ctx := context.Background()
	a := seedOptions("vn8a", generator.HashingNode)
	b := seedOptions("vn8b", generator.HashingNode)
	a.NodeStore, b.NodeStore = generator.NodeStoreKeysvc, generator.NodeStoreKeysvc
	const table = "vn8_processed_events"
	a.EventsTable, b.EventsTable = table, table
	ks := nodeKeysvc(t, "vn8", table)
	for _, x := range []struct {
		opts  *generator.Options
		token string
	}{{&a, tenantAToken}, {&b, tenantBToken}} {
		x.opts.KeysvcCredential = "keysvc (e2e " + x.opts.WebhookPath + ")"
		if _, err := api.CreateCredential(ctx, x.opts.KeysvcCredential, communitynode.KeysvcCredential, map[string]any{"url": ks.url, "token": x.token}); err != nil {
			t.Fatal(err)
		}
	}
	da, db := deploy(t, a), deploy(t, b)
	event := []byte(`{"id":"evt_vn_shared","type":"payment_intent.succeeded"}`)
	for _, d := range []deployment{da, db} {
		if r := post(t, d.url, "application/json", event, nil); r.status != 200 || !strings.Contains(r.body, `"processed"`) || !strings.Contains(r.body, `"evt:evt_vn_shared"`) {
			t.Errorf("the shared event at %s: %d %s, want 200 processed with the spec's key", d.url, r.status, r.body)
		}
		if r := post(t, d.url, "application/json", event, nil); r.status != 200 || !strings.Contains(r.body, `"duplicate"`) {
			t.Errorf("its replay at %s: %d %s, want 200 duplicate", d.url, r.status, r.body)
		}
	}
	for _, table := range []string{a.BusinessTable, b.BusinessTable} {
		if n := countRows(t, table); n != 1 {
			t.Errorf("%s has %d rows, want 1", table, n)
		}
	}
	// Tenant A's guard token, as the node calls keysvc: B's key is not in
	// A's key space, so A can neither complete nor release it, and a
	// reservation of A's never touches it.
	for _, call := range []struct{ method, path string }{
		{"POST", "/v1/reservations/" + "tenantB:evt:evt_vn_shared" + "/done"},
		{"DELETE", "/v1/reservations/" + "tenantB:evt:evt_vn_shared"},
	} {
		if status := keysvcCall(t, ks, tenantAToken, call.method, call.path, nil); status != 404 {
			t.Errorf("%s %s with tenant A's token: %d, want 404", call.method, call.path, status)
		}
	}
	if status := keysvcCall(t, ks, tenantAToken, "DELETE", "/v1/reservations/evt:evt_vn_shared", nil); status != 204 {
		t.Errorf("tenant A releasing its own key: %d, want 204", status)
	}
	for _, key := range []string{"tenantB:evt:evt_vn_shared"} {
		if !hasKey(t, table, key) {
			t.Errorf("%s is gone after tenant A's calls", key)
		}
	}
	if r := post(t, db.url, "application/json", event, nil); !strings.Contains(r.body, `"duplicate"`) {
		t.Errorf("tenant B's replay after A released its own key: %d %s, want duplicate", r.status, r.body)
	}
}

// keysvcCall makes one request to ks with token, as the node does, and
// returns the status.
func keysvcCall(t *testing.T, ks *keysvcProc, token, method, path string, body []byte) int {
	t.Helper()
	req, err := http.NewRequest(method, ks.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := ks.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
