package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	buildCLI    sync.Once
	cliBin      string
	cliBuildErr error
)

// TestMain removes the binary idemhookBin built.
func TestMain(m *testing.M) {
	code := m.Run()
	if cliBin != "" {
		os.RemoveAll(filepath.Dir(cliBin))
	}
	os.Exit(code)
}

// idemhookBin builds idemhook once for the package's tests that run it as
// a user does.
func idemhookBin(t *testing.T) string {
	t.Helper()
	buildCLI.Do(func() {
		dir, err := os.MkdirTemp("", "idemhook-cli-test-")
		if err != nil {
			cliBuildErr = err
			return
		}
		cliBin = filepath.Join(dir, "idemhook")
		if out, err := exec.Command("go", "build", "-o", cliBin, ".").CombinedOutput(); err != nil {
			cliBuildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if cliBuildErr != nil {
		t.Fatal(cliBuildErr)
	}
	return cliBin
}

// result is what a user sees of one run of the binary.
type result struct {
	code           int
	stdout, stderr string
}

// idemhook runs the binary in dir with args.
func idemhook(t *testing.T, dir string, args ...string) result {
	t.Helper()
	cmd := exec.Command(idemhookBin(t), args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}

// The CLI's errors follow one rule (docs/cli.md), through the binary as a
// user runs it: one line on stderr, "idemhook COMMAND: CAUSE", the cause
// first (cause is a piece of it), nothing on stdout; exit 2 for a usage
// error, 1 for a failure. The cases of issue 41 first, then one mistake of
// each command.
func TestErrorsFollowOneRule(t *testing.T) {
	dir := t.TempDir()
	body := filepath.Join(dir, "body.json")
	os.WriteFile(body, []byte(`{"id":"evt_1"}`), 0o644)
	os.Mkdir(filepath.Join(dir, "bodies"), 0o755)
	existing := filepath.Join(dir, "effects.yaml")
	os.WriteFile(existing, []byte("version: 1\n"), 0o644)
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		prefix string // what the line starts with after "idemhook "
		cause  string
		not    string // a wrong cause the line must not point at
	}{
		// Values accepted, then silently replaced.
		{"--retention 0", []string{"generate", "--out", "o", "--retention", "0"}, 2, "generate: ", `invalid value "0" for flag -retention: empty or zero would mean the default`, ""},
		{"--retention 0s", []string{"generate", "--out", "o", "--retention", "0s"}, 2, "generate: ", `invalid value "0s" for flag -retention`, ""},
		{`--credential ""`, []string{"generate", "--out", "o", "--credential", ""}, 2, "generate: ", `invalid value "" for flag -credential: empty or zero would mean the default`, ""},
		{"key --header without --preset", []string{"key", "--header", "X-GitHub-Delivery: abc", "body.json"}, 2, "key: ",
			`--header "X-GitHub-Delivery: abc": the default key reads only Content-Type (for a multipart form), not X-Github-Delivery; --preset github reads it`, ""},
		// Help and typos.
		{"a command's typo", []string{"generat"}, 2, ": ", `unknown command "generat": did you mean generate?`, ""},
		{"-v", []string{"-v"}, 2, ": ", `unknown command "-v": did you mean --version?`, ""},
		{"a flag's typo", []string{"generate", "--out", "o", "--retension", "3d"}, 2, "generate: ", "flag provided but not defined: -retension: did you mean --retention?", ""},
		{"a rules command's typo", []string{"rules", "tset"}, 2, "rules: ", `unknown command "tset": did you mean test?`, ""},
		{"version extra", []string{"version", "extra"}, 2, "version: ", `unexpected argument "extra"`, ""},
		{"rules schema extra", []string{"rules", "schema", "extra"}, 2, "rules schema: ", `unexpected argument "extra"`, ""},
		{"help of two commands", []string{"help", "generate", "key"}, 2, "help: ", "give one command", ""},
		// Errors that pointed at the wrong cause.
		{"key --scope without --preset", []string{"key", "--scope", "foo", "body.json"}, 2, "key: ", `--scope "foo": invalid key scope: the default key (the body's id, or its hash) takes no scope`, "body.json"},
		{"key of a folder", []string{"key", "bodies"}, 2, "key: ", "bodies is a folder: give the file of one body", "read bodies"},
		{"key of a missing file", []string{"key", "missing.json"}, 2, "key: ", "open missing.json: no such file or directory", ""},
		// One mistake of each command.
		{"schema", []string{"schema", "extra"}, 2, "schema: ", `unexpected argument "extra"`, ""},
		{"planner", []string{"planner"}, 2, "planner: ", "--out DIR is required", ""},
		{"deploy", []string{"deploy", "--n8n-url", ""}, 2, "deploy: ", "--n8n-url is required", ""},
		{"check", []string{"check", "--n8n-url", "http://127.0.0.1:1", "--api-key-file", "missing-key"}, 2, "check: ", "--api-key-file: open missing-key: no such file", ""},
		{"cleanup", []string{"cleanup"}, 2, "cleanup: ", "--now is required", ""},
		{"up", []string{"up", "extra"}, 2, "up: ", `unexpected argument "extra"`, ""},
		{"verify", []string{"verify"}, 2, "verify: ", "--workflow FILE is required", ""},
		{"guard", []string{"guard", "--workflow", "missing.json", "--out", "g.json"}, 2, "guard: ", "open missing.json: no such file", ""},
		{"bench", []string{"bench", "--pattern", "saga"}, 2, "bench: ", `--pattern "saga": the pattern measured on its own is inbox`, ""},
		{"rules init", []string{"rules", "init", "--preset", "stripe-orders", "--out", "effects.yaml"}, 2, "rules init: ", "--out effects.yaml exists", ""},
		{"rules check", []string{"rules", "check", "--rules", "missing.yaml"}, 2, "rules check: ", `rules "missing.yaml" is neither a preset`, ""},
		{"rules test", []string{"rules", "test", "--rules", "stripe-orders"}, 2, "rules test: ", "give --rules RULES and one folder of samples", ""},
		{"generate, a failure", []string{"generate", "--out", "body.json/o"}, 1, "generate: ", "mkdir body.json: not a directory", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := idemhook(t, dir, tc.args...)
			want := "idemhook " + tc.prefix + tc.cause
			if tc.prefix == ": " {
				want = "idemhook: " + tc.cause
			}
			if r.code != tc.code || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, want) || r.stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q\nwant exit %d and one line that starts %q", r.code, r.stdout, r.stderr, tc.code, want)
			}
			if tc.not != "" && strings.Contains(r.stderr, tc.not) {
				t.Errorf("%q points at %q", r.stderr, tc.not)
			}
		})
	}
}

// Help where a user asks for it: `help COMMAND` is the command's help,
// `rules schema --help` (and -h) is its help, and guard's help lists only
// the modes guard takes.
func TestHelpWhereAsked(t *testing.T) {
	dir := t.TempDir()
	r := idemhook(t, dir, "help", "generate")
	if want := idemhook(t, dir, "generate", "--help"); r.code != 0 || r.stdout != want.stdout || !strings.HasPrefix(r.stdout, "Usage: idemhook generate") {
		t.Errorf("help generate: exit %d, %q; want generate's help", r.code, r.stdout)
	}
	if r := idemhook(t, dir, "help", "rules"); r.code != 0 || !strings.Contains(r.stdout, "idemhook rules schema") {
		t.Errorf("help rules: exit %d, %q", r.code, r.stdout)
	}
	for _, flag := range []string{"--help", "-h"} {
		if r := idemhook(t, dir, "rules", "schema", flag); r.code != 0 || !strings.HasPrefix(r.stdout, "Usage: idemhook rules schema") || r.stderr != "" {
			t.Errorf("rules schema %s: exit %d, stdout %q, stderr %q", flag, r.code, r.stdout, r.stderr)
		}
	}
	if r := idemhook(t, dir, "rules", "schema"); r.code != 0 || !strings.Contains(r.stdout, `"title": "idemhook effect rules"`) {
		t.Errorf("rules schema: exit %d", r.code)
	}
	help := idemhook(t, dir, "guard", "--help").stdout
	for _, flag := range []string{"guard", "hashing", "verify"} {
		i := strings.Index(help, "\n  -"+flag+" ")
		if i < 0 {
			t.Fatalf("guard --help has no --%s:\n%s", flag, help)
		}
		line, _, _ := strings.Cut(help[i+1:], "\n  -")
		for _, refused := range []string{"transactional", "keysvc or", "keysvc (", ", keysvc", "standardwebhooks"} {
			if strings.Contains(line, refused) {
				t.Errorf("guard --help offers %q, which guard refuses:\n%s", refused, line)
			}
		}
	}
}

// guard never writes over the user's copy: an --out that is the input is
// refused even with --force; an --out that exists is refused unless
// --force, which replaces it. Before issue 41, `--out my.json` of
// `--workflow my.json` replaced the original and exited 0.
func TestGuardKeepsTheInput(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("../../internal/guard/testdata/exports/v2-respond-first.json")
	if err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(dir, "my.json")
	os.WriteFile(mine, src, 0o644)
	for _, args := range [][]string{{"--out", "my.json"}, {"--out", "my.json", "--force"}, {"--out", "./sub/../my.json"}} {
		r := idemhook(t, dir, append([]string{"guard", "--workflow", "my.json"}, args...)...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, "idemhook guard: --out ") || !strings.Contains(r.stderr, "is the file you gave as input") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, %q; want 2 and one line saying it is the input", args, r.code, r.stderr)
		}
		if b, _ := os.ReadFile(mine); !bytes.Equal(b, src) {
			t.Fatalf("%v changed the input", args)
		}
	}
	if r := idemhook(t, dir, "guard", "--remove", "--workflow", "my.json", "--out", "my.json"); r.code != 2 || !strings.Contains(r.stderr, "is the file you gave as input") {
		t.Errorf("--remove onto its input: exit %d, %q", r.code, r.stderr)
	}
	os.Mkdir(filepath.Join(dir, "out"), 0o755)
	other := filepath.Join(dir, "out", "guarded.json")
	os.WriteFile(other, []byte("an older file"), 0o644)
	r := idemhook(t, dir, "guard", "--workflow", "my.json", "--out", "out/guarded.json")
	if b, _ := os.ReadFile(other); r.code != 2 || !strings.Contains(r.stderr, "--out out/guarded.json exists: give another file, or --force to replace it") || string(b) != "an older file" {
		t.Errorf("an existing --out: exit %d, %q, the file now %d bytes", r.code, r.stderr, len(b))
	}
	r = idemhook(t, dir, "guard", "--workflow", "my.json", "--out", "out/guarded.json", "--force")
	if b, _ := os.ReadFile(other); r.code != 0 || !bytes.Contains(b, []byte("Reserve Key")) {
		t.Errorf("--force: exit %d, %s; the file: %.80q", r.code, r.stderr, b)
	}
}

// rules check says what it did not check: a column that does not exist
// passes it (schema.sql or rules test finds it), and the output says so,
// so that "ok" is not read as "checked" (issue 41).
func TestRulesCheckSaysWhatItDidNotCheck(t *testing.T) {
	dir := t.TempDir()
	if r := idemhook(t, dir, "rules", "init", "--preset", "stripe-orders", "--out", "effects.yaml"); r.code != 0 {
		t.Fatalf("rules init: %d %s", r.code, r.stderr)
	}
	file := filepath.Join(dir, "effects.yaml")
	b, _ := os.ReadFile(file)
	typo := bytes.Replace(b, []byte("column: amount,"), []byte("column: amout,"), 1)
	if bytes.Equal(typo, b) {
		t.Fatal("the preset no longer names column amount")
	}
	os.WriteFile(file, typo, 0o644)
	r := idemhook(t, dir, "rules", "check", "--rules", "effects.yaml")
	if r.code != 0 || !strings.Contains(r.stdout, "not checked: that its tables and columns exist") || !strings.Contains(r.stdout, "schema.sql checks when applied, and rules test") {
		t.Errorf("exit %d, %q: want 0 and a line saying the columns were not checked", r.code, r.stdout)
	}
}

// A YAML mistake is reported on its own line, not where the mapping it is
// in began (issue 41: line 6 was reported as line 3).
func TestYAMLErrorLine(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "effects.yaml"), []byte("version: 1\nprovider: stripe\nentities:\n  order:\n    table: orders\n   key: id\n    state: state\n"), 0o644)
	r := idemhook(t, dir, "rules", "check", "--rules", "effects.yaml")
	if r.code != 2 || !strings.HasPrefix(r.stderr, "idemhook rules check: effects.yaml:6: not valid YAML") {
		t.Errorf("exit %d, %q; want 2 and effects.yaml:6", r.code, r.stderr)
	}
}
