package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	idemdeploy "github.com/idemhook/idemhook/internal/deploy"
	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/headless"
	"github.com/idemhook/idemhook/internal/verify"
)

// idemhook guard --apply against a live n8n: the workflow is updated in
// place (the same id), the original is saved first and equals what n8n
// held, the guard is published and the probe passes; a second run is
// refused as already guarded. The editor shows the workflow before and
// after (screenshots in $IDEMHOOK_ARTIFACTS_DIR, for the README).
func TestGuardApplyLive(t *testing.T) {
	needStack(t)
	ctx := context.Background()
	id, before := deployUsersWorkflow(t, "e2e guard live", "guard-live")
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "n8n-api-key")
	os.WriteFile(keyFile, []byte(apiKey), 0o600)
	opts := []string{"--credential", credentialName, "--events-table", "g_live_events"}

	// The schema it needs, as the file mode writes it.
	exportFile := filepath.Join(dir, "export.json")
	os.WriteFile(exportFile, before, 0o600)
	if r := runIdemhook(t, append([]string{"guard", "--workflow", exportFile, "--out", filepath.Join(dir, "files", "guarded.json")}, opts...)...); r.code != 0 {
		t.Fatalf("guard --workflow: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	schema, _ := os.ReadFile(filepath.Join(dir, "files", "schema.sql"))
	execSQL(t, string(schema))
	shot(t, id, "guard-before")

	live := append([]string{"guard", "--n8n-url", st.N8NURL, "--api-key-file", keyFile, "--webhook-url", st.WebhookURL, "--workflow-id", id}, opts...)
	if r := runIdemhook(t, live...); r.code != 0 || !strings.Contains(r.stdout, "Nothing was changed") {
		t.Fatalf("guard without --apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if after, _ := api.WorkflowJSON(ctx, id); !bytes.Equal(after, before) {
		t.Fatal("guard without --apply changed the workflow")
	}
	r := runIdemhook(t, append(live, "--apply", "--backup", dir)...)
	if r.code != 0 || !strings.Contains(r.stdout, "as a duplicate without the business step") {
		t.Fatalf("guard --apply: exit %d, want 0 and a passing probe\n%s%s", r.code, r.stdout, r.stderr)
	}
	backups, _ := filepath.Glob(filepath.Join(dir, id+"-before-guard-*.json"))
	if len(backups) != 1 {
		t.Fatalf("backups %v, want one", backups)
	}
	if saved, _ := os.ReadFile(backups[0]); !bytes.Equal(saved, before) {
		t.Error("the saved original differs from what n8n held")
	}
	w, err := api.Workflow(ctx, id)
	if err != nil {
		t.Fatalf("the workflow is no longer %s: %v", id, err)
	}
	if _, err := verify.Find(w.Live()); err != nil || !w.Active {
		t.Errorf("after --apply, workflow %s (published %v): %v", id, w.Active, err)
	}
	wantAnswer(t, st.WebhookURL+"/webhook/guard-live", `{"id":"evt_guard_live_1","type":"payment_intent.succeeded","data":{"object":{"metadata":{"order_id":"o1"}}}}`, "paid")
	if got := postNoFatal(st.WebhookURL+"/webhook/guard-live", "application/json", []byte(`{"id":"evt_guard_live_1","type":"payment_intent.succeeded","data":{"object":{"metadata":{"order_id":"o1"}}}}`)); !strings.Contains(got.body, `"duplicate"`) {
		t.Errorf("the replay after --apply: %d %s, want a duplicate", got.status, got.body)
	}
	shot(t, id, "guard-after")
	if r := runIdemhook(t, append(live, "--apply", "--backup", dir)...); r.code != 2 || !strings.Contains(r.stderr, "already guarded") {
		t.Errorf("guard --apply again: exit %d, want 2, already guarded\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// deployUsersWorkflow deploys a user's export (the v2.1 If and two
// Respond nodes) as name, its Webhook on path, and returns its id and its
// export as n8n holds it; the workflow is deleted when the test ends.
func deployUsersWorkflow(t *testing.T, name, path string) (string, []byte) {
	t.Helper()
	ctx := context.Background()
	raw, err := os.ReadFile("../internal/guard/testdata/exports/v2.1-if-two-responds.json")
	if err != nil {
		t.Fatal(err)
	}
	original := renamed(t, raw, name, path)
	deployed, err := idemdeploy.Deploy(ctx, api, []idemdeploy.Workflow{{File: "users.json", Doc: original, WebhookPath: path}}, idemdeploy.Options{WebhookURL: st.WebhookURL})
	if err != nil {
		t.Fatal(err)
	}
	id := deployed[0].ID
	t.Cleanup(func() { api.DeleteWorkflow(context.Background(), id) })
	export, err := api.WorkflowJSON(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return id, export
}

// shot logs in to the suite's n8n in headless Chromium, opens workflow id
// in the editor and saves a screenshot as name.png in the artifacts
// folder; the canvas must show the workflow's last node, and each text of
// want.
func shot(t *testing.T, id, name string, want ...string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"emailOrLdapLoginId": "e2e@idemhook.local", "password": "E2e-password-1"})
	resp, err := http.Post(st.N8NURL+"/rest/login", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var auth *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "n8n-auth" {
			auth = c
		}
	}
	if auth == nil {
		t.Fatalf("n8n's login answered %d without a session cookie", resp.StatusCode)
	}
	ctx := headless.StartWindow(t, 1600, 900)
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	httpOnly := true
	if _, err := chromedp.Call(ctx, network.SetCookie, network.SetCookieParams{Name: auth.Name, Value: auth.Value, URL: st.N8NURL + "/", HTTPOnly: &httpOnly}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(st.N8NURL+"/workflow/"+id)); err != nil {
		t.Fatal(err)
	}
	w, err := api.Workflow(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range w.Nodes {
		if n["type"] != "n8n-nodes-base.stickyNote" {
			want = append(want, n["name"].(string))
			break
		}
	}
	for _, text := range want {
		var shown bool
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && !shown; time.Sleep(500 * time.Millisecond) {
			shown, _ = chromedp.Run(ctx, chromedp.Evaluate[bool](`document.body.innerText.includes(`+jsQuote(text)+`)`))
		}
		if !shown {
			png, _ := chromedp.Run(ctx, chromedp.FullScreenshot(90))
			saveArtifact(t, name+"-failed.png", png)
			t.Fatalf("the editor does not show %q of workflow %s", text, id)
		}
	}
	// Close what covers the canvas (the new owner's production
	// checklist), fit the view, and note the controls seen.
	controls, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
  for (const el of document.querySelectorAll('*')) {
    if (el.children.length < 40 && /^Production Checklist/.test((el.textContent || '').trim())) {
      const close = el.querySelector('button, [role=button], svg');
      if (close && el.getBoundingClientRect().width < 500) { close.dispatchEvent(new MouseEvent('click', { bubbles: true })); break; }
    }
  }
  const fit = [...document.querySelectorAll('button')].find(b => /fit/i.test((b.getAttribute('aria-label') || '') + (b.title || '') + (b.dataset.testid || '')));
  if (fit) fit.click();
  return [...document.querySelectorAll('button')].map(b => b.getAttribute('aria-label') || b.dataset.testid || '').filter(Boolean).join(', ');
})()`))
	t.Logf("editor controls: %s", controls)
	time.Sleep(1500 * time.Millisecond) // the canvas fits the view after it draws
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	saveArtifact(t, name+".png", png)
}

func jsQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func saveArtifact(t *testing.T, name string, b []byte) {
	t.Helper()
	path := filepath.Join(headless.Artifacts(t), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}

// The generated workflows' sticky notes show in the editor, over the nodes
// they explain (screenshots in $IDEMHOOK_ARTIFACTS_DIR).
func TestNotesInTheEditor(t *testing.T) {
	needStack(t)
	for _, c := range []struct {
		name string
		opts generator.Options
		file string
	}{
		{"notes-default", seedOptions("notes", generator.HashingCodeNode), generator.FileWorkflow},
		{"notes-inbox-receiver", inboxOptions("nt", "http://127.0.0.1:9/v1/operations"), generator.FileReceiver},
	} {
		t.Run(c.name, func(t *testing.T) {
			var id string
			if c.opts.Pattern == generator.PatternInbox {
				id = deployInbox(t, c.opts, nil).ids[c.file]
			} else {
				id = deploy(t, c.opts).workflowID
			}
			shot(t, id, c.name, "Setup")
		})
	}
}
