package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// idemhook guard writes the guarded workflow and its files beside it, and
// takes the generate options it shares by the same names.
func TestGuardWritesTheWorkflowAndItsFiles(t *testing.T) {
	out := filepath.Join(t.TempDir(), "guarded", "orders.json")
	code, stdout, stderr := runCLI("", "guard", "--workflow", "../../internal/guard/testdata/exports/v2.1-if-two-responds.json", "--out", out,
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
	for _, want := range []string{"shop_events", `"Postgres (shop)"`, "Reserve Key (lease)", `"errorWorkflow"`} {
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
		{"../../../templates/workflows/default/workflow.json", nil, "already guarded"},
		{"exports/v2-respond-first.json", []string{"--hashing", "keysvc"}, "builds the key in n8n"},
	} {
		t.Run(c.file, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join("../../internal/guard/testdata", c.file)
			code, _, stderr := runCLI("", append([]string{"guard", "--workflow", file, "--out", filepath.Join(dir, "g.json")}, c.args...)...)
			if code != 2 || !strings.Contains(stderr, c.says) || !strings.Contains(stderr, "nothing was written") {
				t.Errorf("exit %d, stderr %q; want 2 saying %q and that nothing was written", code, stderr, c.says)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("files were written: %v", entries)
			}
		})
	}
}

// A workflow that names an error workflow needs its export; with it, guard
// writes that workflow (the release in front of its nodes) beside the
// guarded one, and --remove gives both back.
func TestGuardWithTheUsersErrorWorkflow(t *testing.T) {
	dir := t.TempDir()
	orders, alerts := "../../internal/guard/testdata/error-workflow/orders.json", "../../internal/guard/testdata/error-workflow/alerts.json"
	out := filepath.Join(dir, "guarded", "orders.json")
	code, _, stderr := runCLI("", "guard", "--workflow", orders, "--out", out)
	if code != 2 || !strings.Contains(stderr, "--error-workflow FILE") || !strings.Contains(stderr, "nothing was written") {
		t.Errorf("without --error-workflow: exit %d %s", code, stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files were written: %v", entries)
	}
	code, stdout, stderr := runCLI("", "guard", "--workflow", orders, "--error-workflow", alerts, "--out", out, "--events-table", "orders_events")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	errorWF, _ := os.ReadFile(filepath.Join(dir, "guarded", "release-on-failure-workflow.json"))
	for _, want := range []string{`"AlertsWf0000001"`, "Release idemhook keys (orders_events)", "Record Alert"} {
		if !strings.Contains(string(errorWF), want) {
			t.Errorf("the error workflow written lacks %s", want)
		}
	}
	if !strings.Contains(stdout, "your error workflow AlertsWf0000001") {
		t.Errorf("guard does not say it keeps the user's error workflow:\n%s", stdout)
	}

	back := filepath.Join(dir, "back", "orders.json")
	code, stdout, stderr = runCLI("", "guard", "--remove", "--workflow", out, "--error-workflow", filepath.Join(dir, "guarded", "release-on-failure-workflow.json"), "--out", back)
	if code != 0 {
		t.Fatalf("--remove: exit %d: %s", code, stderr)
	}
	for original, removed := range map[string]string{orders: back, alerts: filepath.Join(dir, "back", "error-workflow.json")} {
		want, _ := os.ReadFile(original)
		got, _ := os.ReadFile(removed)
		var w, g any
		if json.Unmarshal(want, &w) != nil || json.Unmarshal(got, &g) != nil || !reflect.DeepEqual(w, g) {
			t.Errorf("%s after --remove differs from %s:\n%s", removed, original, got)
		}
	}
	if !strings.Contains(stdout, "the key's release is taken out") {
		t.Errorf("--remove does not say what it did:\n%s", stdout)
	}
	if code, _, stderr := runCLI("", "guard", "--remove", "--workflow", orders, "--out", filepath.Join(dir, "x.json")); code != 2 || !strings.Contains(stderr, "no idemhook guard record") {
		t.Errorf("--remove of an unguarded workflow: exit %d %s", code, stderr)
	}
}
