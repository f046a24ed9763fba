package templates_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/signature"
	"github.com/idemhook/idemhook/signature/provider"
	"github.com/idemhook/idemhook/templates"
)

// The Code node's key presets (PRESET_RULES in code-node/key-spec.js, which
// the community node runs too) are package provider's, header names in
// lower case as n8n gives them: the script is evaluated under node and its
// table compared with the one table.
func TestKeySpecPresetsAreTheProviders(t *testing.T) {
	type rule struct {
		Prefix      string   `json:"prefix"`
		Headers     []string `json:"headers,omitempty"`
		BodyMember  string   `json:"bodyMember,omitempty"`
		ScopeHeader string   `json:"scopeHeader,omitempty"`
	}
	want := map[string]rule{}
	for _, p := range provider.All {
		k := p.Key
		if k.Prefix == "" {
			continue
		}
		r := rule{Prefix: k.Prefix, BodyMember: k.IDMember, ScopeHeader: strings.ToLower(k.ScopeHeader)}
		for _, h := range k.IDHeaders {
			r.Headers = append(r.Headers, strings.ToLower(h))
		}
		want[p.Name] = r
	}
	script := filepath.Join(t.TempDir(), "preset-rules.js")
	src := "const crypto = require('crypto');\n" + templates.KeySpecScript + "\nprocess.stdout.write(JSON.stringify(PRESET_RULES));\n"
	if err := os.WriteFile(script, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	var got map[string]rule
	out := runNodeFile(t, script)
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("PRESET_RULES %s: %v", out, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("key-spec.js PRESET_RULES disagree with package provider:\n got %+v\nwant %+v", got, want)
	}
}

// The workflow's signature check (code-node/signature-prepare.js) checks
// every provider the table says a workflow can: a delivery that package
// signature signs passes it, HMAC encoded as the table says; and it refuses
// to check those the table leaves to keysvc.
func TestSignaturePrepareKnowsTheProviders(t *testing.T) {
	now := time.Now()
	body := []byte(`{"id":"evt_providers","type":"ping"}`)
	var cases []sigCase
	for _, p := range provider.All {
		const secret = "whsec_c2VjcmV0LWZvci1wcm92aWRlcnM=" // Standard Webhooks' form; the others take it as it is
		signed, err := signature.Provider(p.Name).Sign(signature.Unsigned{Body: body, Secret: secret, Timestamp: now, ID: "msg_providers"})
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		headers := map[string]string{}
		for k, v := range signed {
			headers[strings.ToLower(k)] = v // as n8n gives them
		}
		cases = append(cases, sigCase{name: p.Name, provider: signature.Provider(p.Name), secret: secret, body: body, headers: headers, now: now})
	}
	results := runSignatureCheck(t, cases, prepareScript)
	for i, p := range provider.All {
		got := results[i]
		switch {
		case p.WorkflowCannot != "" && got.Code != "provider_not_configured":
			t.Errorf("%s: the workflow's check says valid=%v code=%q; the table leaves it to keysvc", p.Name, got.Valid, got.Code)
		case p.WorkflowCannot == "" && !got.Valid:
			t.Errorf("%s: the workflow's check refuses a signed delivery (code %q)", p.Name, got.Code)
		}
	}
}
