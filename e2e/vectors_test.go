package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/conformance"
	"github.com/idemhook/idemhook/internal/generator"
)

// Every vector of the shared conformance file, delivered to the real n8n
// workflow: the key n8n stored (and answered) equals the spec's key. JSON
// texts go as application/json, forms under their multipart content type;
// everything else as application/octet-stream, because n8n answers 422 to
// invalid JSON labelled as JSON.
func TestConformanceVectorsInN8N(t *testing.T) {
	needStack(t)
	testVectors(t, seedOptions("s4", generator.HashingCodeNode), func(conformance.Vector) bool { return true })
}

// The provider-preset vectors, through one real workflow per preset and
// scope, generated with --preset/--scope.
func TestPresetVectorsInN8N(t *testing.T) {
	needStack(t)
	testPresetVectors(t, func(_ *testing.T, i int) generator.Options {
		return seedOptions(fmt.Sprintf("p%d", i), generator.HashingCodeNode)
	})
}

// testPresetVectors delivers each preset's vectors to a workflow of its own,
// one per preset and scope, made by options (in the scope's subtest t; i
// numbers the workflows) with that preset and scope.
func testPresetVectors(t *testing.T, options func(t *testing.T, i int) generator.Options) {
	t.Helper()
	vectors, err := conformance.Vectors()
	if err != nil {
		t.Fatal(err)
	}
	type group struct{ preset, scope string }
	var order []group
	seen := map[group]bool{}
	for _, v := range vectors {
		g := group{v.Preset, v.Scope}
		if v.Preset == "" || v.Error != "" || seen[g] {
			continue // the generator refuses an invalid scope before n8n sees it
		}
		seen[g] = true
		order = append(order, g)
	}
	for i, g := range order {
		t.Run(g.preset+"/"+g.scope, func(t *testing.T) {
			opts := options(t, i)
			opts.Preset, opts.Scope = g.preset, g.scope
			testVectors(t, opts, func(v conformance.Vector) bool { return v.Preset == g.preset && v.Scope == g.scope })
		})
	}
}

func testVectors(t *testing.T, opts generator.Options, deliverable func(conformance.Vector) bool) {
	d := deploy(t, opts)
	vectors, err := conformance.Vectors()
	if err != nil {
		t.Fatal(err)
	}
	agree, tried := 0, 0
	for _, v := range vectors {
		if v.Preset != opts.Preset || v.Scope != opts.Scope || !deliverable(v) {
			continue
		}
		if headersUnsendable(v.Headers) {
			continue // no HTTP client sends a control or non-ASCII byte in a header
		}
		tried++
		body, err := v.Body()
		if err != nil {
			t.Fatal(err)
		}
		contentType := "application/octet-stream"
		if v.JSON {
			contentType = "application/json"
		}
		if ct, ok := v.Headers["content-type"]; ok {
			contentType = ct // a multipart form
		}
		r := post(t, d.url, contentType, body, v.Headers)
		if isSlackURLCheck(v, body) {
			// Slack's URL check is no event: every mode answers it its
			// challenge and reserves nothing (issue 61).
			if r.status != 200 || !strings.Contains(r.body, `"challenge"`) || hasKey(t, opts.EventsTable, v.Key) {
				t.Errorf("%s: got %d %s, reserved %v; want 200, the challenge echoed and nothing reserved", v.Name, r.status, r.body, hasKey(t, opts.EventsTable, v.Key))
				continue
			}
			agree++
			continue
		}
		if v.Error != "" {
			if r.status != 400 {
				t.Errorf("%s: got %d %s, want 400", v.Name, r.status, r.body)
				continue
			}
			agree++
			continue
		}
		var answer struct {
			Status string `json:"status"`
			Key    string `json:"key"`
		}
		if err := json.Unmarshal([]byte(r.body), &answer); err != nil || r.status != 200 {
			t.Errorf("%s (%s): got %d %q", v.Name, contentType, r.status, r.body)
			continue
		}
		if answer.Key != v.Key {
			t.Errorf("%s (%s): n8n derived %q, want %q", v.Name, contentType, answer.Key, v.Key)
			continue
		}
		if !hasKey(t, opts.EventsTable, v.Key) {
			t.Errorf("%s: key %q is not stored byte for byte in %s", v.Name, v.Key, opts.EventsTable)
			continue
		}
		agree++
	}
	t.Logf("n8n agrees with the spec on %d/%d delivered vectors (of %d)", agree, tried, len(vectors))
	if tried == 0 {
		t.Fatal("no vector delivered")
	}
}

// isSlackURLCheck tells a vector that is Slack's url_verification under the
// slack preset: a JSON object whose type is url_verification and whose
// challenge is a string.
func isSlackURLCheck(v conformance.Vector, body []byte) bool {
	var check struct {
		Type      string  `json:"type"`
		Challenge *string `json:"challenge"`
	}
	return v.Preset == "slack" && json.Unmarshal(body, &check) == nil && check.Type == "url_verification" && check.Challenge != nil
}

func headersUnsendable(h map[string]string) bool {
	for _, v := range h {
		if strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r >= 0x7f }) {
			return true
		}
	}
	return false
}
