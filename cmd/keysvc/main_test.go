package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	cfg, code, ok := parseConfig([]string{"--max-body", "2048"}, &stderr)
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
		if _, code, ok := parseConfig(args, &stderr); ok || code != 2 {
			t.Errorf("%v: ok=%v code=%d", args, ok, code)
		}
	}
	t.Setenv("KEYSVC_SECRET_SLACK_FILE", "/nonexistent/secret")
	var stderr bytes.Buffer
	if _, code, ok := parseConfig(nil, &stderr); ok || code != 2 || !strings.Contains(stderr.String(), "KEYSVC_SECRET_SLACK_FILE") {
		t.Errorf("missing secret file: ok=%v code=%d %s", ok, code, stderr.String())
	}
}
