package templates_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/conformance"
)

type harnessResult struct {
	Key    string `json:"key"`
	Source string `json:"source"`
	Error  string `json:"error"`
}

// TestCodeNodeScriptConformance runs templates/code-node/idempotency-key.js
// under node over every shared vector. Node is a hard requirement of the
// test suite: without it this test fails rather than skips.
func TestCodeNodeScriptConformance(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not on PATH: the Code node script cannot be tested (install Node.js, see README)")
	}
	vectors, err := conformance.Vectors()
	if err != nil {
		t.Fatal(err)
	}
	bodies := make([]string, len(vectors))
	for i, v := range vectors {
		bodies[i] = v.BodyBase64
	}
	bodiesFile := filepath.Join(t.TempDir(), "bodies.json")
	raw, _ := json.Marshal(bodies)
	if err := os.WriteFile(bodiesFile, raw, 0o600); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(node, filepath.Join("testdata", "harness.js"), filepath.Join("code-node", "idempotency-key.js"), bodiesFile)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node harness: %v\n%s", err, stderr.String())
	}
	var results []harnessResult
	if err := json.Unmarshal(out, &results); err != nil {
		t.Fatalf("harness output: %v", err)
	}
	if len(results) != len(vectors) {
		t.Fatalf("%d results for %d vectors", len(results), len(vectors))
	}
	agree := 0
	for i, v := range vectors {
		r := results[i]
		switch {
		case v.Error != "":
			if r.Key != "" || !strings.HasPrefix(r.Error, "empty body") {
				t.Errorf("%s: got %+v, want key \"\" and an empty-body error", v.Name, r)
				continue
			}
		case r.Key != v.Key || r.Source != v.Source || r.Error != "":
			t.Errorf("%s: script gave %q (%s) %s, want %q (%s)", v.Name, r.Key, r.Source, r.Error, v.Key, v.Source)
			continue
		}
		agree++
	}
	t.Logf("Code node script agrees with the vectors on %d/%d", agree, len(vectors))
}
