package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/idemhook/idemhook/deploy"
	"github.com/idemhook/idemhook/guard"
	"github.com/idemhook/idemhook/n8napi"
)

// fileRemovedErrorWorkflow is where guard --remove writes the user's error
// workflow without the release, beside the original.
const fileRemovedErrorWorkflow = "error-workflow.json"

// removeFile takes the guard out of an exported guarded workflow (and out
// of its error workflow when given) and writes the original.
func removeFile(file, out, errorFile string, force bool, errorWF *guard.Workflow, stdout, stderr io.Writer) int {
	fail := func(err error) int { return exitWith(stderr, "guard --remove", err) }
	if file == "" || out == "" {
		return fail(usagef("give --workflow FILE (the guarded export) and --out FILE (where the original goes), or --n8n-url with --workflow-id or --workflow-name"))
	}
	if err := checkOut(out, force, file, errorFile); err != nil {
		return fail(err)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return fail(asUsage(err))
	}
	removed, err := removeExport(raw, guard.RemoveOptions{ErrorWorkflow: errorWF})
	if err != nil {
		return fail(err)
	}
	files := map[string][]byte{filepath.Base(out): removed.Workflow}
	if removed.ErrorWorkflow != nil {
		files[fileRemovedErrorWorkflow] = removed.ErrorWorkflow
	}
	dir := filepath.Dir(out)
	for name, b := range files {
		if old, err := os.ReadFile(filepath.Join(dir, name)); err == nil && !bytes.Equal(old, b) {
			return fail(usagef("%s exists with other content: write to another folder; nothing was written", filepath.Join(dir, name)))
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(err)
	}
	if _, err := writeFilesIn(dir, files, stdout); err != nil {
		return fail(err)
	}
	printRemoved(stdout, removed, errorWF != nil)
	return exitOK
}

// removeExport runs guard.Remove on raw, or says why not (a usage error).
func removeExport(raw []byte, opts guard.RemoveOptions) (*guard.Removed, error) {
	w, err := guard.Parse(raw)
	var removed *guard.Removed
	if err == nil {
		removed, err = guard.Remove(w, opts)
	}
	if err != nil {
		return nil, usagef("%v; nothing was written", err)
	}
	return removed, nil
}

func printRemoved(w io.Writer, r *guard.Removed, releaseTaken bool) {
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

// removeLive takes the guard out of a workflow in n8n: without apply it
// says what it would do; with apply it saves the guarded workflow (and the
// error workflow it changes), writes the original back in place, takes the
// release out of the user's error workflow unless another guarded workflow
// shares it, and deletes guard's own error workflow unless another workflow
// names it.
func removeLive(r remote, id, name string, apply bool, backup string, stdout, stderr io.Writer) int {
	fail := func(err error) int { return exitWith(stderr, "guard --remove", err) }
	client, err := r.client()
	if err != nil {
		return fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if name != "" {
		found, err := workflowByName(ctx, client, name)
		if err != nil {
			return fail(asUsage(err))
		}
		id = found
	}
	raw, err := client.WorkflowJSON(ctx, id)
	if err != nil {
		return fail(fmt.Errorf("read workflow %s: %v", id, err))
	}
	w, err := guard.Parse(raw)
	if err != nil {
		return fail(asUsage(err))
	}
	table, userErrors, recorded := w.Recorded()
	if !recorded {
		_, err := removeExport(raw, guard.RemoveOptions{})
		return fail(err)
	}
	all, err := client.Workflows(ctx)
	if err != nil {
		return fail(fmt.Errorf("list workflows: %v", err))
	}
	opts := guard.RemoveOptions{}
	var errorRaw []byte
	if userErrors != "" && userErrors != id {
		if errorRaw, err = client.WorkflowJSON(ctx, userErrors); err == nil {
			opts.ErrorWorkflow, err = guard.Parse(errorRaw)
		}
		if err != nil {
			return fail(fmt.Errorf("read error workflow %s: %v", userErrors, err))
		}
		opts.KeepRelease = sharedRelease(all, id, userErrors, table) != ""
	}
	removed, err := removeExport(raw, opts)
	if err != nil {
		return fail(err)
	}
	deleteGuards := removed.GuardErrorWorkflow != "" && namedBy(all, id, removed.GuardErrorWorkflow) == ""
	printRemoved(stdout, removed, removed.ErrorWorkflow != nil)
	if opts.KeepRelease {
		fmt.Fprintf(stdout, "the release stays in error workflow %s: workflow %s reserves in %s too and shares it\n", userErrors, sharedRelease(all, id, userErrors, table), table)
	}
	if deleteGuards {
		fmt.Fprintf(stdout, "guard's error workflow %s is named by no other workflow: it goes\n", removed.GuardErrorWorkflow)
	}
	if !apply {
		fmt.Fprintf(stdout, "\nNothing was changed. Run again with --apply to write the original back to workflow %s and publish it.\n", id)
		return exitOK
	}
	saved, err := saveBackup(backup, id, "before-guard-remove", raw)
	if err != nil {
		return fail(fmt.Errorf("save the guarded workflow: %v (nothing was changed)", err))
	}
	fmt.Fprintf(stdout, "\nsaved the guarded workflow to %s\n", saved)
	files := map[string][]byte{"original.json": removed.Workflow}
	targets := map[string]string{"original.json": id}
	if removed.ErrorWorkflow != nil {
		if saved, err = saveBackup(backup, userErrors, "before-guard-remove", errorRaw); err != nil {
			return fail(fmt.Errorf("save the error workflow: %v (nothing was changed)", err))
		}
		fmt.Fprintf(stdout, "saved error workflow %s to %s\n", userErrors, saved)
		files[fileRemovedErrorWorkflow] = removed.ErrorWorkflow
		targets[fileRemovedErrorWorkflow] = userErrors
	}
	ws, err := deploy.Load(files)
	if err != nil {
		return fail(err)
	}
	for i := range ws {
		ws[i].TargetID = targets[ws[i].File]
	}
	deployed, err := deploy.Deploy(ctx, client, ws, r.deployOptions(stderr))
	if err != nil {
		return fail(fmt.Errorf("%w (the guarded workflow is in %s)", deployError(err), saved))
	}
	for _, d := range deployed {
		fmt.Fprintf(stdout, "%-36s %s  %q\n", d.File, d.ID, d.Name)
	}
	if deleteGuards {
		if err := client.DeleteWorkflow(ctx, removed.GuardErrorWorkflow); err != nil {
			return fail(fmt.Errorf("the original is back, but guard's error workflow %s could not be deleted: %v", removed.GuardErrorWorkflow, err))
		}
		fmt.Fprintf(stdout, "deleted guard's error workflow %s\n", removed.GuardErrorWorkflow)
	}
	return exitOK
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
		w, err := guard.Parse(raw)
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
