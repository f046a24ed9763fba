package main

import (
	"bytes"
	"encoding/base64"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/keysvc"
	"github.com/idemhook/idemhook/internal/keysvc/inbox"
	"github.com/idemhook/idemhook/signature"
)

func TestParseConfigReadsEnvironment(t *testing.T) {
	secrets := filepath.Join(t.TempDir(), "github-secrets")
	os.WriteFile(secrets, []byte("new-secret\n\nold-secret\n"), 0o600)
	t.Setenv("KEYSVC_ADDR", "127.0.0.1:9999")
	t.Setenv("KEYSVC_SECRET_STRIPE", "whsec_env")
	t.Setenv("KEYSVC_SECRET_GITHUB_FILE", secrets)
	t.Setenv("KEYSVC_TOKEN", "tok")
	t.Setenv("KEYSVC_RETENTION", "48h")
	var stderr bytes.Buffer
	cfg, code, ok := parseConfig([]string{"--max-body", "2048"}, io.Discard, &stderr)
	if !ok {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if cfg.addr != "127.0.0.1:9999" || cfg.maxBody != 2048 || cfg.token != "tok" || cfg.retention != 48*time.Hour {
		t.Errorf("config %+v", cfg)
	}
	if got := cfg.secrets[signature.ProviderStripe]; len(got) != 1 || got[0] != "whsec_env" {
		t.Errorf("stripe secrets %q", got)
	}
	if got := cfg.secrets[signature.ProviderGitHub]; strings.Join(got, ",") != "new-secret,old-secret" {
		t.Errorf("github secrets %q", got)
	}
}

func TestParseConfigRejectsBadInput(t *testing.T) {
	for _, args := range [][]string{{"--max-body", "0"}, {"--bogus"}, {"stray"}, {"--read-timeout", "soon"}} {
		var stderr bytes.Buffer
		if _, code, ok := parseConfig(args, io.Discard, &stderr); ok || code != 2 {
			t.Errorf("%v: ok=%v code=%d", args, ok, code)
		}
	}
	t.Setenv("KEYSVC_SECRET_SLACK_FILE", "/nonexistent/secret")
	var stderr bytes.Buffer
	if _, code, ok := parseConfig(nil, io.Discard, &stderr); ok || code != 2 || !strings.Contains(stderr.String(), "KEYSVC_SECRET_SLACK_FILE") {
		t.Errorf("missing secret file: ok=%v code=%d %s", ok, code, stderr.String())
	}
}

// KEYSVC_SECRET_STANDARDWEBHOOKS(_FILE) takes whpk_ public keys beside
// whsec_ secrets, one a line; a whpk_ that is not 32 bytes of base64 stops
// keysvc at start, naming the variable but not the key.
func TestParseConfigStandardWebhooksKeys(t *testing.T) {
	dir := t.TempDir()
	pub := "whpk_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))
	good := filepath.Join(dir, "keys")
	os.WriteFile(good, []byte(pub+"\n\nwhpk_"+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, 32))+"\n"), 0o600)
	t.Setenv("KEYSVC_SECRET_STANDARDWEBHOOKS", "whsec_c3ltbWV0cmlj")
	t.Setenv("KEYSVC_SECRET_STANDARDWEBHOOKS_FILE", good)
	var stderr bytes.Buffer
	cfg, code, ok := parseConfig(nil, io.Discard, &stderr)
	if !ok {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if got := cfg.secrets[signature.ProviderStandardWebhooks]; len(got) != 3 || got[0] != "whsec_c3ltbWV0cmlj" || got[1] != pub {
		t.Errorf("standardwebhooks secrets %q", got)
	}

	short := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{3}, 31))
	bad := filepath.Join(dir, "bad-keys")
	os.WriteFile(bad, []byte(pub+"\nwhpk_"+short+"\n"), 0o600)
	t.Setenv("KEYSVC_SECRET_STANDARDWEBHOOKS_FILE", bad)
	stderr.Reset()
	_, code, ok = parseConfig(nil, io.Discard, &stderr)
	if msg := stderr.String(); ok || code != 2 || !strings.Contains(msg, "KEYSVC_SECRET_STANDARDWEBHOOKS_FILE") || !strings.Contains(msg, "key 3") {
		t.Errorf("a 31-byte whpk_: ok=%v code=%d %s", ok, code, msg)
	}
	if strings.Contains(stderr.String(), short) {
		t.Errorf("the message repeats the key: %s", stderr.String())
	}
}

// A boolean environment variable that is not a boolean stops keysvc with the
// reason, as a bad duration does; it is never read as false.
func TestParseConfigRejectsANonBooleanCreateSchema(t *testing.T) {
	t.Setenv("KEYSVC_CREATE_SCHEMA", "maybe")
	var stderr bytes.Buffer
	if _, code, ok := parseConfig(nil, io.Discard, &stderr); ok || code != 2 || !strings.Contains(stderr.String(), "KEYSVC_CREATE_SCHEMA") {
		t.Errorf("KEYSVC_CREATE_SCHEMA=maybe: ok=%v code=%d %s", ok, code, stderr.String())
	}
}

// The inbox needs PostgreSQL and a valid endpoints file; either problem
// stops keysvc at start with the reason.
func TestParseConfigInbox(t *testing.T) {
	file := filepath.Join(t.TempDir(), "endpoints.json")
	os.WriteFile(file, []byte(`{"endpoints":[{"name":"stripe","provider":"stripe","target":"http://n8n:5678/webhook/x"}]}`), 0o600)
	var stderr bytes.Buffer
	if _, code, ok := parseConfig([]string{"--endpoints", file}, io.Discard, &stderr); ok || code != 2 || !strings.Contains(stderr.String(), "DATABASE_URL") {
		t.Errorf("inbox without DATABASE_URL: ok=%v code=%d %s", ok, code, stderr.String())
	}
	t.Setenv("DATABASE_URL", "postgres://x@127.0.0.1/db")
	stderr.Reset()
	if _, code, ok := parseConfig([]string{"--endpoints", file}, io.Discard, &stderr); ok || code != 2 || !strings.Contains(stderr.String(), "KEYSVC_SECRET_STRIPE") {
		t.Errorf("inbox without its signing secret: ok=%v code=%d %s", ok, code, stderr.String())
	}
	t.Setenv("KEYSVC_SECRET_STRIPE", "whsec_x")
	stderr.Reset()
	cfg, code, ok := parseConfig([]string{"--endpoints", file, "--inbox-schema", "payments", "--create-schema"}, io.Discard, &stderr)
	if !ok || len(cfg.endpoints) != 1 || cfg.inboxOpts.Schema != "payments" || !cfg.inboxOpts.CreateSchema {
		t.Errorf("a valid inbox: ok=%v code=%d %+v %s", ok, code, cfg.inboxOpts, stderr.String())
	}
}

// --help prints the usage once, on stdout, and exits 0; a bad flag prints
// the reason on stderr and exits 2.
// The help names every field of an endpoint the --endpoints file may
// hold (inbox.Endpoint's JSON names).
func TestHelpNamesEveryEndpointField(t *testing.T) {
	var stdout bytes.Buffer
	parseConfig([]string{"--help"}, &stdout, io.Discard)
	fields := reflect.TypeFor[inbox.Endpoint]()
	for i := range fields.NumField() {
		name, _, _ := strings.Cut(fields.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" && !strings.Contains(stdout.String(), `"`+name+`"`) {
			t.Errorf("keysvc --help does not name the endpoint field %q", name)
		}
	}
}

// --help names every scope a tokens file line may give, and the line's
// fields (issue 61: it said "reserve, read or admin" after guard was
// added); docs/keysvc.md's scope table has a row for each.
func TestHelpNamesEveryTokenScope(t *testing.T) {
	var stdout bytes.Buffer
	parseConfig([]string{"--help"}, &stdout, io.Discard)
	_, usage, _ := strings.Cut(stdout.String(), "-tokens-file")
	usage, _, _ = strings.Cut(usage, "\n  -")
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "keysvc.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, scope := range keysvc.Scopes {
		if !strings.Contains(usage, string(scope)) {
			t.Errorf("keysvc --help's -tokens-file does not name the %s scope: %q", scope, usage)
		}
		if !strings.Contains(string(doc), "| `"+string(scope)+"` |") {
			t.Errorf("docs/keysvc.md's scope table has no row for %s", scope)
		}
	}
	if !strings.Contains(usage, "[key-prefix] [provider=NAME]") {
		t.Errorf("keysvc --help's -tokens-file does not give a line's fields: %q", usage)
	}
}

func TestHelpGoesToStdout(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if _, code, ok := parseConfig([]string{"--help"}, &stdout, &stderr); ok || code != 0 {
		t.Fatalf("--help: ok=%v code=%d", ok, code)
	}
	if strings.Count(stdout.String(), "Usage: keysvc") != 1 || stderr.Len() != 0 {
		t.Errorf("--help printed %q on stdout and %q on stderr; want the usage once on stdout", stdout.String(), stderr.String())
	}
	stdout.Reset()
	if _, code, _ := parseConfig([]string{"--bogus"}, &stdout, &stderr); code != 2 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "bogus") {
		t.Errorf("--bogus: code %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

// keysvc reads durations as idemhook does (30d), says a flag mistake in
// one line with where the help is, prints its version, and its help says
// where the endpoints file's fields are described.
func TestOneCommandLineGrammar(t *testing.T) {
	cfg, code, ok := parseConfig([]string{"--retention", "30d", "--read-timeout", "90s"}, io.Discard, io.Discard)
	if !ok || cfg.retention != 30*24*time.Hour || cfg.readTimeout != 90*time.Second {
		t.Fatalf("--retention 30d --read-timeout 90s: exit %d, retention %v, read timeout %v", code, cfg.retention, cfg.readTimeout)
	}
	t.Setenv("KEYSVC_RETENTION", "7d")
	if cfg, _, ok := parseConfig(nil, io.Discard, io.Discard); !ok || cfg.retention != 7*24*time.Hour {
		t.Errorf("KEYSVC_RETENTION=7d: %v", cfg.retention)
	}
	var stderr bytes.Buffer
	if _, code, _ := parseConfig([]string{"--bogus"}, io.Discard, &stderr); code != 2 || strings.Count(strings.TrimSpace(stderr.String()), "\n") != 1 ||
		!strings.Contains(stderr.String(), "run 'keysvc --help'") {
		t.Errorf("a bad flag: exit %d, %q; want 2 and two lines", code, stderr.String())
	}
	var stdout bytes.Buffer
	if _, code, ok := parseConfig([]string{"--version"}, &stdout, io.Discard); ok || code != 0 || !strings.HasPrefix(stdout.String(), "keysvc ") {
		t.Errorf("--version: exit %d, %q", code, stdout.String())
	}
	stdout.Reset()
	parseConfig([]string{"--help"}, &stdout, io.Discard)
	for _, want := range []string{"target_token_env", "max_attempts", "concurrency", "keysvc-endpoints.example.json", "-retention DURATION"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("keysvc --help does not mention %s", want)
		}
	}
	// The placeholder names the value after the flag; in the text it reads
	// as a word, not as a label.
	if strings.Contains(stdout.String(), "DURATION:") {
		t.Errorf("keysvc --help labels a description with its placeholder:\n%s", stdout.String())
	}
}

// The console's flags and the inbox's rescue delay: each read as given,
// and a mistake stops keysvc with the reason.
func TestParseConfigConsole(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		env   map[string]string
		ok    bool
		want  string // in stderr when !ok
		check func(config) bool
	}{
		{"defaults", nil, nil, true, "", func(c config) bool {
			return c.consoleBodies && c.patternSchema == "" && c.inboxOpts.RescueAfter == 15*time.Second
		}},
		{"bodies hidden", []string{"--console-bodies=false"}, nil, true, "", func(c config) bool { return !c.consoleBodies }},
		{"bodies hidden by the environment", nil, map[string]string{"KEYSVC_CONSOLE_BODIES": "false"}, true, "", func(c config) bool { return !c.consoleBodies }},
		{"bodies: not a boolean", nil, map[string]string{"KEYSVC_CONSOLE_BODIES": "maybe"}, false, "KEYSVC_CONSOLE_BODIES", nil},
		{"a pattern schema", []string{"--pattern-schema", "payments"}, map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1/db"}, true, "",
			func(c config) bool { return c.patternSchema == "payments" }},
		{"a pattern schema without PostgreSQL", []string{"--pattern-schema", "payments"}, nil, false, "DATABASE_URL", nil},
		{"a rescue delay", []string{"--inbox-rescue-after", "30s"}, nil, true, "", func(c config) bool { return c.inboxOpts.RescueAfter == 30*time.Second }},
		{"a rescue delay that is no duration", nil, map[string]string{"KEYSVC_INBOX_RESCUE_AFTER": "soon"}, false, "KEYSVC_INBOX_RESCUE_AFTER", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("DATABASE_URL", "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var stderr bytes.Buffer
			cfg, code, ok := parseConfig(tc.args, io.Discard, &stderr)
			if ok != tc.ok || (!ok && (code != 2 || !strings.Contains(stderr.String(), tc.want))) || (ok && !tc.check(cfg)) {
				t.Errorf("ok=%v code=%d %s %+v", ok, code, stderr.String(), cfg)
			}
		})
	}
}

// Every reason keysvc stops before it serves comes in one form, as a user
// starting it sees it: one plain line, "keysvc: CAUSE", the cause first,
// exit 2 for the command line or the environment, 1 when the work failed;
// never a JSON log line, never a wrong hint (issue 41).
func TestStartupErrorsAreOneLine(t *testing.T) {
	dir := t.TempDir()
	held := filepath.Join(dir, "held.db")
	_, running, _ := startKeysvcBinary(t, "--db-file", held)
	bin := keysvcBinary(t)
	for _, tc := range []struct {
		name     string
		args     []string
		env      []string
		code     int
		want     []string
		mustNot  []string
		pathOnce string
	}{
		{"an address without a port", []string{"--addr", "nonsense"}, nil, 2,
			[]string{`--addr "nonsense": want HOST:PORT`}, []string{"token"}, ""},
		{"a store in a folder that does not exist", []string{"--db-file", "/nonexistent-folder/keysvc.db"}, nil, 2,
			[]string{"the folder /nonexistent-folder does not exist"}, []string{"another keysvc"}, "/nonexistent-folder/keysvc.db"},
		{"a store another keysvc holds", []string{"--db-file", held}, nil, 1,
			[]string{"--db-file: the embedded store is locked by another process"}, nil, held},
		{"an address in use", []string{"--addr", running, "--db-file", filepath.Join(dir, "other.db")}, nil, 1,
			[]string{"--addr: listen tcp " + running + ": bind: address already in use"}, nil, ""},
		{"a PostgreSQL that does not answer", nil, []string{"DATABASE_URL=postgres://u:p@127.0.0.1:1/db"}, 1,
			[]string{"connection refused"}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if !slices.Contains(args, "--addr") {
				args = append([]string{"--addr", freeAddr(t, "127.0.0.1")}, args...)
			}
			if !slices.Contains(args, "--db-file") {
				args = append(args, "--db-file", filepath.Join(t.TempDir(), "k.db"))
			}
			cmd := exec.Command(bin, args...)
			cmd.Env = append(append(os.Environ(), "DATABASE_URL="), tc.env...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("keysvc did not stop:\n%s", stderr.String())
			}
			msg := stderr.String()
			if code := cmd.ProcessState.ExitCode(); code != tc.code || strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "keysvc: ") {
				t.Errorf("exit %d, stderr %q: want exit %d and one line \"keysvc: …\"", code, msg, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q does not say %q", msg, w)
				}
			}
			for _, w := range tc.mustNot {
				if strings.Contains(msg, w) {
					t.Errorf("%q points at %q, not the cause", msg, w)
				}
			}
			if tc.pathOnce != "" && strings.Count(msg, tc.pathOnce) != 1 {
				t.Errorf("%q names %s %d times", msg, tc.pathOnce, strings.Count(msg, tc.pathOnce))
			}
		})
	}
}
