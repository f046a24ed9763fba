package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/internal/deploy"
	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/n8napi"
	"github.com/idemhook/idemhook/internal/verify"
)

// remote holds the flags of the commands that talk to a running n8n
// through its public API.
type remote struct {
	n8nURL, apiKeyFile, webhookURL, from string
	opts                                 generator.Options
	probe                                bool
}

// flags registers the remote flags and the generate options named (all
// when none are: deploy and check compare and write every file).
func (r *remote) flags(fs *flag.FlagSet, options ...string) {
	fs.StringVar(&r.n8nURL, "n8n-url", os.Getenv("N8N_URL"), "n8n's `URL`, e.g. https://n8n.example.com (default $N8N_URL)")
	fs.StringVar(&r.apiKeyFile, "api-key-file", "", "`FILE` holding an n8n API key (Settings → n8n API); default $N8N_API_KEY")
	fs.StringVar(&r.webhookURL, "webhook-url", "", "base `URL` deliveries reach n8n's webhooks at, when not n8n's URL (WEBHOOK_URL, queue-mode webhook processes)")
	fs.StringVar(&r.from, "from", "", "`DIR` written by idemhook generate (instead of the generate options)")
	optionFlags(fs, &r.opts, options...)
}

func (r *remote) probeFlag(fs *flag.FlagSet) {
	fs.BoolVar(&r.probe, "probe", false, "then send one probe delivery (id "+verify.ProbePrefix+"…, its key reserved first, so the business step skips it) and check from n8n's execution that it ran the published version and went through the reservation")
}

// probeRefusal says why --probe cannot run with these options, or "".
func (r *remote) probeRefusal() string {
	switch {
	case r.from != "":
		return "--probe needs the generate options (the probe's key depends on them), not --from"
	case r.opts.Pattern == generator.PatternInbox:
		return "--probe checks the reserve pattern; the inbox pattern's receiver verifies signatures (send a signed test event)"
	case r.opts.Verify != "":
		return "--probe cannot sign its delivery: the workflow checks " + r.opts.Verify + " signatures"
	case r.opts.Hashing == generator.HashingKeysvc:
		return "--probe reserves its key in PostgreSQL; this workflow reserves through keysvc"
	}
	return ""
}

// runProbe probes the deployed webhook workflow of ws.
func (r *remote) runProbe(ctx context.Context, c *n8napi.Client, ws []deploy.Workflow, credIDs []string, opts deploy.Options) (string, error) {
	bound, err := deploy.Bind(ctx, c, ws, credIDs)
	if err != nil {
		return "", err
	}
	t := verify.ProbeTarget{Preset: eventkey.Preset(r.opts.Preset), Scope: r.opts.Scope}
	for ref, id := range bound {
		if ref.Type == "postgres" {
			t.Credential = id
		}
	}
	existing, err := c.Workflows(ctx)
	if err != nil {
		return "", err
	}
	for _, w := range ws {
		if w.WebhookPath == "" {
			continue
		}
		for _, e := range existing {
			if e.Name == w.Doc.Name && !e.IsArchived {
				t.WorkflowID = e.ID
			}
		}
		t.URL = opts.ProductionURL(c, w.WebhookPath)
	}
	if t.WorkflowID == "" || t.Credential == "" {
		return "", errors.New("--probe: the webhook workflow or its Postgres credential is not in n8n")
	}
	return verify.Probe(ctx, c, t, opts)
}

// setup returns the API client and the workflows, or a usage error when
// the command line is wrong.
func (r *remote) setup(fs *flag.FlagSet) (*n8napi.Client, []deploy.Workflow, error) {
	if err := noArgs(fs); err != nil {
		return nil, nil, err
	}
	client, err := r.client()
	if err != nil {
		return nil, nil, err
	}
	files := map[string][]byte{}
	if r.from != "" {
		entries, err := os.ReadDir(r.from)
		if err != nil {
			return nil, nil, usagef("--from: %v", err)
		}
		for _, e := range entries {
			if e.Type().IsRegular() && filepath.Ext(e.Name()) == ".json" {
				if files[e.Name()], err = os.ReadFile(filepath.Join(r.from, e.Name())); err != nil {
					return nil, nil, usagef("--from: %v", err)
				}
			}
		}
	} else if files, err = generator.Files(r.opts); err != nil {
		return nil, nil, asUsage(err)
	}
	if why := r.probeRefusal(); r.probe && why != "" {
		return nil, nil, usagef("%s", why)
	}
	ws, err := deploy.Load(files)
	if err != nil {
		return nil, nil, asUsage(err)
	}
	return client, ws, nil
}

// client is n8n's public API at --n8n-url with the key of --api-key-file
// (or $N8N_API_KEY), or a usage error when they are missing or wrong.
func (r *remote) client() (*n8napi.Client, error) {
	if r.n8nURL == "" {
		return nil, usagef("--n8n-url is required (or set N8N_URL)")
	}
	key := os.Getenv("N8N_API_KEY")
	if r.apiKeyFile != "" {
		b, err := os.ReadFile(r.apiKeyFile)
		if err != nil {
			return nil, usagef("--api-key-file: %v", err)
		}
		key = string(b)
	}
	if strings.TrimSpace(key) == "" {
		return nil, usagef("an n8n API key is required: --api-key-file FILE or N8N_API_KEY (create one in n8n: Settings → n8n API)")
	}
	client, err := n8napi.New(r.n8nURL, key)
	if err != nil {
		return nil, asUsage(err)
	}
	return client, nil
}

func (r *remote) deployOptions(stderr io.Writer) deploy.Options {
	return deploy.Options{WebhookURL: r.webhookURL, Progress: stderr, Alternatives: r.otherGuards()}
}

// otherGuards are the files of r's options with each other guard, so that
// check and deploy name a live workflow that is one of them (the guard it
// was deployed with, or an older idemhook's default) rather than list its
// differences as edits. None with --from or the inbox pattern.
func (r *remote) otherGuards() []deploy.Alternative {
	if r.from != "" || r.opts.Pattern == generator.PatternInbox {
		return nil
	}
	current := cmp.Or(r.opts.Guard, generator.DefaultGuard)
	var out []deploy.Alternative
	for _, g := range generator.Guards {
		o := r.opts
		o.Guard = g
		files, err := generator.Files(o)
		if g == current || err != nil {
			continue // one these options cannot have (transactional with keysvc)
		}
		ws, err := deploy.Load(files)
		if err != nil {
			continue
		}
		out = append(out, deploy.Alternative{Options: "--guard " + string(g), Change: generator.GuardChange(g, current), Workflows: ws})
	}
	return out
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func runDeploy(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("deploy", "idemhook deploy --n8n-url URL --api-key-file FILE [--from DIR | options]\n\n"+
		"Creates or updates (by name) the workflows in n8n through its public API, binds their credentials by\n"+
		"id, publishes them and waits until each webhook is live. Safe to run again.")
	var r remote
	r.flags(fs)
	var credIDs multiFlag
	fs.Var(&credIDs, "credential-id", "`ID` of the credential to bind when several share its name (repeatable)")
	r.probeFlag(fs)
	if err := parse(fs, args, std.out); err != nil {
		return err
	}
	client, ws, err := r.setup(fs)
	if err != nil {
		return err
	}
	opts := r.deployOptions(std.err)
	opts.CredentialIDs = credIDs
	deployed, err := deploy.Deploy(ctx, client, ws, opts)
	if err != nil {
		return deployError(err)
	}
	printDeployed(std.out, deployed)
	for _, d := range deployed {
		if d.Replaced != nil {
			fmt.Fprintf(std.out, "\n%s replaced the workflow of %s. %s\nIts schema must be in the database before the first delivery (idemhook schema [same options] | psql …): until then every delivery fails and is retried.\n", d.File, d.Replaced.Options, d.Replaced.Change)
		}
	}
	if r.probe {
		seen, err := r.runProbe(ctx, client, ws, credIDs, opts)
		if err != nil {
			return fmt.Errorf("deployed, but %w", err)
		}
		fmt.Fprintln(std.out, seen)
	} else if slices.ContainsFunc(deployed, func(d deploy.Deployed) bool { return !d.Created && !d.Unchanged && d.URL != "" }) {
		fmt.Fprintln(std.out, "\nn8n puts an updated version live in the background: for a moment, deliveries can still run the\n"+
			"previous one. --probe waits until they run the new version.")
	}
	for _, d := range deployed {
		if d.URL != "" {
			fmt.Fprintf(std.out, "\nlive; give the provider this URL:\n  %s\n", d.URL)
		}
	}
	if r.from == "" && r.opts.KeysInKeysvc() {
		fmt.Fprintln(std.out, "\nThe example business step needs its table in the database its credential points at: idemhook schema [same options] | psql …\n"+
			"keysvc keeps the keys and prunes them after its --retention: no events table, no cleanup workflow.")
	} else {
		fmt.Fprintln(std.out, "\nThe workflows need their schema in the database the credential points at: idemhook schema [same options] | psql …")
	}
	return nil
}

// printDeployed lists what deploy did with each workflow.
func printDeployed(w io.Writer, deployed []deploy.Deployed) {
	for _, d := range deployed {
		what := "updated"
		switch {
		case d.Created:
			what = "created"
		case d.Unchanged:
			what = "unchanged"
		}
		fmt.Fprintf(w, "%-24s %-9s %s  %q\n", d.File, what, d.ID, d.Name)
	}
}

// deployError marks as a usage error what deploy refuses in the user's n8n
// or options (a credential missing or ambiguous, a workflow ambiguous, a
// path taken); any other error is the work failing.
func deployError(err error) error {
	var missing *deploy.MissingCredentialError
	var ambiguous *deploy.AmbiguousCredentialError
	var ambiguousWF *deploy.AmbiguousWorkflowError
	var taken *deploy.PathTakenError
	if errors.As(err, &missing) || errors.As(err, &ambiguous) || errors.As(err, &ambiguousWF) || errors.As(err, &taken) {
		return asUsage(err)
	}
	return err
}

func runCheck(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("check", "idemhook check --n8n-url URL --api-key-file FILE [--from DIR | options]\n\n"+
		"Checks, without changing anything, that the workflows are in n8n and are what the options (or --from)\n"+
		"describe, node by node, bound to credentials that exist and are not ambiguous, published, and live.\n"+
		"Exits 0 only when all is well.")
	var r remote
	r.flags(fs)
	var credIDs multiFlag
	fs.Var(&credIDs, "credential-id", "`ID` of the credential deploy bound when several share its name (repeatable)")
	r.probeFlag(fs)
	if err := parse(fs, args, std.out); err != nil {
		return err
	}
	client, ws, err := r.setup(fs)
	if err != nil {
		return err
	}
	checkOpts := r.deployOptions(nil)
	checkOpts.CredentialIDs = credIDs
	problems, err := deploy.Check(ctx, client, ws, checkOpts)
	if err != nil {
		return err
	}
	// A workflow that differs from the options can still be probed: what it
	// does with a delivery tells the user more than the difference.
	if r.probe && !slices.ContainsFunc(problems, func(p deploy.Problem) bool { return !p.Drift }) {
		seen, err := r.runProbe(ctx, client, ws, credIDs, r.deployOptions(std.err))
		if err != nil {
			problems = append(problems, deploy.Problem{What: err.Error(), Fix: "A missing table: apply idemhook schema in the database the credential points at. A Code node that cannot require('crypto'): start n8n with NODE_FUNCTION_ALLOW_BUILTIN=crypto"})
		} else {
			fmt.Fprintln(std.out, seen)
		}
	}
	if len(problems) == 0 {
		fmt.Fprintf(std.out, "ok: %d workflows in n8n, bound, published and live\n", len(ws))
		return nil
	}
	for _, p := range problems {
		fmt.Fprintln(std.out, "problem:", p)
	}
	if len(problems) == 1 {
		return errors.New("1 problem, above")
	}
	return fmt.Errorf("%d problems, above", len(problems))
}

func runCleanup(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("cleanup", "idemhook cleanup --now --n8n-url URL --api-key-file FILE [--from DIR | options]\n\n"+
		"Runs the deployed cleanup workflow once, now, inside n8n (through a temporary workflow, deleted after).\n"+
		"It takes deploy's and check's options, so that one set of options serves the three; the cleanup\n"+
		"workflow is found by the name --name and --pattern give, and runs as deployed.")
	var r remote
	r.flags(fs)
	var credIDs multiFlag
	fs.Var(&credIDs, "credential-id", "`ID` of the credential to bind when several share its name (repeatable; deploy's and check's, no part here)")
	now := fs.Bool("now", false, "run it now (required: the schedule runs it otherwise)")
	if err := parse(fs, args, std.out); err != nil {
		return err
	}
	// The options deploy and check take that play no part here: the
	// deployed workflow runs with what it was deployed with.
	var ignored []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "n8n-url", "api-key-file", "webhook-url", "from", "pattern", "name", "now":
		default:
			ignored = append(ignored, "--"+f.Name)
		}
	})
	if len(ignored) > 0 && r.from == "" {
		fmt.Fprintf(std.err, "idemhook cleanup: note: %s change nothing here: the cleanup workflow deployed with them runs as it is\n", strings.Join(ignored, ", "))
	}
	if !*now {
		return usagef("--now is required (the deployed workflow's schedule runs it otherwise)")
	}
	client, ws, err := r.setup(fs)
	if err != nil {
		return err
	}
	name := ""
	for _, w := range ws {
		if w.File == generator.FileCleanup {
			name = w.Doc.Name
		}
	}
	if name == "" && r.from == "" && r.opts.KeysInKeysvc() {
		return usagef("%v", generator.ErrNoCleanupWorkflow)
	}
	if name == "" {
		return usagef("no cleanup workflow among the files")
	}
	if err := deploy.CleanupNow(ctx, client, name, r.deployOptions(std.err)); err != nil {
		return err
	}
	fmt.Fprintf(std.out, "ran %q\n", name)
	return nil
}
