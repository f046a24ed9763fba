package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/eventkey"
)

func runCLI(stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(context.Background(), args, stdio{in: strings.NewReader(stdin), out: &out, err: &errb})
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

func TestGenerateNodeRED(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runCLI("", "generate", "--target", "node-red", "--out", dir, "--path", "stripe", "--verify", "stripe", "--guard", "lease")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, name := range []string{"flows.json", "README.md"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || len(b) == 0 || !strings.Contains(stdout, name) {
			t.Errorf("%s: %v (output %q)", name, err, stdout)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("%d files written, want flows.json and README.md", len(entries))
	}
	if !strings.Contains(stderr, "KEYSVC_URL") {
		t.Errorf("no note on the environment: %q", stderr)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--credential", "pg"}, "--credential: n8n's"},
		{[]string{"--guard", "transactional"}, "guard mode"},
		{[]string{"--path", "Orders"}, "lower-case"},
		{[]string{"--bogus"}, "flag provided but not defined"},
		{[]string{"extra"}, "unexpected argument"},
	} {
		args := append([]string{"generate", "--target=node-red", "--out", t.TempDir()}, tc.args...)
		if code, _, stderr := runCLI("", args...); code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	if code, _, stderr := runCLI("", "generate", "--target", "zapier", "--out", t.TempDir()); code != 2 || !strings.Contains(stderr, "n8n or node-red") {
		t.Errorf("--target zapier: exit %d, %q", code, stderr)
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
		"--db-schema":            strings.Contains(string(worker), "payments.idemhook_apply_batch"),
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
		{"bad retention", []string{"generate", "--out", "x", "--retention", "soon"}, "want a duration"},
		{"bad guard", []string{"schema", "--guard", "mutex"}, "invalid guard mode"},
		{"bad pattern", []string{"schema", "--pattern", "saga"}, "invalid pattern"},
		{"bench of another pattern", []string{"bench", "--pattern", "reserve"}, "the pattern measured on its own is inbox"},
		{"bench with bad senders", []string{"bench", "--pattern", "inbox", "--senders", "1,x"}, "--senders"},
		{"bench with no events", []string{"bench", "--pattern", "inbox", "--events", "0"}, "--events must be"},
		{"bench scale with sizes out of order", []string{"bench", "--scale", "--sizes", "0,100,10"}, "--sizes"},
		{"bench scale with a bad history", []string{"bench", "--scale", "--histories", "0"}, "--histories"},
		{"bench scale with no rate", []string{"bench", "--scale", "--rate", "0"}, "--rate between"},
		{"inbox with crypto-node", []string{"generate", "--out", "x", "--pattern", "inbox", "--hashing", "crypto-node"}, "invalid hashing mode"},
		{"bad sweep", []string{"generate", "--out", "x", "--pattern", "inbox", "--sweep-every", "90m"}, "invalid sweep interval"},
		{"an inbox option with the reserve pattern", []string{"generate", "--out", "x", "--outbox-url", "https://api.example/v1/operations"}, "--outbox-url applies to --pattern inbox only"},
		{"a reserve option with the inbox pattern", []string{"generate", "--out", "x", "--pattern", "inbox", "--guard", "lease"}, "--guard applies to --pattern reserve only"},
		{"an option schema does not read", []string{"schema", "--outbox-url", "https://api.example"}, "flag provided but not defined: -outbox-url"},
		{"a bad preset for key", []string{"key", "--preset", "paypal"}, "--preset"},
		{"a bad header for key", []string{"key", "--preset", "github", "--header", "no colon"}, "want 'NAME: VALUE'"},
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
	if _, stdout, _ := runCLI("", "version", "--help"); strings.Contains(stdout, "Options:") {
		t.Errorf("version --help shows an options section: %q", stdout)
	}
}

// A mistake on the command line is one line, the error and where the help
// is, not the whole usage.
func TestFlagErrorsAreOneLine(t *testing.T) {
	code, stdout, stderr := runCLI("", "generate", "--out", "x", "--bogus")
	if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "idemhook generate: flag provided but not defined: -bogus") ||
		!strings.Contains(stderr, "run 'idemhook generate --help'") {
		t.Errorf("exit %d, stderr %q: want one line, the error and where the help is", code, stderr)
	}
}

// Each command's help lists the options it reads, once, with the same
// placeholder words, and no default said twice.
func TestHelpListsWhatEachCommandReads(t *testing.T) {
	help := func(cmd string) string {
		_, stdout, _ := runCLI("", cmd, "--help")
		return stdout
	}
	if h := help("schema"); strings.Contains(h, "-outbox-url") || strings.Contains(h, "-save-success") {
		t.Errorf("schema --help lists options it does not read:\n%s", h)
	}
	// cleanup takes deploy's options (one set serves deploy, check and
	// cleanup) and says which of them play no part.
	if h := help("cleanup"); !strings.Contains(h, "-retention") || !strings.Contains(h, "runs as deployed") {
		t.Errorf("cleanup --help does not take deploy's options or say what it does with them:\n%s", h)
	}
	for _, cmd := range []string{"generate", "deploy", "check", "up", "guard", "schema", "cleanup", "verify", "key", "planner"} {
		h := help(cmd)
		if regexpDoubled.MatchString(h) {
			t.Errorf("%s --help says a default twice:\n%s", cmd, h)
		}
		if placeholder := regexpLowerPlaceholder.FindString(h); placeholder != "" {
			t.Errorf("%s --help has a lower-case placeholder: %q", cmd, placeholder)
		}
	}
	if h := help("guard"); !strings.Contains(h, "-events-table TABLE") || strings.Contains(h, "-pattern") {
		t.Errorf("guard --help: want the generate options it shares, not --pattern:\n%s", h)
	}
}

var (
	regexpDoubled          = regexp.MustCompile(`\(default [^)]*\)[^\n]*\(default `)
	regexpLowerPlaceholder = regexp.MustCompile(`(?m)^  -[a-z-]+ [a-z]+$`)
)

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, stdout, _ := runCLI("", args...)
		if code != 0 || !strings.HasPrefix(stdout, "idemhook ") || !strings.Contains(stdout, "go1.") {
			t.Errorf("%v: exit %d, %q", args, code, stdout)
		}
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
	// A preset reads the delivery id from its header, as keysvc and the
	// planner do.
	code, stdout, _ = runCLI(`{"ref":"x"}`, "key", "--preset", "github", "--header", "X-GitHub-Delivery: 72d3162e-cc78-11e3-81ab-4c9367dc0958", "--header", "X-GitHub-Hook-ID: 42")
	if want, _ := eventkey.DeriveFor(eventkey.PresetGitHub, http.Header{"X-Github-Delivery": {"72d3162e-cc78-11e3-81ab-4c9367dc0958"}, "X-Github-Hook-Id": {"42"}}, []byte(`{"ref":"x"}`), ""); code != 0 || stdout != want.Value+"\n" {
		t.Errorf("--preset github: exit %d, %q, want %q", code, stdout, want.Value)
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

// cleanup --now takes the options deploy and check take, saying which
// change nothing (so one $OPTS serves the three commands); a bad value is
// refused as deploy refuses it.
func TestCleanupTakesDeploysOptions(t *testing.T) {
	key := filepath.Join(t.TempDir(), "key")
	os.WriteFile(key, []byte("k"), 0o600)
	code, _, stderr := runCLI("", "cleanup", "--now", "--n8n-url", "http://127.0.0.1:1", "--api-key-file", key,
		"--credential", "Postgres (shop)", "--retention", "40d", "--path", "shop/stripe", "--guard", "lease", "--credential-id", "abc")
	if code == 2 || !strings.Contains(stderr, "note: --credential, --credential-id, --guard, --path, --retention change nothing here") {
		t.Errorf("exit %d, stderr %q: want the options taken and named in one note", code, stderr)
	}
	if code, _, stderr := runCLI("", "cleanup", "--now", "--n8n-url", "http://127.0.0.1:1", "--api-key-file", key, "--retention", "soon"); code != 2 || !strings.Contains(stderr, "retention") {
		t.Errorf("a bad --retention: exit %d %q, want 2", code, stderr)
	}
	// keysvc keeps the keys: there is no cleanup workflow to run.
	if code, _, stderr := runCLI("", "cleanup", "--now", "--n8n-url", "http://127.0.0.1:1", "--api-key-file", key, "--hashing", "keysvc"); code != 2 || !strings.Contains(stderr, "keysvc keeps the keys and prunes them after its --retention") {
		t.Errorf("cleanup in keysvc mode: exit %d %q, want 2 saying keysvc prunes its keys", code, stderr)
	}
}
