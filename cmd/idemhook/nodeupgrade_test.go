package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/communitynode"
)

// node-upgrade writes the upgraded workflow and says what it moved; a file
// that is no workflow is a usage error and writes nothing. (The rewrite
// itself: internal/communitynode's TestUpgradeWorkflowMovesTheNodesOf010;
// in real n8n: e2e's TestNodeUpgradeOf010.)
func TestNodeUpgrade(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "exported.json"), filepath.Join(dir, "upgraded.json")
	os.WriteFile(in, []byte(`{"name":"w","nodes":[{"name":"Idempotency Guard","type":"`+communitynode.KeysvcType+`","typeVersion":1,"parameters":{"operation":"reserve"},"credentials":{"postgres":{"id":null,"name":"pg"}}}],"connections":{}}`), 0o600)
	code, stdout, stderr := runCLI("", "node-upgrade", "--workflow", in, "--out", out)
	if code != 0 || !strings.Contains(stdout, communitynode.PostgresType) {
		t.Fatalf("exit %d: %s %s", code, stdout, stderr)
	}
	if b, err := os.ReadFile(out); err != nil || !strings.Contains(string(b), `"type": "`+communitynode.PostgresType+`"`) {
		t.Errorf("%s: %v %s", out, err, b)
	}
	code, stdout, _ = runCLI("", "node-upgrade", "--workflow", out, "--out", out)
	if code != 0 || !strings.Contains(stdout, "no node of n8n-nodes-idemhook 0.1.0") {
		t.Errorf("a second run: exit %d, %q", code, stdout)
	}
	os.WriteFile(in, []byte(`{"nodes":"none"}`), 0o600)
	missing := filepath.Join(dir, "never.json")
	if code, _, stderr := runCLI("", "node-upgrade", "--workflow", in, "--out", missing); code != 2 || !strings.Contains(stderr, "not an n8n workflow") {
		t.Errorf("not a workflow: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("a refused input wrote its --out")
	}
	if code, _, _ := runCLI("", "node-upgrade", "--workflow", in); code != 2 {
		t.Errorf("without --out: exit %d, want 2", code)
	}
}
