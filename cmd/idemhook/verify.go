package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/idemhook/idemhook/internal/lab"
	"github.com/idemhook/idemhook/internal/n8napi"
	"github.com/idemhook/idemhook/internal/sandbox"
	"github.com/idemhook/idemhook/internal/verify"
)

// verifyCommand is what verify's flags ask for.
type verifyCommand struct {
	file        string
	workflow    n8napi.Workflow
	guard       verify.Guard
	schemas     []lab.SQLFile
	opts        verify.Options
	report      string
	env         map[string]string
	databaseURL string
}

func runVerify(ctx context.Context, args []string, std stdio) error {
	v, err := verifyFlags(args, std.out)
	if err != nil {
		return err
	}
	if err := v.read(); err != nil {
		return err
	}
	// A workflow with idemhook's community node runs in an n8n that has the
	// package, built from this clone's source.
	l, target, err := lab.StartVerify(ctx, sandbox.Options{N8NEnv: v.env, Why: "verify runs your workflow in it", CommunityNode: v.guard.Node,
		DatabaseURL: v.databaseURL, Keep: v.opts.Keep, Who: "idemhook verify", Scratch: sandbox.ScratchOptions{Databases: true, Purpose: "verify (n8n's tables and your workflow's)"}},
		v.schemas, v.guard.Keysvc, std.err)
	var refused *sandbox.ScratchError
	var schema *lab.SchemaError
	if errors.As(err, &refused) || errors.As(err, &schema) {
		return asUsage(err)
	}
	if err != nil {
		return sandboxError(err)
	}
	defer l.Close()
	v.opts.Progress = std.err
	res, err := verify.Run(ctx, target, v.workflow, v.opts)
	var reportErr error
	if res != nil {
		res.WriteTable(std.out)
		if v.report != "" {
			var b bytes.Buffer
			if reportErr = res.WriteJUnit(&b); reportErr == nil {
				reportErr = writeReport(v.report, b.Bytes())
			}
		}
	}
	// The logs are kept for a run that failed: they say why.
	l.KeepLogs = err != nil || res == nil || !res.OK()
	if err != nil {
		err = fmt.Errorf("%w (n8n and PostgreSQL logs: %s)", err, l.LogDir)
		var unsupported *verify.UnsupportedError
		if errors.As(err, &unsupported) {
			err = asUsage(err)
		}
		return err
	}
	if v.opts.Keep {
		fmt.Fprintf(std.err, "idemhook verify: n8n at %s (log in as %s, password %s); Ctrl-C stops it\n", l.EditorURL, l.Email, l.Password)
		<-ctx.Done()
	}
	if !res.OK() {
		return fmt.Errorf("the workflow does not guard as it should (n8n and PostgreSQL logs: %s)", l.LogDir)
	}
	if reportErr != nil {
		return fmt.Errorf("--report: %w", reportErr)
	}
	return nil
}

// verifyFlags reads verify's command line.
func verifyFlags(args []string, stdout io.Writer) (*verifyCommand, error) {
	fs := newFlagSet("verify", "idemhook verify --workflow FILE [options]\n\n"+
		"Proves that your own workflow (exported from n8n, edited as you like) still guards: starts PostgreSQL 16\n"+
		"(or uses yours: --database-url) and n8n 2.41.1 on this machine, installing them on first use, applies the\n"+
		"schema, deploys the workflow with scratch credentials, and checks from n8n's execution data that a\n"+
		"replay, a body without id, simultaneous deliveries and a failing business step behave. HTTP calls in your business branch go where the workflow sends them:\n"+
		"point them at test endpoints (--env lets the workflow read where). Exit 0 when every check holds.")
	v := &verifyCommand{}
	fs.StringVar(&v.file, "workflow", "", "the workflow `FILE` (an n8n export: one workflow, or an array holding one)")
	var schemas, env, with multiFlag
	fs.Var(&schemas, "schema", "SQL `FILE` applied after the events table's schema (your business tables); repeatable")
	fs.IntVar(&v.opts.Deliveries, "deliveries", 10, "`N` distinct events sent in the distinct-events check")
	fs.IntVar(&v.opts.Concurrency, "concurrency", 20, "`N` simultaneous deliveries of one event")
	fs.StringVar(&v.report, "report", "", "write the checks as JUnit XML to `FILE`")
	fs.Var(&env, "env", "`KEY=VALUE` added to n8n's environment (your test endpoints); repeatable")
	fs.Var(&with, "with", "a workflow `FILE` the checked one relies on, deployed beside it: its error workflow (idemhook guard writes "+
		"release-on-failure-workflow.json); repeatable")
	fs.BoolVar(&v.opts.Keep, "keep", false, "keep n8n and PostgreSQL running after the checks, until Ctrl-C (with --database-url, and then leave the scratch databases, printing their names)")
	fs.StringVar(&v.databaseURL, "database-url", "", "run on the PostgreSQL (14 or newer) at `URL` (postgres://USER:PASSWORD@HOST:PORT/DATABASE) instead of installing one: "+
		"n8n and the workflow's tables go into two scratch databases, dropped at the end (the user needs CREATEDB); nothing else is touched")
	if err := parse(fs, args, stdout); err != nil {
		return nil, err
	}
	switch err := noArgs(fs); {
	case err != nil:
		return nil, err
	case v.file == "":
		return nil, usagef("--workflow FILE is required")
	case v.opts.Deliveries < 1 || v.opts.Deliveries > 1000:
		return nil, usagef("--deliveries %d: want 1 to 1000", v.opts.Deliveries)
	case v.opts.Concurrency < 2 || v.opts.Concurrency > 200:
		return nil, usagef("--concurrency %d: want 2 to 200", v.opts.Concurrency)
	}
	var err error
	if v.env, err = n8nEnv(env); err != nil {
		return nil, err
	}
	for _, f := range with {
		c, err := readWorkflow(f)
		if err != nil {
			return nil, usagef("--with: %v", err)
		}
		v.opts.Companions = append(v.opts.Companions, c)
	}
	for _, f := range schemas {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, usagef("--schema: %v", err)
		}
		v.schemas = append(v.schemas, lab.SQLFile{Name: f, SQL: string(b)})
	}
	return v, nil
}

// n8nEnv is the environment --env adds to n8n's.
func n8nEnv(env []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range env {
		k, val, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("--env %q: want KEY=VALUE", kv)
		}
		out[k] = val
	}
	if _, set := out["N8N_BLOCK_ENV_ACCESS_IN_NODE"]; len(out) > 0 && !set {
		// n8n 2.x blocks $env in expressions by default; --env is there to
		// be read.
		out["N8N_BLOCK_ENV_ACCESS_IN_NODE"] = "false"
	}
	return out, nil
}

// read reads the workflow, finds its guard and puts the events table's
// schema, when idemhook's, before the --schema files.
func (v *verifyCommand) read() error {
	w, err := readWorkflow(v.file)
	if err != nil {
		return asUsage(err)
	}
	v.workflow = w
	if v.guard, err = verify.Find(w); err != nil {
		return usagef("%s: %v", v.file, err)
	}
	switch {
	case v.guard.Keysvc: // keysvc creates its own table
	case v.guard.PlainEvents:
		schema, err := verify.EventsSchema(v.guard)
		if err != nil {
			return asUsage(err)
		}
		v.schemas = append([]lab.SQLFile{{Name: "the events table's schema", SQL: schema}}, v.schemas...)
	case len(v.schemas) == 0:
		return usagef("%q reserves into %s, which is not a table idemhook schema creates: pass its schema with --schema FILE (for the inbox pattern, the schema.sql idemhook generate wrote)", v.guard.Reserve, v.guard.EventsTable)
	}
	return nil
}

// readWorkflow reads an n8n workflow file: one workflow object, or the
// array n8n's export:workflow writes, holding one.
func readWorkflow(file string) (n8napi.Workflow, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return n8napi.Workflow{}, err
	}
	raw = bytes.TrimSpace(raw)
	if bytes.HasPrefix(raw, []byte("[")) {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return n8napi.Workflow{}, fmt.Errorf("%s: %v", file, err)
		}
		if len(list) != 1 {
			return n8napi.Workflow{}, fmt.Errorf("%s holds %d workflows: export the one to verify", file, len(list))
		}
		raw = list[0]
	}
	var w n8napi.Workflow
	if err := json.Unmarshal(raw, &w); err != nil {
		return w, fmt.Errorf("%s: not an n8n workflow: %v", file, err)
	}
	if w.Nodes == nil || w.Connections == nil {
		return w, fmt.Errorf("%s: not an n8n workflow (no nodes or connections)", file)
	}
	if w.Name == "" {
		w.Name = file
	}
	return w, nil
}
