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
	// The modes guard takes, not every one generate takes.
	fs.Lookup("guard").Usage = "how the key is held while your nodes run, a `MODE`: " + orList(generator.FragmentGuards) + " (default reserve)"
	fs.Lookup("hashing").Usage = "how the workflow builds the key, a `MODE`: " + orList(generator.FragmentHashings) + " (default code-node)"
	fs.Lookup("verify").Usage = "check this `PROVIDER`'s signature first: stripe, github, shopify or slack (Standard Webhooks needs keysvc, which guard does not use); default none"
	file := fs.String("workflow", "", "the exported workflow `FILE` (the editor's or the CLI's export, or the API's)")
	out := fs.String("out", "", "the guarded workflow's `FILE`, not the input; the other files are written beside it")
	force := fs.Bool("force", false, "replace --out when it exists")
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
	fail := func(err error) int { return exitWith(stderr, "guard", err) }
	if *out != "" {
		*out = filepath.Clean(*out) // "sub/../my.json" is my.json, whether sub exists or not
	}
	live := r.n8nURL != "" || *id != "" || *name != ""
	switch {
	case fs.NArg() > 0:
		return fail(usagef("unexpected argument %q", fs.Arg(0)))
	case live && *file != "":
		return fail(usagef("give --workflow FILE, or --workflow-id/--workflow-name with --n8n-url, not both"))
	case !live && *file == "":
		return fail(usagef("--workflow FILE is required (or --n8n-url with --workflow-id or --workflow-name)"))
	case !live && *out == "":
		return fail(usagef("--out FILE is required"))
	case !live && *apply:
		return fail(usagef("--apply edits a workflow in n8n: give --n8n-url and --workflow-id or --workflow-name"))
	case live && (*id == "") == (*name == ""):
		return fail(usagef("live: give one of --workflow-id and --workflow-name"))
	case live && *errorFile != "":
		return fail(usagef("live, the error workflow is read from n8n: give --error-workflow with --workflow FILE only"))
	}
	var userErrors *guard.Workflow
	if *errorFile != "" {
		raw, err := os.ReadFile(*errorFile)
		if err == nil {
			userErrors, err = guard.Parse(raw)
		}
		if err != nil {
			return fail(usagef("--error-workflow: %v; nothing was written", err))
		}
	}
	if *remove {
		if live {
			return removeLive(r, *id, *name, *apply, *backup, stdout, stderr)
		}
		return removeFile(*file, *out, *errorFile, *force, userErrors, stdout, stderr)
	}
	opts := guard.Options{Generate: o, Webhook: *webhook, ErrorWorkflow: userErrors}
	if !live {
		return fail(guardFile(*file, *out, *errorFile, *force, opts, stdout))
	}

	client, err := r.client()
	if err != nil {
		return fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *name != "" {
		found, err := workflowByName(ctx, client, *name)
		if err != nil {
			return fail(asUsage(err))
		}
		*id = found
	}
	raw, err := client.WorkflowJSON(ctx, *id)
	if err != nil {
		return fail(fmt.Errorf("read workflow %s: %v", *id, err))
	}
	// The error workflow the settings name stays the workflow's: guard
	// needs it, and n8n runs only a published one.
	var errorRaw []byte
	if w, err := guard.Parse(raw); err == nil && w.ErrorWorkflowID() != "" && w.ErrorWorkflowID() != w.ID() {
		ewID := w.ErrorWorkflowID()
		ew, err := client.Workflow(ctx, ewID)
		if err != nil {
			return fail(usagef("the workflow's settings run error workflow %s, which cannot be read: %v; nothing was changed", ewID, err))
		}
		if !ew.Active {
			return fail(usagef("the workflow's settings run error workflow %s (%q), which is not published: n8n runs none of an unpublished error workflow, so neither your nodes in it "+
				"nor the key's release would run; publish it (or clear the setting, and guard writes an error workflow of its own); nothing was changed", ewID, ew.Name))
		}
		if errorRaw, err = client.WorkflowJSON(ctx, ewID); err == nil {
			opts.ErrorWorkflow, err = guard.Parse(errorRaw)
		}
		if err != nil {
			return fail(fmt.Errorf("read error workflow %s: %v", ewID, err))
		}
	}
	res, err := guardExport(raw, opts)
	if err != nil {
		return fail(err)
	}
	printGuarded(stdout, res)
	if !*apply {
		fmt.Fprintf(stdout, "\nNothing was changed. Run again with --apply to write it back to workflow %s, publish it and probe it.\n", *id)
		return exitOK
	}
	saved, err := saveBackup(*backup, *id, "before-guard", raw)
	if err != nil {
		return fail(fmt.Errorf("save the original: %v (nothing was changed)", err))
	}
	fmt.Fprintf(stdout, "\nsaved the original to %s\n", saved)
	files := map[string][]byte{"guarded.json": res.Workflow}
	if b := res.Files[guard.FileErrorWorkflow]; b != nil {
		files[guard.FileErrorWorkflow] = b
	}
	if res.KeptErrorWorkflow && errorRaw != nil {
		savedErrors, err := saveBackup(*backup, res.ErrorWorkflow, "before-guard", errorRaw)
		if err != nil {
			return fail(fmt.Errorf("save the error workflow: %v (nothing was changed)", err))
		}
		fmt.Fprintf(stdout, "saved error workflow %s to %s\n", res.ErrorWorkflow, savedErrors)
	}
	ws, err := deploy.Load(files)
	if err != nil {
		return fail(err)
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
		return fail(fmt.Errorf("%w (the original is in %s)", deployError(err), saved))
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
		return fail(err)
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
		return fail(fmt.Errorf("applied, but %w (the original is in %s)", err, saved))
	}
	fmt.Fprintln(stdout, seen)
	return exitOK
}

// orList is "a, b or c".
func orList[T ~string](values []T) string {
	s := make([]string, len(values))
	for i, v := range values {
		s[i] = string(v)
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// saveBackup writes a workflow as n8n held it into dir, before a change.
func saveBackup(dir, id, what string, raw []byte) (string, error) {
	path := filepath.Join(dir, fmt.Sprintf("%s-%s-%s.json", id, what, time.Now().UTC().Format("20060102T150405Z")))
	return path, os.WriteFile(path, raw, 0o600)
}

// guardExport guards raw, or says why not: a usage error for a workflow or
// options guard refuses.
func guardExport(raw []byte, opts guard.Options) (*guard.Result, error) {
	w, err := guard.Parse(raw)
	if err == nil {
		var res *guard.Result
		if res, err = guard.Guard(w, opts); err == nil {
			return res, nil
		}
	}
	var refused *guard.RefusedError
	var option *generator.OptionError
	var needs *guard.ErrorWorkflowNeededError
	if errors.As(err, &refused) || errors.As(err, &option) || errors.As(err, &needs) {
		return nil, usagef("%v; nothing was written", err)
	}
	return nil, err
}

// guardFile guards the export in file and writes the result to out (and
// its companions beside it).
func guardFile(file, out, errorFile string, force bool, opts guard.Options, stdout io.Writer) error {
	if err := checkOut(out, force, file, errorFile); err != nil {
		return err
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return asUsage(err)
	}
	res, err := guardExport(raw, opts)
	if err != nil {
		return err
	}
	if err := writeGuarded(out, res, stdout); err != nil {
		return err
	}
	printGuarded(stdout, res)
	dir := filepath.Dir(out)
	if res.Files[guard.FileErrorWorkflow] == nil {
		fmt.Fprintf(stdout, "\nImport %s (it keeps the workflow's id, so the import replaces the original: keep %s),\n"+
			"apply %s, then check it:\n  idemhook verify --workflow %s\n", out, file, filepath.Join(dir, guard.FileSchema), out)
		return nil
	}
	errorWF := filepath.Join(dir, guard.FileErrorWorkflow)
	replaces := "its own error workflow"
	if res.KeptErrorWorkflow {
		replaces = "your error workflow " + res.ErrorWorkflow + ", with the release in front of its nodes (keep " + errorFile + ")"
	}
	fmt.Fprintf(stdout, "\nImport %s (it keeps the workflow's id, so the import replaces the original: keep %s),\n"+
		"import and publish %s first (%s), apply %s, then check it:\n  idemhook verify --workflow %s --with %s\n",
		out, file, errorWF, replaces, filepath.Join(dir, guard.FileSchema), out, errorWF)
	return nil
}

// checkOut refuses an --out that is one of the files given as input (even
// with force: the user's only copy would go), or a folder, or a file that
// exists unless force.
func checkOut(out string, force bool, inputs ...string) error {
	have, err := os.Stat(out)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return asUsage(err)
	}
	for _, in := range inputs {
		if given, err := os.Stat(in); in != "" && err == nil && os.SameFile(have, given) {
			return usagef("--out %s is the file you gave as input: write to another file, and keep %s; nothing was written", out, in)
		}
	}
	switch {
	case have.IsDir():
		return usagef("--out %s is a folder: give the file to write; nothing was written", out)
	case !force:
		return usagef("--out %s exists: give another file, or --force to replace it; nothing was written", out)
	}
	return nil
}

// writeGuarded writes the guarded workflow to out and its companions beside
// it; an existing companion with other content is not overwritten.
func writeGuarded(out string, res *guard.Result, stdout io.Writer) error {
	dir := filepath.Dir(out)
	for name, b := range res.Files {
		path := filepath.Join(dir, name)
		if old, err := os.ReadFile(path); err == nil && !bytes.Equal(old, b) {
			return usagef("%s exists with other content (another workflow's, or other options'): write to another folder; nothing was written", path)
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
