package guard

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/internal/deploy"
	"github.com/idemhook/idemhook/internal/n8napi"
	"github.com/idemhook/idemhook/internal/verify"
)

// LiveOptions say which workflow of an n8n Live guards, and what it may
// change there.
type LiveOptions struct {
	Options
	// WorkflowID is the workflow to guard, as n8n's API names it.
	WorkflowID string
	// Apply writes the guarded workflow back in place, publishes it and
	// probes it; without it nothing in n8n changes.
	Apply bool
	// BackupDir is where Apply saves the workflows it changes first.
	BackupDir string
	// Deploy tunes the deployment (the webhook URL, progress lines).
	Deploy deploy.Options
}

// Export guards the export raw. It refuses what Parse and Guard refuse
// (*RefusedError, *ErrorWorkflowNeededError, *generator.OptionError),
// saying that nothing was written.
func Export(raw []byte, opts Options) (*Result, error) {
	w, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w; nothing was written", err)
	}
	res, err := Guard(w, opts)
	if err != nil {
		return nil, fmt.Errorf("%w; nothing was written", err)
	}
	return res, nil
}

// Live guards workflow o.WorkflowID in n8n and reports on report what it
// found and did. The error workflow its settings name stays the
// workflow's: it is read from n8n and must be published (a *RefusedError
// otherwise, nothing changed). Without o.Apply it changes nothing; with
// it, the originals are saved in o.BackupDir, the guarded workflow (and
// the error workflow with the release) are written back in place and
// published, and the workflow is probed unless it checks signatures the
// probe cannot make.
func Live(ctx context.Context, c *n8napi.Client, o LiveOptions, report io.Writer) error {
	raw, err := c.WorkflowJSON(ctx, o.WorkflowID)
	if err != nil {
		return fmt.Errorf("read workflow %s: %v", o.WorkflowID, err)
	}
	errorRaw, err := liveErrorWorkflow(ctx, c, raw, &o.Options)
	if err != nil {
		return err
	}
	res, err := Export(raw, o.Options)
	if err != nil {
		return err
	}
	res.WriteSummary(report)
	if !o.Apply {
		fmt.Fprintf(report, "\nNothing was changed. Run again with --apply to write it back to workflow %s, publish it and probe it.\n", o.WorkflowID)
		return nil
	}
	saved, err := saveBackup(o.BackupDir, o.WorkflowID, "before-guard", raw)
	if err != nil {
		return fmt.Errorf("save the original: %v (nothing was changed)", err)
	}
	fmt.Fprintf(report, "\nsaved the original to %s\n", saved)
	if res.KeptErrorWorkflow && errorRaw != nil {
		savedErrors, err := saveBackup(o.BackupDir, res.ErrorWorkflow, "before-guard", errorRaw)
		if err != nil {
			return fmt.Errorf("save the error workflow: %v (nothing was changed)", err)
		}
		fmt.Fprintf(report, "saved error workflow %s to %s\n", res.ErrorWorkflow, savedErrors)
	}
	if err := applyGuarded(ctx, c, o, res, report); err != nil {
		return fmt.Errorf("%w (the original is in %s)", err, saved)
	}
	return nil
}

// liveErrorWorkflow reads the error workflow the settings of raw name,
// when it is another workflow, into opts; it returns its export as n8n
// held it.
func liveErrorWorkflow(ctx context.Context, c *n8napi.Client, raw []byte, opts *Options) ([]byte, error) {
	w, err := Parse(raw)
	if err != nil || w.ErrorWorkflowID() == "" || w.ErrorWorkflowID() == w.ID() {
		return nil, nil // Export says what is wrong with the workflow itself
	}
	id := w.ErrorWorkflowID()
	ew, err := c.Workflow(ctx, id)
	if err != nil {
		return nil, refuse("the workflow's settings run error workflow %s, which cannot be read: %v; nothing was changed", id, err)
	}
	if !ew.Active {
		return nil, refuse("the workflow's settings run error workflow %s (%q), which is not published: n8n runs none of an unpublished error workflow, so neither your nodes in it "+
			"nor the key's release would run; publish it (or clear the setting, and guard writes an error workflow of its own); nothing was changed", id, ew.Name)
	}
	errorRaw, err := c.WorkflowJSON(ctx, id)
	if err == nil {
		opts.ErrorWorkflow, err = Parse(errorRaw)
	}
	if err != nil {
		return nil, fmt.Errorf("read error workflow %s: %v", id, err)
	}
	return errorRaw, nil
}

// applyGuarded writes res back to n8n in place of the workflow (and of the
// error workflow it kept), publishes them and probes the workflow.
func applyGuarded(ctx context.Context, c *n8napi.Client, o LiveOptions, res *Result, report io.Writer) error {
	files := map[string][]byte{"guarded.json": res.Workflow}
	if b := res.Files[FileErrorWorkflow]; b != nil {
		files[FileErrorWorkflow] = b
	}
	ws, err := deploy.Load(files)
	if err != nil {
		return err
	}
	for i := range ws {
		switch {
		case ws[i].File == "guarded.json":
			ws[i].TargetID = o.WorkflowID
		case res.KeptErrorWorkflow:
			ws[i].TargetID = res.ErrorWorkflow
		}
	}
	deployed, err := deploy.Deploy(ctx, c, ws, o.Deploy)
	if err != nil {
		return err
	}
	for _, d := range deployed {
		fmt.Fprintf(report, "%-36s %s  %q\n", d.File, d.ID, d.Name)
	}
	fmt.Fprintf(report, "apply %s to the database the credential points at (idemhook guard writes it with --out)\n", FileSchema)
	g := o.Generate
	if g.Verify != "" {
		fmt.Fprintln(report, "not probed: the workflow checks "+g.Verify+" signatures, which the probe cannot make")
		return nil
	}
	bound, err := deploy.Bind(ctx, c, ws, nil)
	if err != nil {
		return err
	}
	t := verify.ProbeTarget{WorkflowID: o.WorkflowID, Preset: eventkey.Preset(g.Preset), Scope: g.Scope}
	for ref, cid := range bound {
		if ref.Type == "postgres" {
			t.Credential = cid
		}
	}
	for _, d := range deployed {
		if d.URL != "" {
			t.URL = d.URL
		}
	}
	seen, err := verify.Probe(ctx, c, t, o.Deploy)
	if err != nil {
		return fmt.Errorf("applied, but %w", err)
	}
	fmt.Fprintln(report, seen)
	return nil
}

// WriteSummary says what Guard did: the Webhook renamed, the nodes
// inserted, the notes.
func (res *Result) WriteSummary(w io.Writer) {
	fmt.Fprintf(w, "\nguarded: %q is now %q (it keeps the raw body); %q gives your nodes the item it gave before\n", res.Restore, res.Webhook, res.Restore)
	fmt.Fprintf(w, "inserted: %s\n", strings.Join(res.Inserted, ", "))
	for _, n := range res.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

// FindWorkflow returns the id of the one workflow of c called name; an
// error when none or several are.
func FindWorkflow(ctx context.Context, c *n8napi.Client, name string) (string, error) {
	ws, err := c.Workflows(ctx)
	if err != nil {
		return "", err
	}
	var ids []string
	for _, w := range ws {
		if w.Name == name && !w.IsArchived {
			ids = append(ids, w.ID)
		}
	}
	switch len(ids) {
	case 0:
		return "", refuse("no workflow is named %q", name)
	case 1:
		return ids[0], nil
	}
	return "", refuse("%d workflows are named %q (ids %s): give --workflow-id", len(ids), name, strings.Join(ids, ", "))
}

// saveBackup writes a workflow as n8n held it into dir, before a change.
func saveBackup(dir, id, what string, raw []byte) (string, error) {
	path := filepath.Join(dir, fmt.Sprintf("%s-%s-%s.json", id, what, time.Now().UTC().Format("20060102T150405Z")))
	return path, os.WriteFile(path, raw, 0o600)
}
