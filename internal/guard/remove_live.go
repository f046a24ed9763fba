package guard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/idemhook/idemhook/internal/deploy"
	"github.com/idemhook/idemhook/internal/n8napi"
)

// FileRemovedErrorWorkflow is the user's error workflow without the
// release, as guard --remove writes it beside the original.
const FileRemovedErrorWorkflow = "error-workflow.json"

// RemoveExport runs Remove on the export raw, saying, when it refuses,
// that nothing was written.
func RemoveExport(raw []byte, opts RemoveOptions) (*Removed, error) {
	w, err := Parse(raw)
	var removed *Removed
	if err == nil {
		removed, err = Remove(w, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("%w; nothing was written", err)
	}
	return removed, nil
}

// RemoveLiveOptions say which guarded workflow of an n8n RemoveLive takes
// the guard out of, and what it may change there.
type RemoveLiveOptions struct {
	WorkflowID string
	// Apply writes the original back in place and publishes it; without it
	// nothing in n8n changes.
	Apply     bool
	BackupDir string
	Deploy    deploy.Options
}

// RemoveLive takes the guard out of workflow o.WorkflowID in n8n and
// reports on report what it found and did: without o.Apply it says what it
// would do; with it, it saves the guarded workflow (and the error workflow
// it changes) in o.BackupDir, writes the original back in place, takes the
// release out of the user's error workflow unless another guarded workflow
// shares it, and deletes guard's own error workflow unless another
// workflow names it.
func RemoveLive(ctx context.Context, c *n8napi.Client, o RemoveLiveOptions, report io.Writer) error {
	raw, err := c.WorkflowJSON(ctx, o.WorkflowID)
	if err != nil {
		return fmt.Errorf("read workflow %s: %v", o.WorkflowID, err)
	}
	plan, err := planRemoval(ctx, c, o.WorkflowID, raw)
	if err != nil {
		return err
	}
	plan.removed.WriteSummary(report, plan.removed.ErrorWorkflow != nil)
	if plan.keepRelease != "" {
		fmt.Fprintf(report, "the release stays in error workflow %s: workflow %s reserves in %s too and shares it\n", plan.userErrors, plan.keepRelease, plan.removed.EventsTable)
	}
	if plan.deleteGuards {
		fmt.Fprintf(report, "guard's error workflow %s is named by no other workflow: it goes\n", plan.removed.GuardErrorWorkflow)
	}
	if !o.Apply {
		fmt.Fprintf(report, "\nNothing was changed. Run again with --apply to write the original back to workflow %s and publish it.\n", o.WorkflowID)
		return nil
	}
	return plan.apply(ctx, c, o, raw, report)
}

// removal is what RemoveLive will do.
type removal struct {
	removed    *Removed
	userErrors string // the user's error workflow the settings name
	errorRaw   []byte // its export as n8n held it, when the release comes out of it
	// keepRelease is the other workflow that shares the release, which
	// therefore stays; deleteGuards: guard's own error workflow goes.
	keepRelease  string
	deleteGuards bool
}

// planRemoval reads what the removal changes: the error workflow, and the
// other workflows that share it or name guard's.
func planRemoval(ctx context.Context, c *n8napi.Client, id string, raw []byte) (*removal, error) {
	w, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	table, userErrors, recorded := w.Recorded()
	if !recorded {
		_, err := RemoveExport(raw, RemoveOptions{})
		return nil, err
	}
	all, err := c.Workflows(ctx)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %v", err)
	}
	p := &removal{userErrors: userErrors}
	opts := RemoveOptions{}
	if userErrors != "" && userErrors != id {
		if p.errorRaw, err = c.WorkflowJSON(ctx, userErrors); err == nil {
			opts.ErrorWorkflow, err = Parse(p.errorRaw)
		}
		if err != nil {
			return nil, fmt.Errorf("read error workflow %s: %v", userErrors, err)
		}
		p.keepRelease = sharedRelease(all, id, userErrors, table)
		opts.KeepRelease = p.keepRelease != ""
	}
	if p.removed, err = RemoveExport(raw, opts); err != nil {
		return nil, err
	}
	p.deleteGuards = p.removed.GuardErrorWorkflow != "" && namedBy(all, id, p.removed.GuardErrorWorkflow) == ""
	return p, nil
}

// apply saves the workflows the removal changes, writes them back and
// deletes guard's error workflow when it goes.
func (p *removal) apply(ctx context.Context, c *n8napi.Client, o RemoveLiveOptions, raw []byte, report io.Writer) error {
	saved, err := saveBackup(o.BackupDir, o.WorkflowID, "before-guard-remove", raw)
	if err != nil {
		return fmt.Errorf("save the guarded workflow: %v (nothing was changed)", err)
	}
	fmt.Fprintf(report, "\nsaved the guarded workflow to %s\n", saved)
	files := map[string][]byte{"original.json": p.removed.Workflow}
	targets := map[string]string{"original.json": o.WorkflowID}
	if p.removed.ErrorWorkflow != nil {
		if saved, err = saveBackup(o.BackupDir, p.userErrors, "before-guard-remove", p.errorRaw); err != nil {
			return fmt.Errorf("save the error workflow: %v (nothing was changed)", err)
		}
		fmt.Fprintf(report, "saved error workflow %s to %s\n", p.userErrors, saved)
		files[FileRemovedErrorWorkflow] = p.removed.ErrorWorkflow
		targets[FileRemovedErrorWorkflow] = p.userErrors
	}
	ws, err := deploy.Load(files)
	if err != nil {
		return err
	}
	for i := range ws {
		ws[i].TargetID = targets[ws[i].File]
	}
	deployed, err := deploy.Deploy(ctx, c, ws, o.Deploy)
	if err != nil {
		return fmt.Errorf("%w (the guarded workflow is in %s)", err, saved)
	}
	for _, d := range deployed {
		fmt.Fprintf(report, "%-36s %s  %q\n", d.File, d.ID, d.Name)
	}
	if p.deleteGuards {
		if err := c.DeleteWorkflow(ctx, p.removed.GuardErrorWorkflow); err != nil {
			return fmt.Errorf("the original is back, but guard's error workflow %s could not be deleted: %v", p.removed.GuardErrorWorkflow, err)
		}
		fmt.Fprintf(report, "deleted guard's error workflow %s\n", p.removed.GuardErrorWorkflow)
	}
	return nil
}

// WriteSummary says what Remove did; releaseTaken: the release came out of
// the user's error workflow too.
func (r *Removed) WriteSummary(w io.Writer, releaseTaken bool) {
	fmt.Fprintf(w, "\nremoved: the guard (events table %s); the Webhook has its name, options and connections back\n", r.EventsTable)
	switch {
	case r.UserErrorWorkflow != "" && releaseTaken:
		fmt.Fprintf(w, "error workflow %s: the key's release is taken out; its nodes run after its Error Trigger as before\n", r.UserErrorWorkflow)
	case r.UserErrorWorkflow != "":
		fmt.Fprintf(w, "error workflow %s still holds the release of %s (give its export with --error-workflow to take it out; it gives up only the keys of failed executions)\n", r.UserErrorWorkflow, r.EventsTable)
	case r.GuardErrorWorkflow != "":
		fmt.Fprintf(w, "guard's error workflow %s is no longer named by the workflow: delete it in n8n once no other workflow names it\n", r.GuardErrorWorkflow)
	}
	fmt.Fprintf(w, "the table %s and its keys are left in the database\n", r.EventsTable)
}

// sharedRelease returns a workflow other than id whose guard put its
// release for table into error workflow errorWF too, or "".
func sharedRelease(all []n8napi.Workflow, id, errorWF, table string) string {
	for _, other := range all {
		if other.ID == id || other.IsArchived {
			continue
		}
		raw, err := json.Marshal(other)
		if err != nil {
			continue
		}
		w, err := Parse(raw)
		if err != nil {
			continue
		}
		if t, ew, ok := w.Recorded(); ok && t == table && ew == errorWF {
			return other.ID
		}
	}
	return ""
}

// namedBy returns a workflow other than id whose settings name error
// workflow errorWF, or "".
func namedBy(all []n8napi.Workflow, id, errorWF string) string {
	for _, other := range all {
		if other.ID != id && !other.IsArchived && other.Settings["errorWorkflow"] == errorWF {
			return other.ID
		}
	}
	return ""
}
