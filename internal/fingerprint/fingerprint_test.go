package fingerprint_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemhook/idemhook/internal/fingerprint"
)

// committed reads every committed template workflow.
func committed(t *testing.T) map[string]fingerprint.Workflow {
	t.Helper()
	files, err := filepath.Glob("../../templates/workflows/*/*workflow.json")
	if err != nil || len(files) < 20 {
		t.Fatalf("%d template workflows (%v)", len(files), err)
	}
	out := map[string]fingerprint.Workflow{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var w fingerprint.Workflow
		if err := json.Unmarshal(raw, &w); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[f] = w
	}
	return out
}

func clone(t *testing.T, w fingerprint.Workflow) fingerprint.Workflow {
	t.Helper()
	raw, _ := json.Marshal(w)
	var out fingerprint.Workflow
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Every generated workflow records the fingerprint of what it does.
func TestGeneratedWorkflowsRecordTheirFingerprint(t *testing.T) {
	for f, w := range committed(t) {
		got, want := fingerprint.Recorded(w), fingerprint.Of(w)
		if got == "" || got != want {
			t.Errorf("%s records fingerprint %q, its nodes give %q", f, got, want)
		}
	}
}

// What n8n, the editor or deploy change without changing what the workflow
// does leaves the fingerprint; an edit of what it does changes it.
func TestFingerprintFollowsWhatTheWorkflowDoes(t *testing.T) {
	base := committed(t)["../../templates/workflows/default/workflow.json"]
	want := fingerprint.Of(base)
	kept := map[string]func(w *fingerprint.Workflow){
		"ids, positions and credential ids assigned": func(w *fingerprint.Workflow) {
			for _, n := range w.Nodes {
				n["id"], n["position"] = "assigned", []any{7, 7}
				if c, ok := n["credentials"].(map[string]any); ok {
					for _, ref := range c {
						ref.(map[string]any)["id"] = "42"
					}
				}
			}
		},
		"a sticky note rewritten": func(w *fingerprint.Workflow) {
			for _, n := range w.Nodes {
				if n["type"] == "n8n-nodes-base.stickyNote" {
					n["parameters"].(map[string]any)["content"] = "## Mine"
				}
			}
		},
		"nodes in another order": func(w *fingerprint.Workflow) {
			w.Nodes[0], w.Nodes[len(w.Nodes)-1] = w.Nodes[len(w.Nodes)-1], w.Nodes[0]
		},
	}
	changed := map[string]func(w *fingerprint.Workflow){
		"a query edited": func(w *fingerprint.Workflow) {
			for _, n := range w.Nodes {
				if n["name"] == "Business Step (insert business_log)" {
					n["parameters"].(map[string]any)["query"] = "SELECT 1"
				}
			}
		},
		"a connection moved": func(w *fingerprint.Workflow) {
			w.Connections["Webhook"] = map[string]any{"main": []any{[]any{map[string]any{"node": "Respond 200", "type": "main", "index": 0}}}}
		},
		"an error output removed": func(w *fingerprint.Workflow) {
			for _, n := range w.Nodes {
				delete(n, "onError")
			}
		},
		"a node of the user's added": func(w *fingerprint.Workflow) {
			w.Nodes = append(w.Nodes, map[string]any{"name": "Slack", "type": "n8n-nodes-base.slack", "parameters": map[string]any{}})
		},
		"a setting changed": func(w *fingerprint.Workflow) { w.Settings["executionOrder"] = "v0" },
	}
	for name, edit := range kept {
		w := clone(t, base)
		edit(&w)
		if got := fingerprint.Of(w); got != want {
			t.Errorf("%s: fingerprint %s, want it kept (%s)", name, got, want)
		}
	}
	for name, edit := range changed {
		w := clone(t, base)
		edit(&w)
		if got := fingerprint.Of(w); got == want {
			t.Errorf("%s: fingerprint kept (%s)", name, got)
		}
	}
}
