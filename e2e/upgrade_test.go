package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	idemdeploy "github.com/idemhook/idemhook/internal/deploy"
)

// previousRelease holds the files the previous release's idemhook generated
// for upgradeOptions (CHANGELOG.md's 2026-12-07, commit 96ddca3: the
// at-most-once guard, then the default and named reserve), as it wrote them.
const previousRelease = "testdata/upgrade/2026-12-07"

// upgradeOptions are the generate options the previous release's files
// were generated with, as `idemhook` flags.
var upgradeOptions = []string{"--path", "upg-hook", "--name", "e2e upg", "--credential", credentialName,
	"--events-table", "upg_processed_events", "--business-table", "upg_business_log"}

// A deployment of the previous release, with events processed, upgraded in
// place by CHANGELOG.md's upgrade block run as written (check, schema,
// deploy, check): check names the old default and what changes, deploy
// replaces it, the keys reserved before the upgrade stay duplicates, and
// the new default holds its keys (a retry during a running step gets 409).
func TestUpgradeInPlace(t *testing.T) {
	needStack(t)
	ctx := context.Background()
	claimName(t, "e2e upg")
	files := map[string][]byte{}
	for _, name := range []string{"workflow.json", "cleanup-workflow.json", "schema.sql"} {
		b, err := os.ReadFile(filepath.Join(previousRelease, name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
	}
	execSQL(t, string(files["schema.sql"]))
	delete(files, "schema.sql")
	ws, err := idemdeploy.Load(files)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := idemdeploy.Deploy(ctx, api, ws, idemdeploy.Options{WebhookURL: st.WebhookURL}); err != nil {
		t.Fatalf("deploy the previous release: %v", err)
	}
	url := st.WebhookURL + "/webhook/upg-hook"
	before := []byte(`{"id":"evt_upg_before","type":"payment_intent.succeeded"}`)
	if r := post(t, url, "application/json", before, nil); r.status != 200 || !strings.Contains(r.body, `"processed"`) {
		t.Fatalf("the previous release's workflow: %d %s", r.status, r.body)
	}

	block := changelogBlock(t, "<!-- TestUpgradeInPlace runs this block as written -->")
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "idemhook"), "./cmd/idemhook")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	keyFile := filepath.Join(t.TempDir(), "n8n-api-key")
	if err := os.WriteFile(keyFile, []byte(apiKey), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := append([]string{"--n8n-url", st.N8NURL, "--api-key-file", keyFile, "--webhook-url", st.WebhookURL}, upgradeOptions...)
	tables := []string{"--events-table", "upg_processed_events", "--business-table", "upg_business_log"}
	script := "OPTS=(" + shellWords(opts) + ")\nTABLES=(" + shellWords(tables) + ")\n" + block
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "DATABASE_URL="+st.BusinessDSN)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the CHANGELOG's upgrade block failed: %v\n%s", err, out)
	}
	for _, want := range []string{
		"this is the workflow of --guard at-most-once",  // the first check names the old default
		"replaced the workflow of --guard at-most-once", // deploy says what it replaced
		"ok: 2 workflows in n8n, bound, published and live",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the upgrade's output lacks %q:\n%s", want, out)
		}
	}

	if r := post(t, url, "application/json", before, nil); r.status != 200 || !strings.Contains(r.body, `"duplicate"`) {
		t.Errorf("an event processed before the upgrade, delivered again: %d %s, want 200 duplicate", r.status, r.body)
	}
	release := holdStep(t, "upg", "upg_business_log")
	after := []byte(`{"id":"evt_upg_after","type":"payment_intent.succeeded"}`)
	first := make(chan response, 1)
	go func() { first <- postNoFatal(url, "application/json", after) }()
	waitFor(t, 30*time.Second, "the new event's step to run", func() bool { return stepsRunning(t, "upg_business_log") == 1 })
	retry, err := sendWithTimeout(url, "application/json", after, nil, 10*time.Second)
	release()
	if err != nil || retry.status != 409 || retry.retryAfter == "" {
		t.Errorf("a retry while the upgraded workflow's step runs: %d %s (Retry-After %q, %v), want 409 at once, with Retry-After", retry.status, retry.body, retry.retryAfter, err)
	}
	if r := <-first; r.status != 200 || !strings.Contains(r.body, `"processed"`) {
		t.Errorf("the new event after the upgrade: %d %s, want 200 processed", r.status, r.body)
	}
	for key, want := range map[string]int{"evt:evt_upg_before": 1, "evt:evt_upg_after": 1} {
		if n, _ := businessRows(t, "upg_business_log", key); n != want {
			t.Errorf("%s: %d business rows, want %d", key, n, want)
		}
	}
}

// changelogBlock is the sh block after marker in CHANGELOG.md.
func changelogBlock(t *testing.T, marker string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), marker+"\n```sh\n")
	block, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatalf("CHANGELOG.md has no sh block after %q", marker)
	}
	return block
}

// shellWords quotes words for a bash array.
func shellWords(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(quoted, " ")
}
