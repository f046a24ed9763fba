package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/internal/n8napi"
	"github.com/idemhook/idemhook/internal/verify"
)

// verifyTarget is the main stack as `idemhook verify` prepares its own.
func verifyTarget(t *testing.T) verify.Target {
	t.Helper()
	ctx := context.Background()
	find := func() map[string]n8napi.Credential {
		creds, err := api.Credentials(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]n8napi.Credential{}
		for _, c := range creds {
			if (c.Type == "postgres" && c.Name == credentialName) || (c.Type == "crypto" && c.Name == inboxSecretCredential) {
				out[c.Type] = c
			}
		}
		return out
	}
	creds := find()
	if _, ok := creds["crypto"]; !ok {
		importSecretCredential(t, inboxSecretCredential, stripeSecret)
		creds = find()
	}
	return verify.Target{API: api, WebhookURL: st.WebhookURL, Credentials: creds, SigningSecret: stripeSecret}
}

// generatedWorkflow generates opts and returns workflow.json, its schema
// applied to the business database.
func generatedWorkflow(t *testing.T, opts generator.Options) n8napi.Workflow {
	t.Helper()
	files, err := generator.Files(opts)
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, string(files["schema.sql"]))
	var w n8napi.Workflow
	if err := json.Unmarshal(files[generator.FileWorkflow], &w); err != nil {
		t.Fatal(err)
	}
	return w
}

func runVerify(t *testing.T, w n8napi.Workflow) *verify.Report {
	t.Helper()
	return runVerifyOn(t, verifyTarget(t), w)
}

func runVerifyOn(t *testing.T, target verify.Target, w n8napi.Workflow) *verify.Report {
	t.Helper()
	claimName(t, "idemhook verify: "+w.Name)
	r, err := verify.Run(context.Background(), target, w, verify.Options{Concurrency: 10, Deliveries: 5})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	r.WriteTable(&b)
	t.Log("\n" + b.String())
	return r
}

func wfNode(t *testing.T, w n8napi.Workflow, name string) map[string]any {
	t.Helper()
	for _, n := range w.Nodes {
		if n["name"] == name {
			return n
		}
	}
	t.Fatalf("no node %q", name)
	return nil
}

// businessStep is the generated business step's name (it names the table).
func businessStep(w n8napi.Workflow) string {
	for _, n := range w.Nodes {
		if name, _ := n["name"].(string); strings.HasPrefix(name, "Business Step") {
			return name
		}
	}
	return ""
}

func outputs(w n8napi.Workflow, node string) []any {
	c, _ := w.Connections[node].(map[string]any)
	main, _ := c["main"].([]any)
	return main
}

func link(targets ...string) []any {
	out := []any{}
	for _, t := range targets {
		out = append(out, map[string]any{"node": t, "type": "main", "index": 0})
	}
	return out
}

// rename renames a node and every connection from or to it.
func rename(w *n8napi.Workflow, from, to string) {
	for _, n := range w.Nodes {
		if n["name"] == from {
			n["name"] = to
		}
	}
	if c, ok := w.Connections[from]; ok {
		w.Connections[to] = c
		delete(w.Connections, from)
	}
	for _, c := range w.Connections {
		for _, out := range c.(map[string]any)["main"].([]any) {
			for _, target := range out.([]any) {
				if m := target.(map[string]any); m["node"] == from {
					m["node"] = to
				}
			}
		}
	}
}

// userEdit is the default workflow as a user edits it: the business step
// replaced by a Set node, a call to their CRM and a second insert, and
// nodes renamed. The insert returns event_key, the field Step Succeeded?
// tests, as the workflow's note asks of the last node.
func userEdit(t *testing.T, prefix, crmURL string) n8napi.Workflow {
	w := generatedWorkflow(t, seedOptions(prefix, generator.HashingCodeNode))
	execSQL(t, "CREATE TABLE IF NOT EXISTS "+prefix+"_orders (event_key text PRIMARY KEY, status text)")
	biz := businessStep(w)
	first := wfNode(t, w, biz)
	rename(&w, biz, "Prepare order")
	rename(&w, generator.NodeLeaseAcquired, "Is it new?")
	rename(&w, "Respond 200 duplicate", "Already seen")
	first["type"], first["typeVersion"] = "n8n-nodes-base.set", 3.4
	delete(first, "credentials")
	first["parameters"] = map[string]any{"mode": "raw", "jsonOutput": `={{ JSON.stringify({ order: $('Build Idempotency Key').item.json.key, status: 'new' }) }}`, "options": map[string]any{}}
	pg := wfNode(t, w, "Release Key")
	w.Nodes = append(w.Nodes,
		map[string]any{"name": "Notify CRM", "type": "n8n-nodes-base.httpRequest", "typeVersion": 4.2, "position": []any{900, 100}, "onError": "continueErrorOutput",
			"parameters": map[string]any{"method": "POST", "url": crmURL, "sendBody": true, "specifyBody": "json", "jsonBody": "={{ JSON.stringify($json) }}", "options": map[string]any{}}},
		map[string]any{"name": "Insert order", "type": "n8n-nodes-base.postgres", "typeVersion": 2.6, "position": []any{1100, 100}, "onError": "continueErrorOutput", "credentials": pg["credentials"],
			"parameters": map[string]any{"operation": "executeQuery", "query": "INSERT INTO " + prefix + "_orders (event_key, status) VALUES ($1, 'new') RETURNING event_key",
				"options": map[string]any{"queryReplacement": "={{ [ $('Build Idempotency Key').item.json.key ] }}"}}},
	)
	respond := outputs(w, "Prepare order")[0]
	outputs(w, "Prepare order")[0] = link("Notify CRM")
	w.Connections["Notify CRM"] = map[string]any{"main": []any{link("Insert order"), link("Release Key")}}
	w.Connections["Insert order"] = map[string]any{"main": []any{respond, link("Release Key")}}
	return w
}

func TestVerify(t *testing.T) {
	needStack(t)
	t.Run("generated workflows pass", func(t *testing.T) {
		for _, tc := range []struct {
			prefix string
			opts   func(generator.Options) generator.Options
		}{
			{"vf1", func(o generator.Options) generator.Options { return o }},
			{"vf2", func(o generator.Options) generator.Options { o.Hashing = generator.HashingCryptoNode; return o }},
			{"vf3", func(o generator.Options) generator.Options { o.Guard = generator.GuardLease; return o }},
			{"vf4", func(o generator.Options) generator.Options {
				o.Verify = "stripe"
				return o
			}},
			{"vf11", func(o generator.Options) generator.Options { o.Guard = generator.GuardTransactional; return o }},
			// The community node, which reserves and decides in one node.
			{"vf13", func(o generator.Options) generator.Options { o.Hashing = generator.HashingNode; return o }},
			{"vf14", func(o generator.Options) generator.Options {
				o.Hashing, o.Guard = generator.HashingNode, generator.GuardLease
				return o
			}},
		} {
			o := tc.opts(seedOptions(tc.prefix, generator.HashingCodeNode))
			r := runVerify(t, generatedWorkflow(t, o))
			if !r.OK() || len(r.Checks) != 5 {
				t.Errorf("%s (%+v): verify failed a generated workflow", tc.prefix, o)
			}
			for _, c := range r.Checks {
				// The transactional guard has no release to check: the
				// failure check says why it is not needed.
				skipped := o.Guard == generator.GuardTransactional && strings.HasPrefix(c.Name, "business step fails")
				if (c.Status != verify.Pass && !skipped) || (skipped && c.Status != verify.Skip) {
					t.Errorf("%s: %s: %s", tc.prefix, c.Name, c.Status)
				}
			}
		}
	})

	t.Run("a keysvc workflow passes against a keysvc of verify's own", func(t *testing.T) {
		ctx := context.Background()
		store, err := keysvc.OpenPG(ctx, st.BusinessDSN, keysvc.PGOptions{CreateSchema: true})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		ks := httptest.NewServer(keysvc.New(keysvc.Config{Store: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
		defer ks.Close()
		target := verifyTarget(t)
		target.KeysvcURL = ks.URL
		// The workflow of a keysvc off loopback calls it with a Bearer
		// Auth credential; verify's own keysvc has no token.
		bearer, err := api.CreateCredential(ctx, "keysvc token (e2e vf10)", "httpBearerAuth", map[string]any{"token": "verify-keysvc-has-no-token"})
		if err != nil {
			t.Fatal(err)
		}
		target.Credentials["httpBearerAuth"] = bearer
		o := seedOptions("vf10", generator.HashingKeysvc)
		o.KeysvcURL = "http://keysvc.example:8080" // as the user wrote it; verify points it at its own
		r := runVerifyOn(t, target, generatedWorkflow(t, o))
		if !r.OK() || !r.Guard.Keysvc {
			t.Error("verify failed the keysvc workflow")
		}
		for _, c := range r.Checks {
			if c.Status != verify.Pass {
				t.Errorf("%s: %s", c.Name, c.Status)
			}
		}
	})

	t.Run("the inbox receiver passes, with a stand-in for its worker", func(t *testing.T) {
		o := generator.Options{Pattern: generator.PatternInbox, WebhookPath: "vf12-inbox", WorkflowName: "e2e vf12", VerifyCredential: inboxSecretCredential, InboxOptions: generator.InboxOptions{DBSchema: "vf12", OutboxURL: "http://127.0.0.1:9/outbox"}}
		files, err := generator.Files(o)
		if err != nil {
			t.Fatal(err)
		}
		execSQL(t, string(files["schema.sql"]))
		var w n8napi.Workflow
		if err := json.Unmarshal(files[generator.FileReceiver], &w); err != nil {
			t.Fatal(err)
		}
		r := runVerify(t, w)
		if !r.OK() || r.Guard.Reserve != "Save Receipt" {
			t.Errorf("verify failed the inbox receiver (reservation found: %q)", r.Guard.Reserve)
		}
		for _, c := range r.Checks {
			standIn := strings.HasPrefix(c.Name, "business step fails") && c.Status == verify.Skip
			if c.Status != verify.Pass && !standIn {
				t.Errorf("%s: %s", c.Name, c.Status)
			}
		}
		var receipts int
		if err := st.Business.QueryRow(context.Background(), "SELECT count(*) FROM vf12.inbox_events").Scan(&receipts); err != nil {
			t.Fatal(err)
		}
		// seed 2 + no id 1 + concurrent 1 + distinct 5 + the failure check's 0
		if receipts != 9 {
			t.Errorf("vf12.inbox_events holds %d receipts, want 9 (one per distinct event)", receipts)
		}
	})

	t.Run("the community node's inbox receiver passes; with the account read from a header each delivery changes, it fails", func(t *testing.T) {
		o := generator.Options{Pattern: generator.PatternInbox, Hashing: generator.HashingNode, WebhookPath: "vf13-inbox", WorkflowName: "e2e vf13",
			VerifyCredential: inboxSecretCredential, InboxOptions: generator.InboxOptions{DBSchema: "vf13", OutboxURL: "http://127.0.0.1:9/outbox"}}
		files, err := generator.Files(o)
		if err != nil {
			t.Fatal(err)
		}
		execSQL(t, string(files["schema.sql"]))
		var w n8napi.Workflow
		if err := json.Unmarshal(files[generator.FileReceiver], &w); err != nil {
			t.Fatal(err)
		}
		r := runVerify(t, w)
		if !r.OK() || r.Guard.Reserve != generator.NodeSaveReceipt {
			t.Errorf("verify failed the community node's inbox receiver (reservation found: %q)", r.Guard.Reserve)
		}
		for _, c := range r.Checks {
			standIn := strings.HasPrefix(c.Name, "business step fails") && c.Status == verify.Skip
			if c.Status != verify.Pass && !standIn {
				t.Errorf("%s: %s", c.Name, c.Status)
			}
		}
		// A broken copy: the receipt's account read from the signature
		// header, which every delivery changes, so a replay is saved anew.
		params := wfNode(t, w, generator.NodeSaveReceipt)["parameters"].(map[string]any)
		receipt, _ := params["receipt"].(map[string]any)
		if receipt == nil {
			receipt = map[string]any{}
			params["receipt"] = receipt
		}
		receipt["accountHeader"] = "stripe-signature"
		w.Name += " (account from the signature header)"
		if r := runVerify(t, w); r.OK() {
			t.Error("verify passed the receiver that saves a replay anew")
		}
	})

	t.Run("a user's edit passes", func(t *testing.T) {
		var calls atomic.Int64
		crm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			w.WriteHeader(http.StatusCreated)
		}))
		defer crm.Close()
		r := runVerify(t, userEdit(t, "vf5", crm.URL))
		if !r.OK() {
			t.Error("verify failed the user's edit")
		}
		if r.Guard.Decision != "Is it new?" || r.Guard.FirstBusiness() != "Prepare order" {
			t.Errorf("guard found: decision %q, first business %q", r.Guard.Decision, r.Guard.FirstBusiness())
		}
		// seed 2 + no id 1 + concurrent 1 + distinct 5 + the retry after the repair 1
		if n := calls.Load(); n != 10 {
			t.Errorf("the CRM was called %d times, want 10 (once per new event)", n)
		}
		if n := countRows(t, "vf5_orders"); n != 10 {
			t.Errorf("vf5_orders has %d rows, want 10", n)
		}
	})

	t.Run("broken workflows fail", func(t *testing.T) {
		for _, tc := range []struct {
			prefix, check string
			breakIt       func(w *n8napi.Workflow)
		}{
			{"vf6", "replay", func(w *n8napi.Workflow) { // the "Row Returned?" condition inverted
				cond := wfNode(t, *w, generator.NodeLeaseAcquired)["parameters"].(map[string]any)["conditions"].(map[string]any)["conditions"].([]any)[0].(map[string]any)
				cond["operator"] = map[string]any{"type": "string", "operation": "notEquals"}
			}},
			{"vf7", "replay", func(w *n8napi.Workflow) { // the duplicate branch wired into the business step
				outputs(*w, generator.NodeLeaseAcquired)[1] = link(businessStep(*w))
			}},
			{"vf8", "business step fails", func(w *n8napi.Workflow) { // the error output disconnected
				outputs(*w, businessStep(*w))[1] = []any{}
			}},
		} {
			w := generatedWorkflow(t, seedOptions(tc.prefix, generator.HashingCodeNode))
			tc.breakIt(&w)
			r := runVerify(t, w)
			if r.OK() {
				t.Errorf("%s: verify passed a broken workflow", tc.prefix)
			}
			for _, c := range r.Checks {
				if strings.HasPrefix(c.Name, tc.check) && (c.Status != verify.Fail || !strings.Contains(c.Seen, "execution ")) {
					t.Errorf("%s: check %q: %s, want FAIL naming the executions", tc.prefix, c.Name, c.Status)
				}
			}
		}

		w := generatedWorkflow(t, seedOptions("vf9", generator.HashingCodeNode))
		wfNode(t, w, generator.NodeAcquireLease)["parameters"].(map[string]any)["query"] = "SELECT key, 'acquired' AS outcome FROM vf9_processed_events WHERE key = $1"
		var notAGuard *verify.NotAGuardError
		if _, err := verify.Run(context.Background(), verifyTarget(t), w, verify.Options{}); !errors.As(err, &notAGuard) {
			t.Errorf("reservation turned into a SELECT: %v, want a NotAGuardError", err)
		}
	})
}

// The command, on its own stack, with a workflow exported from n8n as it
// is (credential ids, pinData, meta.instanceId, tags, active) and a JUnit
// report.
func TestVerifyCommandOnAnExport(t *testing.T) {
	needStack(t)
	ctx := context.Background()
	opts := seedOptions("vfx", generator.HashingCodeNode)
	d := deploy(t, opts)
	dir := t.TempDir()
	exported := filepath.Join(dir, "exported.json")
	if _, err := st.N8N(ctx, "export:workflow", "--id="+d.workflowID, "--output="+exported); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(exported)
	if err != nil {
		t.Fatal(err)
	}
	var list []map[string]any
	if err := json.Unmarshal(raw, &list); err != nil || len(list) != 1 {
		t.Fatalf("n8n's export: %v (%d workflows)", err, len(list))
	}
	w := list[0]
	w["pinData"] = map[string]any{"Webhook": []any{map[string]any{"json": map[string]any{"id": "evt_pinned"}}}}
	w["meta"] = map[string]any{"instanceId": "0123456789abcdef", "templateCredsSetupCompleted": true}
	w["tags"] = []any{map[string]any{"id": "t1", "name": "payments"}}
	w["active"] = true
	// The user's business branch calls their CRM at a URL from n8n's
	// environment: --env must reach the workflow's $env, or the call fails.
	var crmCalls atomic.Int64
	crm := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/orders" {
			crmCalls.Add(1)
		}
		rw.WriteHeader(http.StatusNoContent)
	}))
	defer crm.Close()
	insertEnvCall(t, w, generator.NodeLeaseAcquired, "Release Key")
	raw, _ = json.Marshal(list)
	if err := os.WriteFile(exported, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	business := filepath.Join(dir, "business.sql")
	if err := os.WriteFile(business, []byte("CREATE TABLE IF NOT EXISTS vfx_business_log (id bigserial PRIMARY KEY, event_key text NOT NULL, event_type text, created_at timestamptz NOT NULL DEFAULT now());"), 0o644); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "junit.xml")
	r := runIdemhook(t, "verify", "--workflow", exported, "--schema", business, "--report", report, "--concurrency", "10", "--deliveries", "5",
		"--env", "IDEMHOOK_TEST_CRM_URL="+crm.URL)
	if r.code != 0 || !strings.Contains(r.stdout, "5 checks: 5 passed, 0 failed") {
		t.Fatalf("verify on n8n's export: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if crmCalls.Load() == 0 {
		t.Errorf("the workflow never called the CRM at $env.IDEMHOOK_TEST_CRM_URL: --env did not reach it")
	}
	junit, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(junit), `tests="5" failures="0"`) || strings.Count(string(junit), "<testcase ") != 5 {
		t.Errorf("JUnit report:\n%s", junit)
	}

	if r := runIdemhook(t, "verify", "--workflow", filepath.Join(dir, "missing.json")); r.code != 2 || !strings.Contains(r.stderr, "missing.json") {
		t.Errorf("a missing file: exit %d %s", r.code, r.stderr)
	}
	inboxFiles, _ := generator.Files(generator.Options{Pattern: generator.PatternInbox})
	rf := filepath.Join(dir, "receiver.json")
	if err := os.WriteFile(rf, inboxFiles[generator.FileReceiver], 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runIdemhook(t, "verify", "--workflow", rf); r.code != 2 || !strings.Contains(r.stderr, "--schema FILE") {
		t.Errorf("the inbox receiver without its schema: exit %d %s, want 2 asking for --schema", r.code, r.stderr)
	}
}

// insertEnvCall puts an HTTP Request node to $env.IDEMHOOK_TEST_CRM_URL on
// output 0 of after (n8n's export format), before what followed it; its
// error output leads to release, as a user wires a step that may fail.
func insertEnvCall(t *testing.T, w map[string]any, after, release string) {
	t.Helper()
	conns := w["connections"].(map[string]any)
	outs := conns[after].(map[string]any)["main"].([]any)
	next := outs[0]
	outs[0] = link("Call CRM")
	conns["Call CRM"] = map[string]any{"main": []any{next, link(release)}}
	w["nodes"] = append(w["nodes"].([]any), map[string]any{
		"id": "6f1d2c3b-0000-4000-8000-00000000e4e1", "name": "Call CRM", "type": "n8n-nodes-base.httpRequest", "typeVersion": 4.2,
		"position": []any{1000, -100}, "onError": "continueErrorOutput",
		"parameters": map[string]any{"method": "POST", "url": "={{ $env.IDEMHOOK_TEST_CRM_URL }}/orders", "options": map[string]any{}},
	})
}
