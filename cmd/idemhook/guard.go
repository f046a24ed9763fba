package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/idemhook/idemhook/deploy"
	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/generator"
	"github.com/idemhook/idemhook/guard"
	"github.com/idemhook/idemhook/n8napi"
	"github.com/idemhook/idemhook/verify"
)

// guardFlags are the generate options that apply to a user's workflow.
var guardFlags = []string{"guard", "hashing", "verify", "verify-credential", "tolerance", "preset", "scope", "lease",
	"events-table", "credential", "retention", "save-success", "save-errors", "save-manual", "execution-timeout"}

func runGuard(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("guard", "idemhook guard --workflow FILE --out FILE [options]\n"+
		"       idemhook guard --n8n-url URL --api-key-file FILE (--workflow-id ID | --workflow-name NAME) [--apply] [options]\n\n"+
		"Puts the guard into a workflow you already run: between its Webhook and the nodes after it, the key is\n"+
		"built from the exact bytes and reserved once; a duplicate is answered without running your nodes, and\n"+
		"a new event reaches them as the Webhook gave it before. Writes the guarded workflow and, beside it, its\n"+
		"error workflow (it releases a failed execution's key), the cleanup workflow, schema.sql and\n"+
		"credentials.example.json. Live, it changes nothing without --apply.", stderr)
	var o generator.Options
	optionFlags(fs, &o, guardFlags...)
	file := fs.String("workflow", "", "the exported workflow `FILE` (the editor's or the CLI's export, or the API's)")
	out := fs.String("out", "", "the guarded workflow's `FILE`; the other files are written beside it")
	webhook := fs.String("webhook", "", "the Webhook node to guard, by `NAME`, when the workflow has several")
	errorFile := fs.String("error-workflow", "", "the export `FILE` of the error workflow the workflow's settings name: it stays the workflow's, the key's release put in front of its nodes (live, it is read from n8n)")
	remove := fs.Bool("remove", false, "take the guard out again, from what guard recorded in the workflow: --workflow FILE --out FILE writes the original, live it changes nothing without --apply")
	var r remote
	fs.StringVar(&r.n8nURL, "n8n-url", os.Getenv("N8N_URL"), "live: n8n's `URL` (default $N8N_URL)")
	fs.StringVar(&r.apiKeyFile, "api-key-file", "", "live: `FILE` holding an n8n API key; default $N8N_API_KEY")
	fs.StringVar(&r.webhookURL, "webhook-url", "", "live: base `URL` deliveries reach n8n's webhooks at, when not n8n's URL")
	id := fs.String("workflow-id", "", "live: the workflow's `ID` in n8n")
	name := fs.String("workflow-name", "", "live: the workflow's `NAME` in n8n")
	apply := fs.Bool("apply", false, "live: write the guarded workflow back in place, publish it and probe it (the original is saved first)")
	backup := fs.String("backup", ".", "live, with --apply: `DIR` the original is saved into")
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(stderr, "idemhook guard: "+format+"\n", args...)
		return code
	}
	live := r.n8nURL != "" || *id != "" || *name != ""
	switch {
	case fs.NArg() > 0:
		return fail(exitUsage, "unexpected argument %q", fs.Arg(0))
	case live && *file != "":
		return fail(exitUsage, "give --workflow FILE, or --workflow-id/--workflow-name with --n8n-url, not both")
	case !live && *file == "":
		return fail(exitUsage, "--workflow FILE is required (or --n8n-url with --workflow-id or --workflow-name)")
	case !live && *out == "":
		return fail(exitUsage, "--out FILE is required")
	case !live && *apply:
		return fail(exitUsage, "--apply edits a workflow in n8n: give --n8n-url and --workflow-id or --workflow-name")
	case live && (*id == "") == (*name == ""):
		return fail(exitUsage, "live: give one of --workflow-id and --workflow-name")
	case live && *errorFile != "":
		return fail(exitUsage, "live, the error workflow is read from n8n: give --error-workflow with --workflow FILE only")
	}
	var userErrors *guard.Workflow
	if *errorFile != "" {
		raw, err := os.ReadFile(*errorFile)
		if err == nil {
			userErrors, err = guard.Parse(raw)
		}
		if err != nil {
			return fail(exitUsage, "--error-workflow: %v\nNothing was written.", err)
		}
	}
	if *remove {
		if live {
			return removeLive(r, *id, *name, *apply, *backup, stdout, stderr)
		}
		return removeFile(*file, *out, userErrors, stdout, stderr)
	}
	opts := guard.Options{Generate: o, Webhook: *webhook, ErrorWorkflow: userErrors}
	if !live {
		raw, err := os.ReadFile(*file)
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
		res, code := guardExport(raw, opts, stderr)
		if res == nil {
			return code
		}
		if err := writeGuarded(*out, res, stdout); err != nil {
			return fail(exitUsage, "%v", err)
		}
		printGuarded(stdout, res)
		dir := filepath.Dir(*out)
		if res.Files[guard.FileErrorWorkflow] == nil {
			fmt.Fprintf(stdout, "\nImport %s (it keeps the workflow's id, so the import replaces the original: keep %s),\n"+
				"apply %s, then check it:\n  idemhook verify --workflow %s\n", *out, *file, filepath.Join(dir, guard.FileSchema), *out)
			return exitOK
		}
		errorWF := filepath.Join(dir, guard.FileErrorWorkflow)
		replaces := "its own error workflow"
		if res.KeptErrorWorkflow {
			replaces = "your error workflow " + res.ErrorWorkflow + ", with the release in front of its nodes (keep " + *errorFile + ")"
		}
		fmt.Fprintf(stdout, "\nImport %s (it keeps the workflow's id, so the import replaces the original: keep %s),\n"+
			"import and publish %s first (%s), apply %s, then check it:\n  idemhook verify --workflow %s --with %s\n",
			*out, *file, errorWF, replaces, filepath.Join(dir, guard.FileSchema), *out, errorWF)
		return exitOK
	}

	client, ok := r.client("guard", stderr)
	if !ok {
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *name != "" {
		found, err := workflowByName(ctx, client, *name)
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
		*id = found
	}
	raw, err := client.WorkflowJSON(ctx, *id)
	if err != nil {
		return fail(exitFail, "read workflow %s: %v", *id, err)
	}
	// The error workflow the settings name stays the workflow's: guard
	// needs it, and n8n runs only a published one.
	var errorRaw []byte
	if w, err := guard.Parse(raw); err == nil && w.ErrorWorkflowID() != "" && w.ErrorWorkflowID() != w.ID() {
		ewID := w.ErrorWorkflowID()
		ew, err := client.Workflow(ctx, ewID)
		if err != nil {
			return fail(exitUsage, "the workflow's settings run error workflow %s, which cannot be read: %v\nNothing was changed.", ewID, err)
		}
		if !ew.Active {
			return fail(exitUsage, "the workflow's settings run error workflow %s (%q), which is not published: n8n runs none of an unpublished error workflow, so neither your nodes in it "+
				"nor the key's release would run; publish it (or clear the setting, and guard writes an error workflow of its own)\nNothing was changed.", ewID, ew.Name)
		}
		if errorRaw, err = client.WorkflowJSON(ctx, ewID); err == nil {
			opts.ErrorWorkflow, err = guard.Parse(errorRaw)
		}
		if err != nil {
			return fail(exitFail, "read error workflow %s: %v", ewID, err)
		}
	}
	res, code := guardExport(raw, opts, stderr)
	if res == nil {
		return code
	}
	printGuarded(stdout, res)
	if !*apply {
		fmt.Fprintf(stdout, "\nNothing was changed. Run again with --apply to write it back to workflow %s, publish it and probe it.\n", *id)
		return exitOK
	}
	saved, err := saveBackup(*backup, *id, "before-guard", raw)
	if err != nil {
		return fail(exitFail, "save the original: %v (nothing was changed)", err)
	}
	fmt.Fprintf(stdout, "\nsaved the original to %s\n", saved)
	files := map[string][]byte{"guarded.json": res.Workflow}
	if b := res.Files[guard.FileErrorWorkflow]; b != nil {
		files[guard.FileErrorWorkflow] = b
	}
	if res.KeptErrorWorkflow && errorRaw != nil {
		savedErrors, err := saveBackup(*backup, res.ErrorWorkflow, "before-guard", errorRaw)
		if err != nil {
			return fail(exitFail, "save the error workflow: %v (nothing was changed)", err)
		}
		fmt.Fprintf(stdout, "saved error workflow %s to %s\n", res.ErrorWorkflow, savedErrors)
	}
	ws, err := deploy.Load(files)
	if err != nil {
		return fail(exitFail, "%v", err)
	}
	for i := range ws {
		switch {
		case ws[i].File == "guarded.json":
			ws[i].TargetID = *id
		case res.KeptErrorWorkflow:
			ws[i].TargetID = res.ErrorWorkflow
		}
	}
	dopts := r.deployOptions(stderr)
	deployed, err := deploy.Deploy(ctx, client, ws, dopts)
	if err != nil {
		fmt.Fprintf(stderr, "idemhook guard: %v (the original is in %s)\n", err, saved)
		return deployExit(err)
	}
	for _, d := range deployed {
		fmt.Fprintf(stdout, "%-36s %s  %q\n", d.File, d.ID, d.Name)
	}
	fmt.Fprintf(stdout, "apply %s to the database the credential points at (idemhook guard writes it with --out)\n", guard.FileSchema)
	if o.Verify != "" {
		fmt.Fprintln(stdout, "not probed: the workflow checks "+o.Verify+" signatures, which the probe cannot make")
		return exitOK
	}
	bound, err := deploy.Bind(ctx, client, ws, nil)
	if err != nil {
		return fail(exitFail, "%v", err)
	}
	t := verify.ProbeTarget{WorkflowID: *id, Preset: eventkey.Preset(o.Preset), Scope: o.Scope}
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
	seen, err := verify.Probe(ctx, client, t, dopts)
	if err != nil {
		fmt.Fprintf(stderr, "idemhook guard: applied, but %v (the original is in %s)\n", err, saved)
		return exitFail
	}
	fmt.Fprintln(stdout, seen)
	return exitOK
}

// saveBackup writes a workflow as n8n held it into dir, before a change.
func saveBackup(dir, id, what string, raw []byte) (string, error) {
	path := filepath.Join(dir, fmt.Sprintf("%s-%s-%s.json", id, what, time.Now().UTC().Format("20060102T150405Z")))
	return path, os.WriteFile(path, raw, 0o600)
}

// guardExport guards raw, or says why not (exit 2).
func guardExport(raw []byte, opts guard.Options, stderr io.Writer) (*guard.Result, int) {
	w, err := guard.Parse(raw)
	if err == nil {
		var res *guard.Result
		if res, err = guard.Guard(w, opts); err == nil {
			return res, exitOK
		}
	}
	var refused *guard.RefusedError
	var option *generator.OptionError
	var needs *guard.ErrorWorkflowNeededError
	if errors.As(err, &refused) || errors.As(err, &option) || errors.As(err, &needs) {
		fmt.Fprintf(stderr, "idemhook guard: %v\nNothing was written.\n", err)
		return nil, exitUsage
	}
	fmt.Fprintf(stderr, "idemhook guard: %v\n", err)
	return nil, exitFail
}

// writeGuarded writes the guarded workflow to out and its companions beside
// it; an existing companion with other content is not overwritten.
func writeGuarded(out string, res *guard.Result, stdout io.Writer) error {
	dir := filepath.Dir(out)
	for name, b := range res.Files {
		path := filepath.Join(dir, name)
		if old, err := os.ReadFile(path); err == nil && !bytes.Equal(old, b) {
			return fmt.Errorf("%s exists with other content (another workflow's, or other options'): write to another folder; nothing was written", path)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(out, res.Workflow, 0o644); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "wrote", out)
	_, err := writeFilesIn(dir, res.Files, stdout)
	return err
}

func writeFilesIn(dir string, files map[string][]byte, stdout io.Writer) ([]string, error) {
	paths, err := generator.WriteFiles(dir, files)
	for _, p := range paths {
		fmt.Fprintln(stdout, "wrote", p)
	}
	return paths, err
}

func printGuarded(w io.Writer, res *guard.Result) {
	fmt.Fprintf(w, "\nguarded: %q is now %q (it keeps the raw body); %q gives your nodes the item it gave before\n", res.Restore, res.Webhook, res.Restore)
	fmt.Fprintf(w, "inserted: %s\n", strings.Join(res.Inserted, ", "))
	for _, n := range res.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

// workflowByName finds the one workflow called name.
func workflowByName(ctx context.Context, c *n8napi.Client, name string) (string, error) {
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
		return "", fmt.Errorf("no workflow is named %q", name)
	case 1:
		return ids[0], nil
	}
	return "", fmt.Errorf("%d workflows are named %q (ids %s): give --workflow-id", len(ids), name, strings.Join(ids, ", "))
}
