package e2e

import (
	"encoding/json"
	"testing"

	"github.com/idemhook/idemhook/conformance"
	"github.com/idemhook/idemhook/generator"
)

// Every vector of the shared conformance file, delivered to the real n8n
// workflow: the key n8n stored (and answered) equals the spec's key. JSON
// texts go as application/json; everything else as application/octet-stream,
// because n8n answers 422 to invalid JSON labelled as JSON.
func TestConformanceVectorsInN8N(t *testing.T) {
	needStack(t)
	testVectors(t, seedOptions("s4", generator.HashingCodeNode), func(conformance.Vector) bool { return true })
}

func testVectors(t *testing.T, opts generator.Options, deliverable func(conformance.Vector) bool) {
	d := deploy(t, opts)
	vectors, err := conformance.Vectors()
	if err != nil {
		t.Fatal(err)
	}
	agree, tried := 0, 0
	for _, v := range vectors {
		if v.Preset != "" || !deliverable(v) {
			continue // provider presets are proved by the signature scenarios
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
		r := post(t, d.url, contentType, body, nil)
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
