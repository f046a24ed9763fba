package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/eventkey"
)

func runCLI(stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestGenerateWritesTheFourFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := runCLI("", "generate", "--out", dir, "--path", "stripe", "--guard", "lease", "--retention", "45d")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, name := range []string{"workflow.json", "cleanup-workflow.json", "schema.sql", "credentials.example.json"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || len(b) == 0 {
			t.Errorf("%s: %v", name, err)
		}
		if !strings.Contains(stdout, name) {
			t.Errorf("output does not mention %s: %q", name, stdout)
		}
	}
	cleanup, _ := os.ReadFile(filepath.Join(dir, "cleanup-workflow.json"))
	if !strings.Contains(string(cleanup), "interval '45 days'") {
		t.Error("--retention 45d did not reach the cleanup workflow")
	}
}

func TestGenerateInbox(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runCLI("", "generate", "--out", dir, "--pattern", "inbox", "--events", "payment_intent.succeeded,charge.refunded",
		"--db-schema", "payments", "--outbox-url", "https://fulfil.example/v1/operations", "--defer-limit", "2d", "--sweep-every", "5m")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, name := range []string{"receiver-workflow.json", "worker-workflow.json", "recoverer-workflow.json", "outbox-workflow.json",
		"cleanup-workflow.json", "schema.sql", "credentials.example.json"} {
		if !strings.Contains(stdout, name) {
			t.Errorf("output does not mention %s: %q", name, stdout)
		}
	}
	receiver, _ := os.ReadFile(filepath.Join(dir, "receiver-workflow.json"))
	worker, _ := os.ReadFile(filepath.Join(dir, "worker-workflow.json"))
	outbox, _ := os.ReadFile(filepath.Join(dir, "outbox-workflow.json"))
	for what, ok := range map[string]bool{
		"the inbox webhook path": strings.Contains(string(receiver), `"path": "webhook-inbox"`),
		"--events":               strings.Contains(string(worker), `payment_intent.succeeded,charge.refunded`),
		"--defer-limit":          strings.Contains(string(worker), "interval '172800 seconds'"),
		"--db-schema":            strings.Contains(string(worker), "payments.idemhook_apply_event"),
		"--outbox-url":           strings.Contains(string(outbox), "https://fulfil.example/v1/operations"),
		"--sweep-every":          strings.Contains(string(outbox), `"minutesInterval": 5`),
		"stripe verification":    strings.Contains(string(receiver), "Compute Signature"),
	} {
		if !ok {
			t.Errorf("%s did not reach the generated files", what)
		}
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "Usage"},
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"unknown flag", []string{"generate", "--out", "x", "--bogus"}, "flag provided but not defined"},
		{"missing --out", []string{"generate"}, "--out DIR is required"},
		{"bad table", []string{"generate", "--out", "x", "--events-table", "a;b"}, "invalid events table"},
		{"bad retention", []string{"schema", "--retention", "soon"}, "want a duration"},
		{"bad guard", []string{"schema", "--guard", "mutex"}, "invalid guard mode"},
		{"bad pattern", []string{"schema", "--pattern", "saga"}, "invalid pattern"},
		{"inbox with crypto-node", []string{"generate", "--out", "x", "--pattern", "inbox", "--hashing", "crypto-node"}, "invalid hashing mode"},
		{"bad sweep", []string{"schema", "--pattern", "inbox", "--sweep-every", "90m"}, "invalid sweep interval"},
		{"stray argument", []string{"schema", "extra"}, "unexpected argument"},
		{"two files", []string{"key", "a", "b"}, "at most one FILE"},
		{"missing file", []string{"key", "/nonexistent/body.json"}, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI("", tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, tc.want)
			}
		})
	}
}

func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"generate", "--help"}, {"schema", "-h"}, {"key", "--help"}, {"planner", "--help"}, {"bench", "--help"}} {
		code, stdout, stderr := runCLI("", args...)
		// Once, on stdout (issue 12: it was printed on both).
		if code != 0 || strings.Count(stdout, "Usage") != 1 || stderr != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	// A command without options shows no empty "Options:" section.
	if _, stdout, _ := runCLI("", "key", "--help"); strings.Contains(stdout, "Options:") {
		t.Errorf("key --help shows an options section: %q", stdout)
	}
}

func TestKey(t *testing.T) {
	code, stdout, _ := runCLI(`{"id":"evt_123"}`, "key")
	if code != 0 || stdout != "evt:evt_123\n" {
		t.Errorf("stdin: exit %d, %q", code, stdout)
	}
	file := filepath.Join(t.TempDir(), "body.bin")
	body := []byte("not json \xff")
	os.WriteFile(file, body, 0o600)
	code, stdout, _ = runCLI("", "key", file)
	if code != 0 || stdout != eventkey.HashKey(body)+"\n" {
		t.Errorf("file: exit %d, %q", code, stdout)
	}
	code, stdout, stderr := runCLI("", "key")
	if code != 2 || stdout != "" || !strings.Contains(stderr, "empty body") {
		t.Errorf("empty stdin: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestSchemaPrintsSQL(t *testing.T) {
	code, stdout, _ := runCLI("", "schema", "--events-table", "hooks.events")
	if code != 0 || !strings.Contains(stdout, "CREATE TABLE IF NOT EXISTS hooks.events (") {
		t.Errorf("exit %d, %q", code, stdout)
	}
}

func TestPlannerWritesThePage(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runCLI("", "planner", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, name := range []string{"index.html", "planner.js", "planner.css", "wasm_exec.js", "idemhook.wasm.js"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || len(b) == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	if !strings.Contains(stdout, "index.html") {
		t.Errorf("output does not say what to open: %q", stdout)
	}
	if code, _, stderr := runCLI("", "planner"); code != 2 || !strings.Contains(stderr, "--out DIR is required") {
		t.Errorf("planner without --out: exit %d, %q", code, stderr)
	}
}
