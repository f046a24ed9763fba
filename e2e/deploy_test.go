package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/n8napi"
	"github.com/idemhook/idemhook/internal/sandbox"
)

var (
	idemhookOnce sync.Once
	idemhookBin  string
	idemhookErr  error
)

// idemhookBinary builds cmd/idemhook once: the tests run it as a user does.
func idemhookBinary(t *testing.T) string {
	t.Helper()
	idemhookOnce.Do(func() {
		dir, err := os.MkdirTemp("", "idemhook-e2e-bin-")
		if err != nil {
			idemhookErr = err
			return
		}
		idemhookBin = filepath.Join(dir, "idemhook")
		if out, err := exec.Command("go", "build", "-o", idemhookBin, "../cmd/idemhook").CombinedOutput(); err != nil {
			idemhookErr = &buildError{out: string(out), err: err}
		}
	})
	if idemhookErr != nil {
		t.Fatal(idemhookErr)
	}
	return idemhookBin
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string {
	return "go build ./cmd/idemhook: " + e.err.Error() + "\n" + e.out
}

type cliResult struct {
	stdout, stderr string
	code           int
}

func runIdemhook(t *testing.T, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(idemhookBinary(t), args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := cliResult{stdout: out.String(), stderr: errOut.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// Deploy and check through n8n's public API, on an n8n of their own (it
// starts with no workflow and no credential): a first deploy, a second one
// with changed options (updated in place, still live), a path another
// workflow serves, two credentials of one name, check on a healthy and on
// broken instances, and the cleanup run on demand while n8n runs.
func TestDeployThroughTheAPI(t *testing.T) {
	needStack(t)
	ctx := context.Background()
	s := useStack(t, sandbox.Options{})
	key := apiKey
	keyFile := filepath.Join(t.TempDir(), "n8n-api-key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// useStack imported a Postgres credential and the runner workflow
	// through the CLI; this n8n must start empty.
	wipe(t, api)
	cred, err := api.CreateCredential(ctx, credentialName, "postgres", s.PostgresCredentialData())
	if err != nil {
		t.Fatal(err)
	}
	remote := []string{"--n8n-url", s.N8NURL, "--api-key-file", keyFile, "--credential", credentialName}
	opts := generator.Options{CredentialName: credentialName}
	for _, guard := range []generator.Guard{generator.GuardAtMostOnce, generator.GuardLease} {
		opts.Guard = guard
		sql, err := generator.Schema(opts)
		if err != nil {
			t.Fatal(err)
		}
		execSQL(t, sql)
	}
	url := s.WebhookURL + "/webhook/" + generator.DefaultWebhookPath

	t.Run("first deploy", func(t *testing.T) {
		r := runIdemhook(t, append([]string{"deploy"}, remote...)...)
		if r.code != 0 || !strings.Contains(r.stdout, url) {
			t.Fatalf("deploy: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if strings.Contains(r.stdout+r.stderr, key) {
			t.Error("deploy printed the API key")
		}
		wantWorkflows(t, api, 2)
		wantAnswer(t, url, `{"id":"evt_dep_1"}`, "processed")
		wantAnswer(t, url, `{"id":"evt_dep_1"}`, "duplicate")
	})

	t.Run("again unchanged", func(t *testing.T) {
		before := workflowNamed(t, api, "Idempotent Webhook (idemhook)")
		r := runIdemhook(t, append([]string{"deploy"}, remote...)...)
		if r.code != 0 {
			t.Fatalf("deploy: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout, "unchanged") || strings.Contains(r.stdout, "previous one") {
			t.Errorf("deploy of unchanged files does not say unchanged, or warns of a previous version\n%s", r.stdout)
		}
		if after := workflowNamed(t, api, "Idempotent Webhook (idemhook)"); after.VersionID != before.VersionID {
			t.Errorf("deploy of unchanged files saved version %s over %s", after.VersionID, before.VersionID)
		}
	})

	t.Run("check sees a workflow that is not the options'", func(t *testing.T) {
		if r := runIdemhook(t, append([]string{"check"}, remote...)...); r.code != 0 || !strings.Contains(r.stdout, "ok:") {
			t.Fatalf("check with the options deployed: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--verify", "stripe"}, "no signature check in front of the key"},
			{[]string{"--hashing", "keysvc"}, generator.NodeKeysvcReserve + ": no such node"},
			{[]string{"--guard", "at-most-once"}, "this is the workflow of --guard lease, not of these options (nothing edited)"},
			{[]string{"--events-table", "other_events"}, generator.NodeAcquireLease + ": query differs"},
			{[]string{"--path", "other"}, `no workflow serves webhook path "other"`},
		} {
			r := runIdemhook(t, append(append([]string{"check"}, c.args...), remote...)...)
			if r.code != 1 || !strings.Contains(r.stdout, c.want) {
				t.Errorf("check %v against the default workflow: exit %d, want 1 and %q\n%s%s", c.args, r.code, c.want, r.stdout, r.stderr)
			}
			if c.args[0] == "--path" && strings.Contains(r.stdout, "does not answer as a registered webhook") {
				t.Errorf("check --path other blames the publication\n%s", r.stdout)
			}
		}
	})

	t.Run("again with changed options", func(t *testing.T) {
		before := workflowIDs(t, api)
		r := runIdemhook(t, append([]string{"deploy", "--guard", "at-most-once"}, remote...)...)
		if r.code != 0 {
			t.Fatalf("deploy: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if after := workflowIDs(t, api); strings.Join(after, ",") != strings.Join(before, ",") {
			t.Errorf("workflows before %v, after %v: want the same ones updated in place", before, after)
		}
		if !strings.Contains(r.stdout, "deliveries can still run the\nprevious one") {
			t.Errorf("deploy of an update without --probe does not say that the previous version can answer for a moment\n%s", r.stdout)
		}
		if !strings.Contains(r.stdout, "replaced the workflow of --guard lease") {
			t.Errorf("deploy --guard at-most-once over the default does not say it replaced the lease's workflow\n%s", r.stdout)
		}
		// n8n applies the publication in the background; check --probe
		// waits until deliveries run the new version.
		if r := runIdemhook(t, append([]string{"check", "--guard", "at-most-once", "--probe"}, remote...)...); r.code != 0 {
			t.Fatalf("check --probe after the update: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		wantAnswer(t, url, `{"id":"evt_dep_2"}`, "processed")
		wantAnswer(t, url, `{"id":"evt_dep_2"}`, "duplicate")
		if r := runIdemhook(t, append([]string{"check", "--guard", "at-most-once"}, remote...)...); r.code != 0 || !strings.Contains(r.stdout, "ok:") {
			t.Errorf("check on a healthy instance: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("probe", func(t *testing.T) {
		business := countRows(t, "business_log")
		r := runIdemhook(t, append([]string{"deploy", "--guard", "lease", "--probe"}, remote...)...)
		if r.code != 0 || !strings.Contains(r.stdout, "probe evt:idemhook-probe:") || !strings.Contains(r.stdout, "without the business step") {
			t.Fatalf("deploy --probe: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		probeKey := strings.Fields(r.stdout[strings.Index(r.stdout, "probe evt:"):])[1]
		probeKey = strings.TrimSuffix(probeKey, ":")
		var state string
		st.Business.QueryRow(ctx, "SELECT state FROM processed_events WHERE key = $1", probeKey).Scan(&state)
		if state != "done" || countRows(t, "business_log") != business {
			t.Errorf("after the probe: its key %q in state %q, business_log %d rows (was %d): want done and no business row", probeKey, state, countRows(t, "business_log"), business)
		}
		check := append([]string{"check", "--guard", "lease", "--probe"}, remote...)

		// The events table missing where the credential points.
		execSQL(t, "ALTER TABLE processed_events RENAME TO processed_events_away")
		r = runIdemhook(t, check...)
		execSQL(t, "ALTER TABLE processed_events_away RENAME TO processed_events")
		if r.code != 1 || !strings.Contains(r.stdout, `relation "processed_events" does not exist`) {
			t.Errorf("check --probe without the events table: exit %d, want 1 with n8n's message\n%s%s", r.code, r.stdout, r.stderr)
		}

		// The key node failing as it does on an n8n that does not allow
		// require('crypto'): a module the task runner refuses.
		republish(t, workflowNamed(t, api, "Idempotent Webhook (idemhook)").ID, func(w *n8napi.Workflow) {
			for _, n := range w.Nodes {
				if n["name"] == generator.NodeBuildKey {
					n["parameters"].(map[string]any)["jsCode"] = "const c = require('idemhook-not-an-allowed-module');\nreturn [];"
				}
			}
		})
		r = runIdemhook(t, check...)
		if r.code != 1 || !strings.Contains(r.stdout, `node "`+generator.NodeBuildKey+`" failed`) {
			t.Errorf("check --probe with the key node failing: exit %d, want 1 naming the node\n%s%s", r.code, r.stdout, r.stderr)
		}
		if r := runIdemhook(t, append([]string{"deploy", "--guard", "lease"}, remote...)...); r.code != 0 {
			t.Fatalf("deploy to repair: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if r := runIdemhook(t, append([]string{"check", "--verify", "stripe", "--probe"}, remote...)...); r.code != 2 || !strings.Contains(r.stderr, "cannot sign") {
			t.Errorf("--probe on a workflow that checks signatures: exit %d, want 2 saying why\n%s", r.code, r.stderr)
		}
	})

	t.Run("probe waits while n8n applies the publication", func(t *testing.T) {
		w := workflowNamed(t, api, "Idempotent Webhook (idemhook)")
		// n8n's publication outbox writes the row that says which version
		// deliveries run last; holding it keeps the previous version live
		// for as long as the test wants, as a slow n8n would.
		tx, err := s.N8NDB.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		var previous string
		if err := tx.QueryRow(ctx, `SELECT "publishedVersionId" FROM workflow_published_version WHERE "workflowId" = $1 FOR UPDATE`, w.ID).Scan(&previous); err != nil {
			t.Fatal(err)
		}
		// A new version that works as the previous one: a node moved.
		version := republish(t, w.ID, func(w *n8napi.Workflow) { w.Nodes[0]["position"] = []any{-400, -400} })
		before, err := api.Executions(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}

		cmd := exec.Command(idemhookBinary(t), append([]string{"check", "--guard", "lease", "--probe"}, remote...)...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()

		// Release the row once a probe ran the previous version.
		seen := map[n8napi.ID]bool{}
		for _, e := range before {
			seen[e.ID] = true
		}
		for ranPrevious, deadline := false, time.Now().Add(60*time.Second); !ranPrevious; time.Sleep(300 * time.Millisecond) {
			execs, err := api.Executions(ctx, w.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range execs {
				if seen[e.ID] || e.Status == "new" || e.Status == "running" {
					continue
				}
				seen[e.ID] = true
				run, err := api.ExecutionRun(ctx, e.ID)
				if err != nil {
					t.Fatal(err)
				}
				ranPrevious = ranPrevious || run.WorkflowVersionID == previous
			}
			if !ranPrevious && time.Now().After(deadline) {
				t.Fatalf("no probe ran version %s within 60 s", previous)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-exited; err != nil {
			t.Fatalf("check --probe while n8n applied the publication: %v\n%s%s", err, out.String(), errOut.String())
		}
		if !strings.Contains(errOut.String(), "ran version "+previous+"; n8n has not put "+version+" live yet, probing again") ||
			!strings.Contains(out.String(), "of version "+version+")") {
			t.Errorf("check --probe did not wait for version %s to answer\n%s%s", version, out.String(), errOut.String())
		}
	})

	t.Run("path served by another workflow", func(t *testing.T) {
		r := runIdemhook(t, append([]string{"deploy", "--name", "Someone else's workflow"}, remote...)...)
		if r.code == 0 || !strings.Contains(r.stderr, `is already served by workflow "Idempotent Webhook (idemhook)"`) {
			t.Errorf("deploy on a taken path: exit %d, want non-zero naming the holder\n%s%s", r.code, r.stdout, r.stderr)
		}
	})

	// This n8n has the community node as a package only: a workflow that
	// names it as loaded from N8N_CUSTOM_EXTENSIONS is refused with how to
	// fix it.
	t.Run("the community node under a name n8n does not know", func(t *testing.T) {
		r := runIdemhook(t, append([]string{"deploy", "--hashing", "node", "--node-type", "CUSTOM.idempotencyGuardPostgres", "--path", "dep-custom-node", "--name", "e2e deploy custom node"}, remote...)...)
		if r.code != 1 || !strings.Contains(r.stderr, "n8n has no node CUSTOM.idempotencyGuardPostgres") || !strings.Contains(r.stderr, "package n8n-nodes-idemhook-postgres") ||
			!strings.Contains(r.stderr, "--node-type n8n-nodes-idemhook-postgres.idempotencyGuardPostgres") {
			t.Errorf("deploy with a node type n8n lacks: exit %d, want 1 naming the package and --node-type\n%s%s", r.code, r.stdout, r.stderr)
		}
		for _, w := range []string{"e2e deploy custom node", "e2e deploy custom node – cleanup"} {
			if id := workflowIDNamed(t, api, w); id != "" {
				if err := api.DeleteWorkflow(ctx, id); err != nil {
					t.Logf("delete %s: %v", w, err)
				}
			}
		}
	})

	t.Run("check finds what is broken", func(t *testing.T) {
		ours := workflowNamed(t, api, "Idempotent Webhook (idemhook)")
		other := workflowNamed(t, api, "Someone else's workflow")
		if err := api.Unpublish(ctx, ours.ID); err != nil {
			t.Fatal(err)
		}
		check := append([]string{"check", "--guard", "lease"}, remote...)
		if r := runIdemhook(t, check...); r.code != 1 || !strings.Contains(r.stdout, "is not published") {
			t.Errorf("check with the workflow unpublished: exit %d, want 1 and \"is not published\"\n%s%s", r.code, r.stdout, r.stderr)
		}
		if err := api.Publish(ctx, other.ID); err != nil {
			t.Fatal(err)
		}
		if r := runIdemhook(t, check...); r.code != 1 || !strings.Contains(r.stdout, `is served by workflow "Someone else's workflow"`) {
			t.Errorf("check with the path taken: exit %d, want 1 naming the other workflow\n%s%s", r.code, r.stdout, r.stderr)
		}
		if err := api.DeleteWorkflow(ctx, other.ID); err != nil {
			t.Fatal(err)
		}
		// n8n's own import binds credentials by name: with two of the same
		// name it leaves the nodes unbound, and the publish succeeds.
		second, err := api.CreateCredential(ctx, credentialName, "postgres", s.PostgresCredentialData())
		if err != nil {
			t.Fatal(err)
		}
		files, _ := generator.Files(opts)
		dir := t.TempDir()
		if err := writeFiles(dir, files); err != nil {
			t.Fatal(err)
		}
		if err := st.Deploy(ctx, filepath.Join(dir, generator.FileWorkflow)); err != nil {
			t.Fatal(err)
		}
		if err := api.DeleteWorkflow(ctx, ours.ID); err != nil {
			t.Fatal(err)
		}
		r := runIdemhook(t, check...)
		for _, want := range []string{`has no postgres credential bound`, fmt.Sprintf(`2 postgres credentials are named %q (ids `, credentialName), second.ID, cred.ID} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("check after a CLI import beside two same-name credentials: missing %q\n%s%s", want, r.stdout, r.stderr)
			}
		}
		if got := postNoFatal(url, "application/json", []byte(`{"id":"evt_dep_3"}`)); got.status != 400 || !strings.Contains(got.body, "invalid credential") {
			t.Errorf("what check warned about: a delivery got %d %s, want n8n's 400 invalid credential", got.status, got.body)
		}

		r = runIdemhook(t, append([]string{"deploy", "--guard", "lease"}, remote...)...)
		if r.code != 2 || !strings.Contains(r.stderr, cred.ID) || !strings.Contains(r.stderr, second.ID) {
			t.Errorf("deploy beside two same-name credentials: exit %d, want 2 listing both ids\n%s%s", r.code, r.stdout, r.stderr)
		}
		r = runIdemhook(t, append([]string{"deploy", "--guard", "lease", "--credential-id", cred.ID, "--probe"}, remote...)...)
		if r.code != 0 {
			t.Fatalf("deploy --credential-id: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		// The probe waited for the bound version, not the unbound one
		// that n8n kept serving while it applied the publication.
		if w := workflowNamed(t, api, "Idempotent Webhook (idemhook)"); w.ActiveVersion == nil || !strings.Contains(r.stdout, "of version "+w.ActiveVersion.VersionID+")") {
			t.Errorf("deploy --probe did not prove the published version live\n%s%s", r.stdout, r.stderr)
		}
		wantAnswer(t, url, `{"id":"evt_dep_4"}`, "processed")
		check = append([]string{"check", "--guard", "lease"}, remote...)
		if r := runIdemhook(t, check...); r.code != 1 {
			t.Errorf("check beside two same-name credentials without --credential-id: exit %d, want 1\n%s", r.code, r.stdout)
		}
		if r := runIdemhook(t, append(check, "--credential-id", cred.ID)...); r.code != 0 {
			t.Errorf("check --credential-id %s, the one deploy bound: exit %d, want 0\n%s%s", cred.ID, r.code, r.stdout, r.stderr)
		}
		if err := api.DeleteCredential(ctx, second.ID); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("cleanup now while n8n runs", func(t *testing.T) {
		execSQL(t, "INSERT INTO processed_events (key, first_seen) VALUES ('cleanup:31', now() - interval '31 days'), ('cleanup:29', now() - interval '29 days')")
		// The options deploy and check took, and a retention: cleanup takes
		// them too (a script runs the three with one $OPTS), says the ones
		// that change nothing, and runs the cleanup workflow as deployed.
		r := runIdemhook(t, append([]string{"cleanup", "--now", "--retention", "10d", "--path", generator.DefaultWebhookPath}, remote...)...)
		if r.code != 0 || !strings.Contains(r.stderr, "--credential, --path, --retention change nothing here") {
			t.Fatalf("cleanup --now with deploy's options: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if hasKey(t, "processed_events", "cleanup:31") || !hasKey(t, "processed_events", "cleanup:29") {
			t.Errorf("after cleanup --now: the 31-day-old key is still there or the 29-day-old one is gone")
		}
		for _, w := range workflowIDsAndNames(t, api) {
			if strings.Contains(w, "(temporary)") {
				t.Errorf("the temporary workflow %s is still in n8n", w)
			}
		}
	})

	t.Run("the bound credential deleted", func(t *testing.T) {
		if err := api.DeleteCredential(ctx, cred.ID); err != nil {
			t.Fatal(err)
		}
		r := runIdemhook(t, append([]string{"check", "--guard", "lease"}, remote...)...)
		if r.code != 1 || !strings.Contains(r.stdout, "which no longer exists, and no postgres credential is named") || !strings.Contains(r.stdout, "Create it") {
			t.Errorf("check with no credential of that name left: exit %d, want 1 saying to create it\n%s", r.code, r.stdout)
		}
	})
}

// republish edits workflow id as n8n holds it, saves and publishes it, and
// waits until n8n names the new version as the published one; it returns
// that version.
func republish(t *testing.T, id string, edit func(*n8napi.Workflow)) string {
	t.Helper()
	ctx := context.Background()
	w, err := api.Workflow(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	edit(&w)
	updated, err := api.UpdateWorkflow(ctx, id, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Publish(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, id, updated.VersionID)
	return updated.VersionID
}

// waitVersion waits until n8n runs version of workflow id.
func waitVersion(t *testing.T, id, version string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		w, err := api.Workflow(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if w.Active && w.ActiveVersion != nil && w.ActiveVersion.VersionID == version {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow %s: version %s not published after 30 s", id, version)
		}
	}
}

func wipe(t *testing.T, api *n8napi.Client) {
	t.Helper()
	ws, err := api.Workflows(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if err := api.DeleteWorkflow(context.Background(), w.ID); err != nil {
			t.Fatal(err)
		}
	}
	creds, err := api.Credentials(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range creds {
		if err := api.DeleteCredential(context.Background(), c.ID); err != nil {
			t.Fatal(err)
		}
	}
}

func wantAnswer(t *testing.T, url, body, status string) {
	t.Helper()
	r := postNoFatal(url, "application/json", []byte(body))
	if r.status != 200 || !strings.Contains(r.body, `"status":"`+status+`"`) {
		t.Errorf("%s: %d %s, want 200 %s", body, r.status, r.body, status)
	}
}

func workflowIDsAndNames(t *testing.T, api *n8napi.Client) []string {
	t.Helper()
	ws, err := api.Workflows(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, w := range ws {
		out = append(out, w.ID+" "+w.Name)
	}
	return out
}

func workflowIDs(t *testing.T, api *n8napi.Client) []string {
	t.Helper()
	ws, err := api.Workflows(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, w := range ws {
		out = append(out, w.ID)
	}
	return out
}

func wantWorkflows(t *testing.T, api *n8napi.Client, n int) {
	t.Helper()
	ws, err := api.Workflows(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	active := 0
	for _, w := range ws {
		if w.Active {
			active++
		}
	}
	if len(ws) != n || active != n {
		t.Errorf("n8n holds %d workflows, %d published; want %d and %d", len(ws), active, n, n)
	}
}

func workflowNamed(t *testing.T, api *n8napi.Client, name string) n8napi.Workflow {
	t.Helper()
	ws, err := api.Workflows(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.Name == name {
			return w
		}
	}
	t.Fatalf("no workflow named %q", name)
	return n8napi.Workflow{}
}

// workflowIDNamed is the id of the workflow named name, or "".
func workflowIDNamed(t *testing.T, api *n8napi.Client, name string) string {
	t.Helper()
	ws, err := api.Workflows(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.Name == name {
			return w.ID
		}
	}
	return ""
}
