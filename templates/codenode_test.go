package templates_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/conformance"
	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/internal/rules"
	"github.com/idemhook/idemhook/templates"
)

type harnessCase struct {
	Script  string            `json:"script"`
	Body    string            `json:"body"`
	Headers map[string]string `json:"headers,omitempty"`
	// Form is a multipart body as n8n parses it (see conformance.Form).
	Form *conformance.Form `json:"form,omitempty"`
}

type harnessResult struct {
	Key    string `json:"key"`
	Source string `json:"source"`
	Error  string `json:"error"`
	// Receipt mode only.
	Account   string            `json:"account"`
	EventType string            `json:"eventType"`
	Body      string            `json:"body"`
	Headers   map[string]string `json:"headers"`
}

// TestCodeNodeScriptConformance runs the Code node script, exactly as the
// generator embeds it for each preset and scope (templates.KeyScript), under
// node over every shared vector. Node is a hard requirement of the test
// suite: without it this test fails rather than skips.
func TestCodeNodeScriptConformance(t *testing.T) {
	vectors, err := conformance.Vectors()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	scripts := map[[2]string]string{}
	cases := make([]harnessCase, len(vectors))
	for i, v := range vectors {
		id := [2]string{v.Preset, v.Scope}
		if scripts[id] == "" {
			src, err := templates.KeyScript(v.Preset, v.Scope)
			if err != nil {
				t.Fatal(err)
			}
			scripts[id] = filepath.Join(dir, "script-"+string(rune('a'+len(scripts)))+".js")
			if err := os.WriteFile(scripts[id], []byte(src), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		cases[i] = harnessCase{Script: scripts[id], Body: v.BodyBase64, Headers: v.Headers, Form: v.Form}
	}
	results := runHarness(t, dir, cases)
	agree := 0
	for i, v := range vectors {
		r := results[i]
		switch v.Error {
		case "empty_body":
			if r.Key != "" || !strings.HasPrefix(r.Error, "empty body") {
				t.Errorf("%s: got %+v, want key \"\" and an empty-body error", v.Name, r)
				continue
			}
		case "invalid_scope":
			if r.Key != "" || !strings.HasPrefix(r.Error, "invalid key scope") {
				t.Errorf("%s: got %+v, want key \"\" and an invalid-scope error", v.Name, r)
				continue
			}
		default:
			if r.Key != v.Key || r.Source != v.Source || r.Error != "" {
				t.Errorf("%s: script gave %q (%s) %s, want %q (%s)", v.Name, r.Key, r.Source, r.Error, v.Key, v.Source)
				continue
			}
		}
		agree++
	}
	t.Logf("Code node script agrees with the vectors on %d/%d", agree, len(vectors))
}

func TestKeyScriptSetsPresetAndScope(t *testing.T) {
	src, err := templates.KeyScript("github", "o'neil\"s")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(src, `const PRESET = "github";`) || !strings.Contains(src, `const SCOPE = "o'neil\"s";`) {
		t.Error("KeyScript did not set the constants as JSON string literals")
	}
	if def, _ := templates.KeyScript("", ""); def != templates.CodeNodeScript {
		t.Error("KeyScript with the defaults changed the script")
	}
}

// runNode runs testdata/harness under node with args and returns what it
// printed. Node is a hard requirement of the test suite: without it the
// tests fail rather than skip.
func runNode(t *testing.T, harness string, args ...string) []byte {
	t.Helper()
	return runNodeFile(t, filepath.Join("testdata", harness), args...)
}

// runNodeFile runs the script file under node with args and returns what it
// printed.
func runNodeFile(t *testing.T, file string, args ...string) []byte {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not on PATH: the Code node scripts and expressions cannot be tested (install Node.js, see README)")
	}
	cmd := exec.Command(node, append([]string{file}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", file, err, stderr.String())
	}
	return out
}

// runHarness runs the Code node harness over cases.
func runHarness(t *testing.T, dir string, cases []harnessCase) []harnessResult {
	t.Helper()
	casesFile := filepath.Join(dir, "cases.json")
	raw, _ := json.Marshal(cases)
	if err := os.WriteFile(casesFile, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	out := runNode(t, "harness.js", casesFile)
	var results []harnessResult
	if err := json.Unmarshal(out, &results); err != nil {
		t.Fatalf("harness output: %v", err)
	}
	if len(results) != len(cases) {
		t.Fatalf("%d results for %d cases", len(results), len(cases))
	}
	return results
}

// The receipt mode of the script (inbox pattern) agrees with Go for every
// rules provider, on every vector body and on bodies and headers that probe
// where the provider keeps the type and the account: the key, the type
// (Provider.TypeOf), the account (Provider.AccountOf, else the default), the
// exact body bytes and the kept headers.
func TestReceiptScriptAgreesWithGo(t *testing.T) {
	vectors, err := conformance.Vectors()
	if err != nil {
		t.Fatal(err)
	}
	var bodies [][]byte
	for _, v := range vectors {
		if v.Preset == "" && v.Error == "" {
			b, err := v.Body()
			if err != nil {
				t.Fatal(err)
			}
			bodies = append(bodies, b)
		}
	}
	deep := strings.Repeat(`[`, 1001) + strings.Repeat(`]`, 1001)
	for _, b := range []string{
		`{"id":"evt_1","type":"invoice.paid","account":"acct_123"}`,
		`{"id":"evt_1","account":42}`,
		`{"id":"evt_1","account":""}`,
		`{"id":"evt_1","account":"a\u0000b"}`,
		`{"id":"evt_1","data":{"account":"acct_nested"}}`,
		`{"account":"acct_first","account":"acct_last","id":"evt_2"}`,
		`{"account":"acct_no_id","type":"no.id"}`,
		"\xEF\xBB\xBF{\"id\":\"evt_bom\",\"account\":\"acct_bom\",\"installation\":{\"id\":7}}",
		// GitHub's installation.id, a number, at a nested path.
		`{"action":"created","installation":{"id":12345}}`,
		`{"installation":{"id":"inst-1"}}`,
		`{"installation":{"id":1.5}}`,
		`{"installation":{"id":-1}}`,
		`{"installation":{"id":-0}}`,
		`{"installation":{"id":1e3}}`,
		`{"installation":{"id":1e400}}`,
		`{"installation":{"id":9007199254740991}}`,
		`{"installation":{"id":9007199254740992}}`,
		`{"installation":{"id":"caf\u00e9"}}`,
		`{"installation":{"id":"\ud800"}}`,
		`{"installation":{"id":""}}`,
		`{"installation":{"id":null}}`,
		`{"installation":{"id":true}}`,
		`{"installation":[{"id":1}]}`,
		`{"installation":{"id":1},"installation":{"id":2}}`,
		`[{"installation":{"id":1}}]`,
		`{"installation":{"id":3}} x`,
		`{"installation":{"id":4},"deep":` + deep + `}`,
		`{"installation":{"id":5},"type":{"name":"nested"}}`,
		"{\"installation\":{\"id\":6},\"bad\":\"\xff\"}",
	} {
		bodies = append(bodies, []byte(b))
	}
	headerSets := []map[string]string{
		{"content-type": "application/json", "x-other": "dropped"},
		{"x-shopify-topic": "orders/paid", "x-shopify-shop-domain": "shop-1.myshopify.com", "x-shopify-webhook-id": "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", "x-shopify-hmac-sha256": "c2ln"},
		{"x-shopify-topic": "", "x-shopify-shop-domain": "caf\u00e9.example", "x-shopify-webhook-id": "w-2"},
		{"x-github-event": "deployment_status", "x-github-delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958", "x-github-hook-id": "42", "x-hub-signature-256": "sha256=00"},
		{"webhook-id": "msg_2KWPBgLlAfxdpx2AI54pPJ85f1W", "webhook-timestamp": "1674087231", "webhook-signature": "v1,AAAA"},
	}
	dir := t.TempDir()
	const fallback = "shop-eu"
	var cases []harnessCase
	type want struct {
		provider string
		body     []byte
		header   http.Header
	}
	var wants []want
	for i, name := range rules.ProviderNames() {
		p, _ := rules.ProviderFor(name)
		kept := append([]string{"Content-Type"}, p.Headers()...)
		src, err := templates.ReceiptScript(templates.Receipt{
			Preset: p.Verify, DefaultAccount: fallback, Headers: kept,
			TypeHeader: p.Type.Header, TypePath: p.Type.Body, AccountHeader: p.Account.Header, AccountPath: p.Account.Body,
		})
		if err != nil {
			t.Fatal(err)
		}
		script := filepath.Join(dir, fmt.Sprintf("receipt-%d.js", i))
		if err := os.WriteFile(script, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, hs := range headerSets {
			h := http.Header{}
			for k, v := range hs {
				h.Set(k, v)
			}
			for _, b := range bodies {
				cases = append(cases, harnessCase{Script: script, Body: base64.StdEncoding.EncodeToString(b), Headers: hs})
				wants = append(wants, want{name, b, h})
			}
		}
	}
	results := runHarness(t, dir, cases)
	accounts := map[string]int{}
	for i, w := range wants {
		r := results[i]
		p, _ := rules.ProviderFor(w.provider)
		k, err := eventkey.DeriveFor(eventkey.Preset(p.Verify), w.header, w.body, "")
		if err != nil {
			t.Fatal(err)
		}
		account, ok := p.AccountOf(w.header, w.body)
		if !ok {
			account = fallback
		}
		accounts[w.provider+" "+account]++
		eventType := p.TypeOf(w.header, w.body)
		if r.Key != k.Value || r.Account != account || r.EventType != eventType || r.Body != cases[i].Body || r.Error != "" {
			t.Errorf("%s, headers %v, body %q: script gave key %q account %q type %q %s; Go gives %q %q %q (body kept: %v)",
				w.provider, cases[i].Headers, w.body, r.Key, r.Account, r.EventType, r.Error, k.Value, account, eventType, r.Body == cases[i].Body)
		}
		for h, v := range r.Headers {
			if w.header.Get(h) != v || h != strings.ToLower(h) {
				t.Errorf("%s: kept header %s: %q, the request's is %q", w.provider, h, v, w.header.Get(h))
			}
		}
		if _, kept := r.Headers["x-other"]; kept {
			t.Errorf("%s: kept x-other, which no one reads", w.provider)
		}
	}
	// The probes reach each provider's account source, not only the fallback.
	for _, a := range []string{"stripe acct_123", "shopify shop-1.myshopify.com", "github 12345", "github 9007199254740991", "github 1000", "github 0", "standardwebhooks " + fallback} {
		if accounts[a] == 0 {
			t.Errorf("no case gave the account %q; accounts: %v", a, accounts)
		}
	}
}
