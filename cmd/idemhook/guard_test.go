package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// idemhook guard writes the guarded workflow and its files beside it, and
// takes the generate options it shares by the same names.
func TestGuardWritesTheWorkflowAndItsFiles(t *testing.T) {
	out := filepath.Join(t.TempDir(), "guarded", "orders.json")
	code, stdout, stderr := runCLI("", "guard", "--workflow", "../../guard/testdata/exports/v2.1-if-two-responds.json", "--out", out,
		"--guard", "lease", "--events-table", "shop_events", "--credential", "Postgres (shop)")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, name := range []string{"orders.json", "release-on-failure-workflow.json", "cleanup-workflow.json", "schema.sql", "credentials.example.json"} {
		if b, err := os.ReadFile(filepath.Join(filepath.Dir(out), name)); err != nil || len(b) == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	guarded, _ := os.ReadFile(out)
	for _, want := range []string{"shop_events", `"Postgres (shop)"`, "Acquire Lease", `"errorWorkflow"`} {
		if !strings.Contains(string(guarded), want) {
			t.Errorf("the guarded workflow lacks %s", want)
		}
	}
	if !strings.Contains(stdout, "inserted:") || !strings.Contains(stdout, "idemhook verify --workflow "+out+" --with ") {
		t.Errorf("guard does not say what it inserted and how to verify it:\n%s", stdout)
	}
	// Options of the inbox pattern are not guard's.
	if code, _, stderr := runCLI("", "guard", "--workflow", "x.json", "--out", out, "--outbox-url", "http://x"); code != 2 || !strings.Contains(stderr, "outbox-url") {
		t.Errorf("guard --outbox-url: exit %d %s, want 2", code, stderr)
	}
}

// A workflow guard refuses exits 2, says why, and writes nothing.
func TestGuardRefusesAndWritesNothing(t *testing.T) {
	for _, c := range []struct {
		file string
		args []string
		says string
	}{
		{"refused/get-only.json", nil, "answers GET only"},
		{"refused/no-webhook.json", nil, "no Webhook trigger"},
		{"exports/two-webhooks.json", nil, "--webhook NAME"},
		{"refused/malformed.json", nil, "not JSON"},
		{"refused/dangling.json", nil, "n8n would not run it"},
		{"../../templates/workflows/default/workflow.json", nil, "already guarded"},
		{"exports/v2-respond-first.json", []string{"--hashing", "keysvc"}, "builds the key in n8n"},
	} {
		t.Run(c.file, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join("../../guard/testdata", c.file)
			code, _, stderr := runCLI("", append([]string{"guard", "--workflow", file, "--out", filepath.Join(dir, "g.json")}, c.args...)...)
			if code != 2 || !strings.Contains(stderr, c.says) || !strings.Contains(stderr, "Nothing was written") {
				t.Errorf("exit %d, stderr %q; want 2 saying %q and that nothing was written", code, stderr, c.says)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("files were written: %v", entries)
			}
		})
	}
}
