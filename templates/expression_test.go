package templates_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/conformance"
	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/templates"
)

// TestCryptoIDExpressionConformance evaluates the crypto-node mode's id
// expression, as the generator embeds it, under node over every vector of the
// default spec a sender may label application/json: it must find the spec's
// id exactly when the spec does. Real n8n runs it in the e2e suite; this
// catches a broken clause in a second.
func TestCryptoIDExpressionConformance(t *testing.T) {
	vectors, err := conformance.Vectors()
	if err != nil {
		t.Fatal(err)
	}
	var cases []conformance.Vector
	var bodies []string
	for _, v := range vectors {
		if v.Preset == "" && v.JSON && v.ParsedIDAgrees() {
			cases = append(cases, v)
			bodies = append(bodies, v.BodyBase64)
		}
	}
	dir := t.TempDir()
	exprFile, casesFile := filepath.Join(dir, "expression.js"), filepath.Join(dir, "cases.json")
	raw, _ := json.Marshal(bodies)
	if err := os.WriteFile(casesFile, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exprFile, []byte(templates.CryptoIDExpression), 0o600); err != nil {
		t.Fatal(err)
	}
	out := runNode(t, "expression.js", exprFile, casesFile)
	var results []struct {
		ID    *string `json:"id"`
		Error string  `json:"error"`
	}
	if err := json.Unmarshal(out, &results); err != nil || len(results) != len(cases) {
		t.Fatalf("harness output (%d results for %d cases): %v", len(results), len(cases), err)
	}
	ids := 0
	for i, v := range cases {
		r := results[i]
		want, hasID := strings.CutPrefix(v.Key, eventkey.EventIDPrefix)
		switch {
		case r.Error != "":
			t.Errorf("%s: the expression threw: %s", v.Name, r.Error)
		case v.Source == string(eventkey.SourceEventID) && (r.ID == nil || *r.ID != want || !hasID):
			t.Errorf("%s: expression gave %v, want the id %q", v.Name, deref(r.ID), want)
		case v.Source != string(eventkey.SourceEventID) && r.ID != nil:
			t.Errorf("%s: expression gave the id %q, want null (the spec hashes this body: %s)", v.Name, *r.ID, v.Clause)
		default:
			if r.ID != nil {
				ids++
			}
		}
	}
	if ids == 0 || ids == len(cases) {
		t.Fatalf("%d of %d JSON vectors have an id: the vectors no longer exercise both answers", ids, len(cases))
	}
	t.Logf("the crypto-node id expression agrees with %d JSON vectors (%d with an id)", len(cases), ids)
}

func deref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}
