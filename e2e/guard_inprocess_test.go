package e2e

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	idemdeploy "github.com/idemhook/idemhook/internal/deploy"
	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/guard"
	"github.com/idemhook/idemhook/internal/verify"
)

// guard.Live and guard.RemoveLive, the package functions behind `idemhook
// guard --workflow-id` and `--remove`, called in process on the suite's
// n8n: a dry run changes nothing; applied, the workflow is guarded in place
// and answers a replay as a duplicate; guarding it again is a
// *guard.RefusedError; removal puts back the user's nodes, and the replay
// runs the business step again (the guard is gone, not bypassed).
func TestGuardLiveAndRemoveInProcess(t *testing.T) {
	needStack(t)
	ctx := context.Background()
	const path = "guard-inprocess"
	id, before := deployUsersWorkflow(t, "e2e guard in process", path)
	opts := guard.Options{Generate: generator.Options{CredentialName: credentialName,
		ReserveOptions: generator.ReserveOptions{EventsTable: "g_inprocess_events"}}}
	res, err := guard.Export(before, opts)
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, string(res.Files[guard.FileSchema]))

	live := guard.LiveOptions{Options: opts, WorkflowID: id, BackupDir: t.TempDir(), Deploy: idemdeploy.Options{WebhookURL: st.WebhookURL}}
	var report bytes.Buffer
	if err := guard.Live(ctx, api, live, &report); err != nil || !strings.Contains(report.String(), "Nothing was changed") {
		t.Fatalf("Live without Apply: %v\n%s", err, report.String())
	}
	if after, _ := api.WorkflowJSON(ctx, id); !bytes.Equal(after, before) {
		t.Fatal("Live without Apply changed the workflow")
	}
	live.Apply = true
	report.Reset()
	if err := guard.Live(ctx, api, live, &report); err != nil {
		t.Fatalf("Live with Apply: %v\n%s", err, report.String())
	}
	w, err := api.Workflow(ctx, id)
	if err != nil {
		t.Fatalf("the workflow is no longer %s: %v", id, err)
	}
	if _, err := verify.Find(w.Live()); err != nil || !w.Active {
		t.Fatalf("after Live, workflow %s (published %v): %v\n%s", id, w.Active, err, report.String())
	}
	event := `{"id":"evt_guard_inprocess_1","type":"payment_intent.succeeded","data":{"object":{"metadata":{"order_id":"o1"}}}}`
	wantAnswer(t, st.WebhookURL+"/webhook/"+path, event, "paid")
	if got := postNoFatal(st.WebhookURL+"/webhook/"+path, "application/json", []byte(event)); !strings.Contains(got.body, `"duplicate"`) {
		t.Errorf("the replay after Live: %d %s, want a duplicate", got.status, got.body)
	}

	var refused *guard.RefusedError
	if err := guard.Live(ctx, api, live, &report); !errors.As(err, &refused) || !strings.Contains(err.Error(), "already guarded") {
		t.Errorf("Live again: %v, want a *guard.RefusedError, already guarded", err)
	}

	report.Reset()
	remove := guard.RemoveLiveOptions{WorkflowID: id, Apply: true, BackupDir: t.TempDir(), Deploy: idemdeploy.Options{WebhookURL: st.WebhookURL}}
	if err := guard.RemoveLive(ctx, api, remove, &report); err != nil {
		t.Fatalf("RemoveLive: %v\n%s", err, report.String())
	}
	if w, err = api.Workflow(ctx, id); err != nil {
		t.Fatal(err)
	}
	var notAGuard *verify.NotAGuardError
	if _, err := verify.Find(w.Live()); !errors.As(err, &notAGuard) {
		t.Errorf("after RemoveLive, verify.Find: %v, want no guard", err)
	}
	if got, want := slices.Sorted(slices.Values(nodeNames(w))), slices.Sorted(slices.Values(nodeNames(workflowOf(t, before)))); !slices.Equal(got, want) {
		t.Errorf("after RemoveLive the nodes are %v, want the original's %v", got, want)
	}
	wantAnswer(t, st.WebhookURL+"/webhook/"+path, event, "paid")
}
