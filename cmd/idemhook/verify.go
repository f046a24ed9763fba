package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/idemhook/idemhook/internal/sandbox"
	"github.com/idemhook/idemhook/lab"
	"github.com/idemhook/idemhook/n8napi"
	"github.com/idemhook/idemhook/verify"
)

func runVerify(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("verify", "idemhook verify --workflow FILE [options]\n\n"+
		"Proves that your own workflow (exported from n8n, edited as you like) still guards: starts PostgreSQL 16\n"+
		"(or uses yours: --database-url) and n8n 2.41.1 on this machine, installing them on first use, applies the\n"+
		"schema, deploys the workflow with scratch credentials, and checks from n8n's execution data that a\n"+
		"replay, a body without id, simultaneous deliveries and a failing business step behave. HTTP calls in your business branch go where the workflow sends them:\n"+
		"point them at test endpoints (--env lets the workflow read where). Exit 0 when every check holds.", stderr)
	file := fs.String("workflow", "", "the workflow `FILE` (an n8n export: one workflow, or an array holding one)")
	var schemas multiFlag
	fs.Var(&schemas, "schema", "SQL `FILE` applied after the events table's schema (your business tables); repeatable")
	deliveries := fs.Int("deliveries", 10, "`N` distinct events sent in the distinct-events check")
	concurrency := fs.Int("concurrency", 20, "`N` simultaneous deliveries of one event")
	report := fs.String("report", "", "write the checks as JUnit XML to `FILE`")
	var env multiFlag
	fs.Var(&env, "env", "`KEY=VALUE` added to n8n's environment (your test endpoints); repeatable")
	var with multiFlag
	fs.Var(&with, "with", "a workflow `FILE` the checked one relies on, deployed beside it: its error workflow (idemhook guard writes "+
		"release-on-failure-workflow.json); repeatable")
	keep := fs.Bool("keep", false, "keep n8n and PostgreSQL running after the checks, until Ctrl-C (with --database-url, and then leave the scratch databases, printing their names)")
	databaseURL := fs.String("database-url", "", "run on the PostgreSQL (14 or newer) at `URL` (postgres://USER:PASSWORD@HOST:PORT/DATABASE) instead of installing one: "+
		"n8n and the workflow's tables go into two scratch databases, dropped at the end (the user needs CREATEDB); nothing else is touched")
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	fail := func(err error) int { return exitWith(stderr, "verify", err) }
	switch err := noArgs(fs); {
	case err != nil:
		return fail(err)
	case *file == "":
		return fail(usagef("--workflow FILE is required"))
	case *deliveries < 1 || *deliveries > 1000:
		return fail(usagef("--deliveries %d: want 1 to 1000", *deliveries))
	case *concurrency < 2 || *concurrency > 200:
		return fail(usagef("--concurrency %d: want 2 to 200", *concurrency))
	}
	n8nEnv := map[string]string{}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fail(usagef("--env %q: want KEY=VALUE", kv))
		}
		n8nEnv[k] = v
	}
	if _, set := n8nEnv["N8N_BLOCK_ENV_ACCESS_IN_NODE"]; len(n8nEnv) > 0 && !set {
		// n8n 2.x blocks $env in expressions by default; --env is there to
		// be read.
		n8nEnv["N8N_BLOCK_ENV_ACCESS_IN_NODE"] = "false"
	}
	w, err := readWorkflow(*file)
	if err != nil {
		return fail(asUsage(err))
	}
	var companions []n8napi.Workflow
	for _, f := range with {
		c, err := readWorkflow(f)
		if err != nil {
			return fail(usagef("--with: %v", err))
		}
		companions = append(companions, c)
	}
	guard, err := verify.Find(w)
	if err != nil {
		return fail(usagef("%s: %v", *file, err))
	}
	var schema string
	switch {
	case guard.Keysvc: // keysvc creates its own table
	case guard.PlainEvents:
		if schema, err = verify.EventsSchema(guard); err != nil {
			return fail(asUsage(err))
		}
	case len(schemas) == 0:
		return fail(usagef("%q reserves into %s, which is not a table idemhook schema creates: pass its schema with --schema FILE (for the inbox pattern, the schema.sql idemhook generate wrote)", guard.Reserve, guard.EventsTable))
	}
	extra, err := readFiles(schemas)
	if err != nil {
		return fail(usagef("--schema: %v", err))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A workflow with idemhook's community node runs in an n8n that has the
	// package, built from this clone's source.
	opts := sandbox.Options{N8NEnv: n8nEnv, Why: "verify runs your workflow in it", CommunityNode: guard.Node,
		DatabaseURL: *databaseURL, Keep: *keep, Who: "idemhook verify", Scratch: sandbox.ScratchOptions{Databases: true, Purpose: "verify (n8n's tables and your workflow's)"}}
	l, err := lab.StartEmpty(ctx, opts, stderr)
	var refused *sandbox.ScratchError
	if errors.As(err, &refused) {
		return fail(asUsage(err))
	}
	if err != nil {
		return fail(stackError(err))
	}
	defer l.Close()
	for i, sql := range append([]string{schema}, extra...) {
		if sql == "" {
			continue
		}
		if err := l.Exec(ctx, sql); err != nil {
			name := "the events table's schema"
			if i > 0 {
				name = schemas[i-1]
			}
			return fail(usagef("%s: %v", name, err))
		}
	}
	target := verify.Target{API: l.API, WebhookURL: l.WebhookURL, SigningSecret: l.SigningSecret, Credentials: map[string]n8napi.Credential{}}
	for _, typ := range []string{"postgres", "crypto"} {
		c, err := l.CreateCredential(ctx, typ, "idemhook verify "+typ)
		if err != nil {
			return fail(err)
		}
		target.Credentials[typ] = c
	}
	if guard.Keysvc {
		// A scratch keysvc on loopback without tokens: it accepts the
		// workflow's calls with or without its bearer credential.
		l.KeysvcToken = ""
		err := l.StartKeysvc(ctx)
		if err == nil {
			target.KeysvcURL = l.KeysvcURL
			target.Credentials["httpBearerAuth"], err = l.API.CreateCredential(ctx, "idemhook verify keysvc", "httpBearerAuth", map[string]any{"token": "scratch-keysvc-accepts-any"})
		}
		if err != nil {
			return fail(fmt.Errorf("keysvc: %w", err))
		}
	}
	res, err := verify.Run(ctx, target, w, verify.Options{Concurrency: *concurrency, Deliveries: *deliveries, Keep: *keep, Progress: stderr, Companions: companions})
	var reportErr error
	if res != nil {
		res.WriteTable(stdout)
		if *report != "" {
			var b bytes.Buffer
			if reportErr = res.WriteJUnit(&b); reportErr == nil {
				reportErr = writeReport(*report, b.Bytes())
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
		return fail(err)
	}
	if *keep {
		fmt.Fprintf(stderr, "idemhook verify: n8n at %s (log in as %s, password %s); Ctrl-C stops it\n", l.EditorURL, l.Email, l.Password)
		<-ctx.Done()
	}
	if !res.OK() {
		return fail(fmt.Errorf("the workflow does not guard as it should (n8n and PostgreSQL logs: %s)", l.LogDir))
	}
	if reportErr != nil {
		return fail(fmt.Errorf("--report: %w", reportErr))
	}
	return exitOK
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
