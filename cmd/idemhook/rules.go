package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/idemhook/idemhook/internal/duration"
	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/pgsql"
	"github.com/idemhook/idemhook/internal/rules"
	"github.com/idemhook/idemhook/internal/rules/samples"
	"github.com/idemhook/idemhook/internal/sandbox"
	"github.com/idemhook/idemhook/internal/verify"
	"github.com/jackc/pgx/v5/pgxpool"
)

var rulesUsage = `Usage:
  idemhook rules init --preset NAME [--out FILE]   write a preset's rules file to start yours from
  idemhook rules check --rules RULES               validate and compile rules; print the types they handle
  idemhook rules schema                            print the JSON Schema of rules files
  idemhook rules test --rules RULES [options] DIR  run the sample events of DIR through the compiled
                                                   rules in a scratch PostgreSQL 16; for CI (--report)

RULES is a preset (` + strings.Join(rules.PresetNames(), ", ") + `) or a rules file (YAML or JSON). See docs/inbox.md.
`

// rulesCommands are the commands of idemhook rules.
var rulesCommands = map[string]command{
	"init":   runRulesInit,
	"check":  runRulesCheck,
	"schema": runRulesSchema,
	"test":   runRulesTest,
}

func runRules(ctx context.Context, args []string, std stdio) error {
	if len(args) == 0 {
		fmt.Fprint(std.err, rulesUsage)
		return usagef("give a command: init, check, schema or test")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(std.out, rulesUsage)
		return nil
	}
	if cmd, ok := rulesCommands[args[0]]; ok {
		return within("rules "+args[0], cmd(ctx, args[1:], std))
	}
	return unknownCommand(args[0], slices.Sorted(maps.Keys(rulesCommands)), "idemhook rules --help")
}

func runRulesSchema(_ context.Context, args []string, std stdio) error {
	fs := newFlagSet("rules schema", "idemhook rules schema\n\nPrints the JSON Schema of rules files (an editor validates and completes a rules file with it).")
	if err := parse(fs, args, std.out); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	_, err := std.out.Write(rules.Schema)
	return err
}

func runRulesInit(_ context.Context, args []string, std stdio) error {
	fs := newFlagSet("rules init", "idemhook rules init --preset NAME [--out FILE]\n\nWrites a preset's rules file, to edit into your own (docs/inbox.md).")
	preset := fs.String("preset", "", "the `PRESET` to start from: "+strings.Join(rules.PresetNames(), ", ")+" (required)")
	out := fs.String("out", "", "write to `FILE` instead of stdout (refused when it exists)")
	if err := parse(fs, args, std.out); err != nil {
		return err
	}
	if fs.NArg() > 0 || *preset == "" {
		return usagef("give --preset NAME and no argument")
	}
	data, err := rules.PresetFile(*preset)
	if err != nil {
		return asUsage(err)
	}
	if *out == "" {
		_, err := std.out.Write(data)
		return err
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return usagef("--out %s exists: give another file (rules init never replaces one)", *out)
	}
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err := errors.Join(err, f.Close()); err != nil {
		return err
	}
	fmt.Fprintf(std.out, "wrote %s (preset %s); its tables: %s\n", *out, *preset, tablesOf(mustPreset(*preset)))
	return nil
}

func mustPreset(name string) *rules.Rules {
	rs, _ := rules.Preset(name) // the embedded presets parse (tested)
	return rs
}

func tablesOf(rs *rules.Rules) string {
	var names []string
	for _, e := range rs.Entities {
		names = append(names, e.Table.String())
	}
	return strings.Join(names, ", ")
}

func runRulesCheck(_ context.Context, args []string, std stdio) error {
	fs := newFlagSet("rules check", "idemhook rules check --rules RULES\n\nValidates rules and compiles them; prints the event types they handle. Whether your tables and columns\nexist is not checked here: schema.sql checks it when applied, and rules test with your tables (--schema).")
	name := fs.String("rules", "", "a preset or a rules `FILE` (required)")
	if err := parse(fs, args, std.out); err != nil {
		return err
	}
	if fs.NArg() > 0 || *name == "" {
		return usagef("give --rules RULES and no argument")
	}
	rs, err := rules.Load(*name)
	if err == nil {
		_, err = generator.Schema(generator.Options{Pattern: generator.PatternInbox, InboxOptions: generator.InboxOptions{Rules: rs}})
	}
	if err != nil {
		return asUsage(err)
	}
	fmt.Fprintf(std.out, "%s: %d rules on %s; they handle %s\n", rs.Source, len(rs.Rules), tablesOf(rs), strings.Join(rs.Types(), ", "))
	fmt.Fprintln(std.out, "checked: the file's form, names and references, and that it compiles; not checked: that its tables and columns exist "+
		"and take its values, which schema.sql checks when applied, and rules test with your tables (--schema)")
	return nil
}

// rulesTest is what rules test runs, from its flags.
type rulesTest struct {
	rules       *rules.Rules
	samples     []*rules.Sample
	opts        generator.Options // the inbox pattern's, for the schema and the worker's allowlist
	schemas     []string          // --schema files
	report      string
	databaseURL string
	keep        bool
}

func runRulesTest(ctx context.Context, args []string, std stdio) error {
	t, err := rulesTestFlags(args, std.out)
	if err != nil {
		return err
	}
	db, err := rulesDatabase(ctx, t.databaseURL, t.opts.DBSchema, t.keep, std.err)
	if err != nil {
		return err
	}
	defer db.close()
	if err := t.applySchemas(ctx, db.pool); err != nil {
		return err
	}
	results, err := samples.Run(ctx, db.pool, t.rules, t.samples, samples.Options{
		Inbox: pgsql.Inbox{Schema: t.opts.DBSchema}, Allowed: t.opts.Events, DeferLimit: t.opts.DeferLimit})
	if err != nil {
		return err
	}
	samples.WriteTable(std.out, results)
	return t.judge(results)
}

// rulesTestFlags reads rules test's command line, the rules and the
// samples it names.
func rulesTestFlags(args []string, stdout io.Writer) (*rulesTest, error) {
	fs := newFlagSet("rules test", "idemhook rules test --rules RULES [options] DIR\n\n"+
		"Runs every sample event of DIR (*.yaml, *.yml, *.json; docs/inbox.md) through the decision compiled\n"+
		"from RULES, in a scratch PostgreSQL 16 started on this machine (installed on first use, about 60 MB),\n"+
		"or with --database-url in a scratch database of a PostgreSQL you run: each sample in a transaction of\n"+
		"its own, rolled back. Prints one line per sample; exits 1 when any sample decides otherwise than it expects.")
	t := &rulesTest{opts: generator.Options{Pattern: generator.PatternInbox}}
	name := fs.String("rules", "", "a preset or a rules `FILE` (required)")
	fs.Var((*multiFlag)(&t.schemas), "schema", "SQL `FILE` applied before the generated schema: your tables, which your rules name; repeatable")
	fs.StringVar(&t.opts.DBSchema, "db-schema", "", "PostgreSQL `SCHEMA` of the inbox tables and of your rules' unqualified tables, as with generate")
	events := fs.String("events", "", "the worker's allowlist, comma-separated `TYPES` (default: every type the rules handle)")
	duration.Var(fs, &t.opts.DeferLimit, "defer-limit", 24*time.Hour, "the worker's --defer-limit, a `DURATION`")
	fs.StringVar(&t.report, "report", "", "write the samples' results as JUnit XML to `FILE`")
	fs.StringVar(&t.databaseURL, "database-url", "", "run in a scratch database of the PostgreSQL (14 or newer) at `URL` (postgres://USER:PASSWORD@HOST:PORT/DATABASE), "+
		"or a scratch schema of its database when the user may not create databases; it is dropped at the end, and nothing else is touched")
	fs.BoolVar(&t.keep, "keep", false, "with --database-url, leave the scratch database (or schema) and print its name")
	if err := parse(fs, args, stdout); err != nil {
		return nil, err
	}
	if fs.NArg() != 1 || *name == "" {
		return nil, usagef("give --rules RULES and one folder of samples")
	}
	if t.keep && t.databaseURL == "" {
		return nil, usagef("--keep leaves the scratch database of --database-url: give --database-url")
	}
	if *events != "" {
		t.opts.Events = strings.Split(*events, ",")
	}
	var err error
	if t.rules, err = rules.Load(*name); err != nil {
		return nil, asUsage(err)
	}
	t.opts.Rules = t.rules
	if t.samples, err = rules.LoadSamples(fs.Arg(0)); err != nil {
		return nil, asUsage(err)
	}
	return t, nil
}

// applySchemas applies the --schema files, then the generated schema.
func (t *rulesTest) applySchemas(ctx context.Context, pool *pgxpool.Pool) error {
	schema, err := generator.Schema(t.opts)
	if err != nil {
		return asUsage(err)
	}
	extra, err := readFiles(t.schemas)
	if err != nil {
		return usagef("--schema: %v", err)
	}
	for i, sql := range append(extra, schema) {
		if _, err := pool.Exec(ctx, sql); err != nil {
			what := "the generated schema"
			if i < len(extra) {
				what = t.schemas[i]
			}
			return usagef("%s: %v", what, err)
		}
	}
	return nil
}

// judge writes the --report and fails when a sample decided otherwise
// than it expects.
func (t *rulesTest) judge(results []samples.Result) error {
	failed := 0
	checks := make([]verify.Check, len(results))
	for i, r := range results {
		checks[i] = verify.Check{Name: r.Name(), Status: verify.Pass, Seen: r.Summary(), Duration: r.Duration}
		if r.Failed() {
			checks[i].Status = verify.Fail
			failed++
		}
	}
	if t.report != "" {
		var b bytes.Buffer
		err := verify.WriteJUnit(&b, "idemhook rules test: "+t.rules.Source, "idemhook.rules", checks)
		if err == nil {
			err = writeReport(t.report, b.Bytes())
		}
		if err != nil {
			return fmt.Errorf("--report: %w", err)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d samples decided otherwise than they expect", failed, len(results))
	}
	return nil
}

// rulesDB is where rules test runs: a PostgreSQL started for it, or a
// scratch space on the user's.
type rulesDB struct {
	pool  *pgxpool.Pool
	close func()
}

// rulesDatabase starts PostgreSQL (installing it alone), or creates the
// scratch space on the server of databaseURL; an error when it cannot (a
// usage error for a server or a machine it cannot use as it is, with
// nothing created).
func rulesDatabase(ctx context.Context, databaseURL, dbSchema string, keep bool, stderr io.Writer) (*rulesDB, error) {
	pg, err := sandbox.Start(ctx, sandbox.Options{PostgresOnly: true, Progress: stderr, Why: "rules test runs the samples in it",
		DatabaseURL: databaseURL, Keep: keep, Scratch: sandbox.ScratchOptions{Purpose: "rules test"}, Who: "idemhook rules test"})
	var unreachable *sandbox.UnreachableError
	var refused *sandbox.ScratchError
	if err != nil && databaseURL == "" && !errors.As(err, &unreachable) { // that one's own words start with PostgreSQL
		err = fmt.Errorf("PostgreSQL: %w", err)
	}
	if errors.As(err, &refused) {
		return nil, asUsage(err)
	}
	if err != nil {
		return nil, sandboxError(err)
	}
	if pg.Scratch != nil && pg.Scratch.Schema && dbSchema != "" {
		pg.CloseAndRemove()
		return nil, usagef("--db-schema %s would create a schema beside the scratch one, in your database: give a user with CREATEDB (a scratch database holds it), or leave --db-schema out; nothing was created", dbSchema)
	}
	return &rulesDB{pool: pg.Business, close: func() { pg.CloseAndRemove() }}, nil
}

// writeReport writes a JUnit report, its folder made if need be (a CI
// job's reports/ is often not there yet).
func writeReport(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// readFiles reads each file, for --schema: the SQL files applied before
// a generated schema.
func readFiles(files []string) ([]string, error) {
	out := make([]string, len(files))
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out[i] = string(b)
	}
	return out, nil
}
