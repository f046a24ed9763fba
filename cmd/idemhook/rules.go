package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/idemhook/idemhook/generator"
	"github.com/idemhook/idemhook/internal/duration"
	"github.com/idemhook/idemhook/internal/sandbox"
	"github.com/idemhook/idemhook/pgsql"
	"github.com/idemhook/idemhook/rules"
	"github.com/idemhook/idemhook/rules/samples"
	"github.com/idemhook/idemhook/verify"
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
var rulesCommands = map[string]func(args []string, stdout, stderr io.Writer) int{
	"init":   runRulesInit,
	"check":  runRulesCheck,
	"schema": runRulesSchema,
	"test":   runRulesTest,
}

func runRules(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, rulesUsage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, rulesUsage)
		return exitOK
	}
	if cmd, ok := rulesCommands[args[0]]; ok {
		return cmd(args[1:], stdout, stderr)
	}
	return exitWith(stderr, "rules", unknownCommand(args[0], slices.Sorted(maps.Keys(rulesCommands)), "idemhook rules --help"))
}

func runRulesSchema(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("rules schema", "idemhook rules schema\n\nPrints the JSON Schema of rules files (an editor validates and completes a rules file with it).", stderr)
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	if err := noArgs(fs); err != nil {
		return exitWith(stderr, "rules schema", err)
	}
	stdout.Write(rules.Schema)
	return exitOK
}

func runRulesInit(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("rules init", "idemhook rules init --preset NAME [--out FILE]\n\nWrites a preset's rules file, to edit into your own (docs/inbox.md).", stderr)
	preset := fs.String("preset", "", "the `PRESET` to start from: "+strings.Join(rules.PresetNames(), ", ")+" (required)")
	out := fs.String("out", "", "write to `FILE` instead of stdout (refused when it exists)")
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() > 0 || *preset == "" {
		return exitWith(stderr, "rules init", usagef("give --preset NAME and no argument"))
	}
	data, err := rules.PresetFile(*preset)
	if err != nil {
		return exitWith(stderr, "rules init", asUsage(err))
	}
	if *out == "" {
		stdout.Write(data)
		return exitOK
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return exitWith(stderr, "rules init", usagef("--out %s exists: give another file (rules init never replaces one)", *out))
	}
	if err == nil {
		_, err = f.Write(data)
		err = errorsJoin(err, f.Close())
	}
	if err != nil {
		return exitWith(stderr, "rules init", err)
	}
	fmt.Fprintf(stdout, "wrote %s (preset %s); its tables: %s\n", *out, *preset, tablesOf(mustPreset(*preset)))
	return exitOK
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
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

func runRulesCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("rules check", "idemhook rules check --rules RULES\n\nValidates rules and compiles them; prints the event types they handle. Whether your tables and columns\nexist is not checked here: schema.sql checks it when applied, and rules test with your tables (--schema).", stderr)
	name := fs.String("rules", "", "a preset or a rules `FILE` (required)")
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() > 0 || *name == "" {
		return exitWith(stderr, "rules check", usagef("give --rules RULES and no argument"))
	}
	rs, err := rules.Load(*name)
	if err == nil {
		_, err = generator.Schema(generator.Options{Pattern: generator.PatternInbox, Rules: rs})
	}
	if err != nil {
		return exitWith(stderr, "rules check", asUsage(err))
	}
	fmt.Fprintf(stdout, "%s: %d rules on %s; they handle %s\n", rs.Source, len(rs.Rules), tablesOf(rs), strings.Join(rs.Types(), ", "))
	fmt.Fprintln(stdout, "checked: the file's form, names and references, and that it compiles; not checked: that its tables and columns exist "+
		"and take its values, which schema.sql checks when applied, and rules test with your tables (--schema)")
	return exitOK
}

func runRulesTest(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("rules test", "idemhook rules test --rules RULES [options] DIR\n\n"+
		"Runs every sample event of DIR (*.yaml, *.yml, *.json; docs/inbox.md) through the decision compiled\n"+
		"from RULES, in a scratch PostgreSQL 16 started on this machine (installed on first use, about 60 MB),\n"+
		"or with --database-url in a scratch database of a PostgreSQL you run: each sample in a transaction of\n"+
		"its own, rolled back. Prints one line per sample; exits 1 when any sample decides otherwise than it expects.", stderr)
	name := fs.String("rules", "", "a preset or a rules `FILE` (required)")
	var schemas multiFlag
	fs.Var(&schemas, "schema", "SQL `FILE` applied before the generated schema: your tables, which your rules name; repeatable")
	dbSchema := fs.String("db-schema", "", "PostgreSQL `SCHEMA` of the inbox tables and of your rules' unqualified tables, as with generate")
	events := fs.String("events", "", "the worker's allowlist, comma-separated `TYPES` (default: every type the rules handle)")
	deferLimit := fs.String("defer-limit", "24h", "the worker's --defer-limit, a `DURATION`")
	report := fs.String("report", "", "write the samples' results as JUnit XML to `FILE`")
	databaseURL := fs.String("database-url", "", "run in a scratch database of the PostgreSQL (14 or newer) at `URL` (postgres://USER:PASSWORD@HOST:PORT/DATABASE), "+
		"or a scratch schema of its database when the user may not create databases; it is dropped at the end, and nothing else is touched")
	keep := fs.Bool("keep", false, "with --database-url, leave the scratch database (or schema) and print its name")
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	fail := func(err error) int { return exitWith(stderr, "rules test", err) }
	if fs.NArg() != 1 || *name == "" {
		return fail(usagef("give --rules RULES and one folder of samples"))
	}
	rs, err := rules.Load(*name)
	if err != nil {
		return fail(asUsage(err))
	}
	all, err := rules.LoadSamples(fs.Arg(0))
	if err != nil {
		return fail(asUsage(err))
	}
	opts := generator.Options{Pattern: generator.PatternInbox, Rules: rs, DBSchema: *dbSchema}
	if *events != "" {
		opts.Events = strings.Split(*events, ",")
	}
	if opts.DeferLimit, err = duration.Parse(*deferLimit); err != nil {
		return fail(usagef("--defer-limit: %v", err))
	}
	schema, err := generator.Schema(opts)
	if err != nil {
		return fail(asUsage(err))
	}
	extra, err := readFiles(schemas)
	if err != nil {
		return fail(usagef("--schema: %v", err))
	}

	if *keep && *databaseURL == "" {
		return fail(usagef("--keep leaves the scratch database of --database-url: give --database-url"))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	db, err := rulesDatabase(ctx, *databaseURL, *dbSchema, *keep, stderr)
	if err != nil {
		return fail(err)
	}
	defer db.close()
	for i, sql := range append(extra, schema) {
		if _, err := db.pool.Exec(ctx, sql); err != nil {
			what := "the generated schema"
			if i < len(extra) {
				what = schemas[i]
			}
			return fail(usagef("%s: %v", what, err))
		}
	}
	results, err := samples.Run(ctx, db.pool, rs, all, samples.Options{
		Inbox: pgsql.Inbox{Schema: *dbSchema}, Allowed: opts.Events, DeferLimit: opts.DeferLimit})
	if err != nil {
		return fail(err)
	}
	samples.WriteTable(stdout, results)
	failed := 0
	checks := make([]verify.Check, len(results))
	for i, r := range results {
		checks[i] = verify.Check{Name: r.Name(), Status: verify.Pass, Seen: r.Summary(), Duration: r.Duration}
		if r.Failed() {
			checks[i].Status = verify.Fail
			failed++
		}
	}
	if *report != "" {
		var b bytes.Buffer
		err := verify.WriteJUnit(&b, "idemhook rules test: "+rs.Source, "idemhook.rules", checks)
		if err == nil {
			err = writeReport(*report, b.Bytes())
		}
		if err != nil {
			return fail(fmt.Errorf("--report: %w", err))
		}
	}
	if failed > 0 {
		return fail(fmt.Errorf("%d of %d samples decided otherwise than they expect", failed, len(results)))
	}
	return exitOK
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
		return nil, stackError(err)
	}
	if pg.Scratch != nil && pg.Scratch.Schema && dbSchema != "" {
		pg.CloseAndRemove()
		return nil, usagef("--db-schema %s would create a schema beside the scratch one, in your database: give a user with CREATEDB (a scratch database holds it), or leave --db-schema out; nothing was created", dbSchema)
	}
	return &rulesDB{pool: pg.Business, close: func() { pg.CloseAndRemove() }}, nil
}

// stackError marks as a usage error what this machine cannot run as it is:
// a platform without builds (*sandbox.PlatformError), a cache folder the
// PostgreSQL user cannot reach (*sandbox.UnreachableError).
func stackError(err error) error {
	var platform *sandbox.PlatformError
	var unreachable *sandbox.UnreachableError
	if errors.As(err, &platform) || errors.As(err, &unreachable) {
		return asUsage(err)
	}
	return err
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
