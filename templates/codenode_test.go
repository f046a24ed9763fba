package templates_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/conformance"
	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/templates"
)

type harnessCase struct {
	Script  string            `json:"script"`
	Body    string            `json:"body"`
	Headers map[string]string `json:"headers,omitempty"`
}

type harnessResult struct {
	Key    string `json:"key"`
	Source string `json:"source"`
	Error  string `json:"error"`
	// Receipt mode only.
	Account string            `json:"account"`
	Body    string            `json:"body"`
	Headers map[string]string `json:"headers"`
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
		cases[i] = harnessCase{Script: scripts[id], Body: v.BodyBase64, Headers: v.Headers}
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
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not on PATH: the Code node scripts and expressions cannot be tested (install Node.js, see README)")
	}
	cmd := exec.Command(node, append([]string{filepath.Join("testdata", harness)}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", harness, err, stderr.String())
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

// The receipt mode of the script (inbox pattern) agrees with Go on every
// vector body and on bodies that probe the account member: the key, the
// account (eventkey.Member, else the default), the exact body bytes and the
// kept headers.
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
	for _, b := range []string{
		`{"id":"evt_1","account":"acct_123"}`,
		`{"id":"evt_1","account":42}`,
		`{"id":"evt_1","account":""}`,
		`{"id":"evt_1","account":"a\u0000b"}`,
		`{"id":"evt_1","data":{"account":"acct_nested"}}`,
		`{"account":"acct_first","account":"acct_last","id":"evt_2"}`,
		`{"account":"acct_no_id"}`,
		"\xEF\xBB\xBF{\"id\":\"evt_bom\",\"account\":\"acct_bom\"}",
	} {
		bodies = append(bodies, []byte(b))
	}
	dir := t.TempDir()
	const fallback = "shop-eu"
	kept := []string{"Stripe-Signature", "Content-Type"}
	src, err := templates.ReceiptScript("stripe", "", fallback, kept)
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "receipt.js")
	if err := os.WriteFile(script, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	headers := map[string]string{"stripe-signature": "t=1,v1=ab", "content-type": "application/json", "x-other": "dropped"}
	cases := make([]harnessCase, len(bodies))
	for i, b := range bodies {
		cases[i] = harnessCase{Script: script, Body: base64.StdEncoding.EncodeToString(b), Headers: headers}
	}
	results := runHarness(t, dir, cases)
	for i, b := range bodies {
		r := results[i]
		k, _ := eventkey.Derive(b)
		account, ok := eventkey.Member(b, "account")
		if !ok {
			account = fallback
		}
		if r.Key != k.Value || r.Account != account || r.Body != cases[i].Body {
			t.Errorf("body %q: script gave key %q account %q, Go gives %q %q (body kept: %v)", b, r.Key, r.Account, k.Value, account, r.Body == cases[i].Body)
		}
		if len(r.Headers) != 2 || r.Headers["stripe-signature"] != "t=1,v1=ab" || r.Headers["content-type"] != "application/json" {
			t.Errorf("body %q: kept headers %v, want stripe-signature and content-type only", b, r.Headers)
		}
	}
}
