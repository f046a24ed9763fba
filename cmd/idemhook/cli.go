package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/generator"
	"github.com/idemhook/idemhook/internal/buildinfo"
	"github.com/idemhook/idemhook/nodered"
	"github.com/idemhook/idemhook/planner"
	"github.com/idemhook/idemhook/signature"
)

// Exit codes: 1 when the work failed, 2 when the command line or the input
// was wrong.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// maxKeyInput bounds `idemhook key`; webhook bodies are far smaller.
const maxKeyInput = 64 << 20

const usage = `idemhook makes n8n webhook receivers safe to retry.

Usage:
  idemhook generate --out DIR [options]  write workflow.json, cleanup-workflow.json,
                                         schema.sql and credentials.example.json
                                         (--pattern inbox: the receiver, worker,
                                         recoverer, outbox and cleanup workflows)
  idemhook schema [options]              print the SQL schema
  idemhook key [FILE]                    print the idempotency key of a body
                                         (reads stdin when FILE is absent)
  idemhook planner --out DIR             write the planner page (key and workflow in
                                         the browser) for a static host or to open
                                         from disk
  idemhook deploy --n8n-url URL --api-key-file FILE [options]
                                         create or update the workflows in a running
                                         n8n through its API, publish them, prove
                                         them live
  idemhook check --n8n-url URL --api-key-file FILE [options]
                                         the same proof, changing nothing
  idemhook cleanup --now --n8n-url URL --api-key-file FILE
                                         run the cleanup workflow now, inside n8n
  idemhook up [options]                  a local lab: PostgreSQL, n8n and keysvc with
                                         the workflows live; Ctrl-C stops it all
  idemhook guard --workflow FILE --out FILE
                                         put the guard into a workflow you already
                                         run (or --n8n-url … --workflow-id ID
                                         --apply: in place, in n8n)
  idemhook verify --workflow FILE        prove that your own (edited, exported)
                                         workflow still guards, in a scratch n8n;
                                         for CI (--report junit.xml)
  idemhook rules init|check|schema|test  the inbox pattern's effect rules: start from a
                                         preset, validate, run sample events in CI
                                         (docs/inbox.md)
  idemhook bench [--out DIR]             measure keysvc against pgbench and each
                                         guard against your workflow without one,
                                         on a durable PostgreSQL and real n8n

  idemhook version                       print the module version and VCS revision

Run 'idemhook COMMAND --help' for the options of a command.
`

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "generate":
		return runGenerate(args[1:], stdout, stderr)
	case "schema":
		return runSchema(args[1:], stdout, stderr)
	case "key":
		return runKey(args[1:], stdin, stdout, stderr)
	case "planner":
		return runPlanner(args[1:], stdout, stderr)
	case "bench":
		return runBench(args[1:], stdout, stderr)
	case "deploy":
		return runDeploy(args[1:], stdout, stderr)
	case "check":
		return runCheck(args[1:], stdout, stderr)
	case "cleanup":
		return runCleanup(args[1:], stdout, stderr)
	case "up":
		return runUp(args[1:], stdout, stderr)
	case "verify":
		return runVerify(args[1:], stdout, stderr)
	case "guard":
		return runGuard(args[1:], stdout, stderr)
	case "rules":
		return runRules(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "version", "--version", "-version":
		fs := newFlagSet("version", "idemhook version\n\nPrints the module version and the VCS revision idemhook was built from.", stderr)
		if code, ok := parse(fs, args[1:], stdout); !ok {
			return code
		}
		fmt.Fprintln(stdout, buildinfo.Describe("idemhook"))
		return exitOK
	default:
		fmt.Fprintf(stderr, "idemhook: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
}

// optionFlags registers the generator options on fs (only those named,
// when names are given), from the one table the planner page uses too.
func optionFlags(fs *flag.FlagSet, o *generator.Options, names ...string) {
	for _, f := range generator.Flags {
		if len(names) > 0 && !slices.Contains(names, f.Name) {
			continue
		}
		usage := f.Usage
		if f.Default != "" {
			usage += " (default " + f.Default + ")"
		}
		fs.Func(f.Name, usage, func(v string) error { return f.Set(o, v) })
	}
}

func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s\n", synopsis)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprint(fs.Output(), "\nOptions:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parse parses args and maps the outcome to an exit code; ok is false when
// the command must stop with that code. --help prints the usage once, on
// stdout; a mistake prints one line, the flag package's reason, and where
// the help is. A generate option that does not apply to the chosen pattern
// is a mistake too (generator.CheckApplies), when o holds the options.
func parse(fs *flag.FlagSet, args []string, stdout io.Writer, o ...*generator.Options) (code int, ok bool) {
	stderr := fs.Output()
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout)
		fs.Usage()
		fs.SetOutput(stderr)
		return exitOK, false
	}
	if err != nil {
		fmt.Fprintf(stderr, "idemhook %s: %v\nrun 'idemhook %s --help' for its options\n", fs.Name(), err, fs.Name())
		return exitUsage, false
	}
	if len(o) > 0 {
		return checkApplies(fs, o[0])
	}
	return exitOK, true
}

// checkApplies refuses, after parse, a set option that o's pattern does
// not read.
func checkApplies(fs *flag.FlagSet, o *generator.Options) (code int, ok bool) {
	var set []string
	fs.Visit(func(f *flag.Flag) { set = append(set, f.Name) })
	if err := generator.CheckApplies(*o, set); err != nil {
		fmt.Fprintf(fs.Output(), "idemhook %s: %v\nrun 'idemhook %s --help' for its options\n", fs.Name(), err, fs.Name())
		return exitUsage, false
	}
	return exitOK, true
}

func runGenerate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("generate", "idemhook generate --out DIR [options]", stderr)
	var o generator.Options
	out := fs.String("out", "", "`DIR` to write the files into (created if missing; required)")
	target := fs.String("target", "n8n", "the low-code `TOOL` the files are for: n8n, or node-red (keysvc's guard as a Node-RED 5 flow: flows.json and README.md; "+
		"it takes --"+strings.Join(nodered.Flags, ", --")+")")
	optionFlags(fs, &o)
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	if *target == "node-red" {
		return generateNodeRED(fs, &o, *out, stdout, stderr)
	}
	if code, ok := checkApplies(fs, &o); !ok {
		return code
	}
	if *target != "n8n" {
		fmt.Fprintf(stderr, "idemhook generate: --target %q: use n8n or node-red\n", *target)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "idemhook generate: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *out == "" {
		fmt.Fprintln(stderr, "idemhook generate: --out DIR is required")
		return exitUsage
	}
	files, err := generator.Files(o)
	if err != nil {
		fmt.Fprintf(stderr, "idemhook generate: %v\n", err)
		return exitUsage
	}
	if err := writeFiles(*out, files, stdout); err != nil {
		fmt.Fprintf(stderr, "idemhook generate: %v\n", err)
		return exitFail
	}
	notes, _ := generator.Notes(o) // o is valid: Files accepted it
	for _, n := range notes {
		fmt.Fprintf(stderr, "idemhook generate: note: %s\n", n)
	}
	return exitOK
}

// generateNodeRED is generate --target node-red: the options the flow takes
// are read as generate reads them (the same names, values and checks), and
// an n8n option is refused with the reason.
func generateNodeRED(fs *flag.FlagSet, o *generator.Options, out string, stdout, stderr io.Writer) int {
	var refused []string
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "out" && f.Name != "target" && !slices.Contains(nodered.Flags, f.Name) {
			refused = append(refused, "--"+f.Name)
		}
	})
	switch {
	case len(refused) > 0:
		fmt.Fprintf(stderr, "idemhook generate: %s: n8n's, not the Node-RED flow's (keysvc keeps the keys; the flow takes --%s)\n", strings.Join(refused, ", "), strings.Join(nodered.Flags, ", --"))
		return exitUsage
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "idemhook generate: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	case out == "":
		fmt.Fprintln(stderr, "idemhook generate: --out DIR is required")
		return exitUsage
	}
	no, err := nodered.FromGenerate(*o)
	var files map[string][]byte
	if err == nil {
		files, err = nodered.Files(no)
	}
	if err != nil {
		fmt.Fprintf(stderr, "idemhook generate: %v\n", err)
		return exitUsage
	}
	if err := writeFiles(out, files, stdout); err != nil {
		fmt.Fprintf(stderr, "idemhook generate: %v\n", err)
		return exitFail
	}
	fmt.Fprintf(stderr, "idemhook generate: note: Node-RED reads KEYSVC_URL and KEYSVC_TOKEN (an admin token) from its environment; see %s\n", filepath.Join(out, nodered.FileReadme))
	return exitOK
}

func runSchema(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("schema", "idemhook schema [options]", stderr)
	var o generator.Options
	optionFlags(fs, &o, schemaFlags...)
	if code, ok := parse(fs, args, stdout, &o); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "idemhook schema: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	sql, err := generator.Schema(o)
	if err != nil {
		fmt.Fprintf(stderr, "idemhook schema: %v\n", err)
		return exitUsage
	}
	fmt.Fprint(stdout, sql)
	return exitOK
}

// schemaFlags are the generate options the schema depends on.
var schemaFlags = []string{"pattern", "events-table", "business-table", "guard", "db-schema"}

func runKey(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("key", "idemhook key [--preset PROVIDER] [--header 'NAME: VALUE']... [FILE]\n\n"+
		"Prints the idempotency key of a webhook body (docs/key-spec.md), as the workflows, keysvc and the planner\n"+
		"derive it; reads stdin without FILE. A preset reads the provider's delivery id from its --header.", stderr)
	preset := fs.String("preset", "", "where the event id is read, a `PROVIDER` preset: "+signature.Names()+" (default: the body's id)")
	scope := fs.String("scope", "", "`SCOPE` that prefixes a preset's key")
	var headers multiFlag
	fs.Var(&headers, "header", "a request header of the delivery, `'NAME: VALUE'` (repeatable)")
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	p, err := eventkey.ParsePreset(*preset)
	if err != nil {
		fmt.Fprintf(stderr, "idemhook key: --preset: %v\n", err)
		return exitUsage
	}
	h := http.Header{}
	for _, kv := range headers {
		name, value, ok := strings.Cut(kv, ":")
		if !ok || strings.TrimSpace(name) == "" {
			fmt.Fprintf(stderr, "idemhook key: --header %q: want 'NAME: VALUE'\n", kv)
			return exitUsage
		}
		h.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	if fs.NArg() > 1 {
		fmt.Fprintln(stderr, "idemhook key: give at most one FILE")
		return exitUsage
	}
	in, name := stdin, "stdin"
	if fs.NArg() == 1 {
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			fmt.Fprintf(stderr, "idemhook key: %v\n", err)
			return exitUsage
		}
		defer f.Close()
		in, name = f, fs.Arg(0)
	}
	body, err := io.ReadAll(io.LimitReader(in, maxKeyInput+1))
	if err != nil {
		fmt.Fprintf(stderr, "idemhook key: read %s: %v\n", name, err)
		return exitFail
	}
	if len(body) > maxKeyInput {
		fmt.Fprintf(stderr, "idemhook key: %s is larger than %d MiB\n", name, maxKeyInput>>20)
		return exitUsage
	}
	k, err := eventkey.DeriveFor(p, h, body, *scope)
	if err != nil {
		fmt.Fprintf(stderr, "idemhook key: %s: %v\n", name, err)
		return exitUsage
	}
	fmt.Fprintln(stdout, k.Value)
	return exitOK
}

func runPlanner(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("planner", "idemhook planner --out DIR\n\nWrites the planner page: paste a delivery, see its key, download the workflow; all in the browser.", stderr)
	out := fs.String("out", "", "`DIR` to write the page into (created if missing; required)")
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "idemhook planner: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *out == "" {
		fmt.Fprintln(stderr, "idemhook planner: --out DIR is required")
		return exitUsage
	}
	files, err := planner.Files()
	if err != nil {
		fmt.Fprintf(stderr, "idemhook planner: %v\n", err)
		return exitFail
	}
	if err := writeFiles(*out, files, stdout); err != nil {
		fmt.Fprintf(stderr, "idemhook planner: %v\n", err)
		return exitFail
	}
	fmt.Fprintf(stdout, "open %s in a browser, or serve the folder from any static host\n", filepath.Join(*out, "index.html"))
	return exitOK
}

// writeFiles writes files into dir (created if missing), in name order,
// naming each on stdout.
func writeFiles(dir string, files map[string][]byte, stdout io.Writer) error {
	paths, err := generator.WriteFiles(dir, files)
	for _, p := range paths {
		fmt.Fprintln(stdout, "wrote", p)
	}
	return err
}
