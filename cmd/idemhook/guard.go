package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/guard"
)

// guardFlags are the generate options that apply to a user's workflow.
var guardFlags = []string{"guard", "hashing", "verify", "verify-credential", "tolerance", "preset", "scope", "lease",
	"events-table", "credential", "retention", "save-success", "save-errors", "save-manual", "execution-timeout"}

// guardCommand is what guard's flags ask for.
type guardCommand struct {
	opts                 guard.Options
	file, out, errorFile string
	force, remove, apply bool
	remote               remote
	id, name, backup     string
}

func runGuard(ctx context.Context, args []string, std stdio) error {
	g, err := guardFlagsParse(args, std.out)
	if err != nil {
		return err
	}
	live := g.remote.n8nURL != "" || g.id != "" || g.name != ""
	if err := g.check(live); err != nil {
		return err
	}
	if g.errorFile != "" {
		raw, err := os.ReadFile(g.errorFile)
		if err == nil {
			g.opts.ErrorWorkflow, err = guard.Parse(raw)
		}
		if err != nil {
			return usagef("--error-workflow: %v; nothing was written", err)
		}
	}
	switch {
	case !live && g.remove:
		return within("guard --remove", removeFile(g.file, g.out, g.errorFile, g.force, g.opts.ErrorWorkflow, std.out))
	case !live:
		return guardFile(g.file, g.out, g.errorFile, g.force, g.opts, std.out)
	}
	client, err := g.remote.client()
	if err != nil {
		return err
	}
	if g.name != "" {
		if g.id, err = guard.FindWorkflow(ctx, client, g.name); err != nil {
			return guardError(err)
		}
	}
	if g.remove {
		o := guard.RemoveLiveOptions{WorkflowID: g.id, Apply: g.apply, BackupDir: g.backup, Deploy: g.remote.deployOptions(std.err)}
		return within("guard --remove", guardError(guard.RemoveLive(ctx, client, o, std.out)))
	}
	o := guard.LiveOptions{Options: g.opts, WorkflowID: g.id, Apply: g.apply, BackupDir: g.backup, Deploy: g.remote.deployOptions(std.err)}
	return guardError(guard.Live(ctx, client, o, std.out))
}

// guardFlagsParse reads guard's command line.
func guardFlagsParse(args []string, stdout io.Writer) (*guardCommand, error) {
	fs := newFlagSet("guard", "idemhook guard --workflow FILE --out FILE [options]\n"+
		"       idemhook guard --n8n-url URL --api-key-file FILE (--workflow-id ID | --workflow-name NAME) [--apply] [options]\n\n"+
		"Puts the guard into a workflow you already run: between its Webhook and the nodes after it, the key is\n"+
		"built from the exact bytes and reserved once; a duplicate is answered without running your nodes, and\n"+
		"a new event reaches them as the Webhook gave it before. Writes the guarded workflow and, beside it, its\n"+
		"error workflow (it releases a failed execution's key), the cleanup workflow, schema.sql and\n"+
		"credentials.example.json. Live, it changes nothing without --apply.")
	g := &guardCommand{}
	optionFlags(fs, &g.opts.Generate, guardFlags...)
	// The modes guard takes, not every one generate takes.
	fs.Lookup("guard").Usage = "how the key is held while your nodes run, a `MODE`: " + orList(generator.FragmentGuards) + " (default reserve)"
	fs.Lookup("hashing").Usage = "how the workflow builds the key, a `MODE`: " + orList(generator.FragmentHashings) + " (default code-node)"
	fs.Lookup("verify").Usage = "check this `PROVIDER`'s signature first: stripe, github, shopify or slack (Standard Webhooks needs keysvc, which guard does not use); default none"
	fs.StringVar(&g.file, "workflow", "", "the exported workflow `FILE` (the editor's or the CLI's export, or the API's)")
	fs.StringVar(&g.out, "out", "", "the guarded workflow's `FILE`, not the input; the other files are written beside it")
	fs.BoolVar(&g.force, "force", false, "replace --out when it exists")
	fs.StringVar(&g.opts.Webhook, "webhook", "", "the Webhook node to guard, by `NAME`, when the workflow has several")
	fs.StringVar(&g.errorFile, "error-workflow", "", "the export `FILE` of the error workflow the workflow's settings name: it stays the workflow's, the key's release put in front of its nodes (live, it is read from n8n)")
	fs.BoolVar(&g.remove, "remove", false, "take the guard out again, from what guard recorded in the workflow: --workflow FILE --out FILE writes the original, live it changes nothing without --apply")
	fs.StringVar(&g.remote.n8nURL, "n8n-url", os.Getenv("N8N_URL"), "live: n8n's `URL` (default $N8N_URL)")
	fs.StringVar(&g.remote.apiKeyFile, "api-key-file", "", "live: `FILE` holding an n8n API key; default $N8N_API_KEY")
	fs.StringVar(&g.remote.webhookURL, "webhook-url", "", "live: base `URL` deliveries reach n8n's webhooks at, when not n8n's URL")
	fs.StringVar(&g.id, "workflow-id", "", "live: the workflow's `ID` in n8n")
	fs.StringVar(&g.name, "workflow-name", "", "live: the workflow's `NAME` in n8n")
	fs.BoolVar(&g.apply, "apply", false, "live: write the guarded workflow back in place, publish it and probe it (the original is saved first)")
	fs.StringVar(&g.backup, "backup", ".", "live, with --apply: `DIR` the original is saved into")
	if err := parse(fs, args, stdout); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	}
	if g.out != "" {
		g.out = filepath.Clean(g.out) // "sub/../my.json" is my.json, whether sub exists or not
	}
	return g, nil
}

// check refuses flags that do not go together.
func (g *guardCommand) check(live bool) error {
	switch {
	case live && g.file != "":
		return usagef("give --workflow FILE, or --workflow-id/--workflow-name with --n8n-url, not both")
	case !live && g.file == "":
		return usagef("--workflow FILE is required (or --n8n-url with --workflow-id or --workflow-name)")
	case !live && g.out == "":
		return usagef("--out FILE is required")
	case !live && g.apply:
		return usagef("--apply edits a workflow in n8n: give --n8n-url and --workflow-id or --workflow-name")
	case live && (g.id == "") == (g.name == ""):
		return usagef("live: give one of --workflow-id and --workflow-name")
	case live && g.errorFile != "":
		return usagef("live, the error workflow is read from n8n: give --error-workflow with --workflow FILE only")
	}
	return nil
}

// guardError marks as a usage error what guard refuses in the workflow or
// the options, and what deploy refuses in the user's n8n.
func guardError(err error) error {
	var refused *guard.RefusedError
	var option *generator.OptionError
	var needs *guard.ErrorWorkflowNeededError
	if errors.As(err, &refused) || errors.As(err, &option) || errors.As(err, &needs) {
		return asUsage(err)
	}
	return deployError(err)
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
	res, err := guard.Export(raw, opts)
	if err != nil {
		return guardError(err)
	}
	if err := writeGuarded(out, res, stdout); err != nil {
		return err
	}
	res.WriteSummary(stdout)
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
	return writeFiles(dir, res.Files, stdout)
}
