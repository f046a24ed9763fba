package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/internal/buildinfo"
	"github.com/idemhook/idemhook/internal/generator"
	"github.com/idemhook/idemhook/internal/nodered"
	"github.com/idemhook/idemhook/internal/planner"
	"github.com/idemhook/idemhook/signature"
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
  idemhook node-upgrade --workflow FILE --out FILE
                                         move a workflow that n8n-nodes-idemhook 0.1.0
                                         saved onto today's packages
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

Run 'idemhook help COMMAND' (or 'idemhook COMMAND --help') for the options of a command.
`

// stdio is a command's standard streams.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// A command runs with the arguments after its name; run writes the error
// it returns, by exitWith's one rule.
type command func(ctx context.Context, args []string, std stdio) error

// commands are idemhook's commands by name; help and the flags --help and
// --version are run's own.
var commands = map[string]command{
	"generate": runGenerate,
	"schema":   runSchema,
	"key":      runKey,
	"planner":  runPlanner,
	"bench":    runBench,
	"deploy":   runDeploy,
	"check":    runCheck,
	"cleanup":  runCleanup,
	"up":       runUp,
	"verify":   runVerify,
	"guard":    runGuard,
	"rules":    runRules,
	"version":  runVersion,
	// node-upgrade moves a workflow n8n-nodes-idemhook 0.1.0 saved.
	"node-upgrade": runNodeUpgrade,
}

// run runs the command args name and returns its exit code; ctx ends on
// Ctrl-C or SIGTERM.
func run(ctx context.Context, args []string, std stdio) int {
	if len(args) == 0 {
		fmt.Fprint(std.err, usage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprint(std.out, usage)
		return exitOK
	case "help":
		switch len(args) {
		case 1:
			fmt.Fprint(std.out, usage)
			return exitOK
		case 2: // a command's own help
			return run(ctx, []string{args[1], "--help"}, std)
		}
		return exitWith(std.err, "help", usagef("give one command, as in 'idemhook help generate'"))
	case "--version", "-version":
		return exitWith(std.err, "version", runVersion(ctx, args[1:], std))
	}
	if cmd, ok := commands[args[0]]; ok {
		return exitWith(std.err, args[0], cmd(ctx, args[1:], std))
	}
	return exitWith(std.err, "", unknownCommand(args[0], slices.Sorted(maps.Keys(commands)), "idemhook help"))
}

// unknownCommand refuses word as a command of names, with the one meant
// when it is close to one; a word that starts with a dash is measured
// against --help and --version. help names the command listing them.
func unknownCommand(word string, names []string, help string) error {
	meant := suggest(word, names)
	if bare := strings.TrimLeft(word, "-"); bare != word {
		if meant = suggest(bare, []string{"help", "version"}); meant != "" {
			meant = "--" + meant
		}
	}
	if meant != "" {
		return usagef("unknown command %q: did you mean %s? ('%s' lists the commands)", word, meant, help)
	}
	return usagef("unknown command %q ('%s' lists the commands)", word, help)
}

func runVersion(_ context.Context, args []string, std stdio) error {
	fs := newFlagSet("version", "idemhook version\n\nPrints the module version and the VCS revision idemhook was built from.")
	if err := parse(fs, args, std.out); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	fmt.Fprintln(std.out, buildinfo.Describe("idemhook"))
	return nil
}

// noArgs refuses the arguments left after fs's flags.
func noArgs(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q (run 'idemhook %s --help' for its usage)", fs.Arg(0), fs.Name())
	}
	return nil
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

// newFlagSet is a command's flag set; its usage is synopsis and the flags.
func newFlagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse says what is wrong, in one line
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

// parse parses args. --help prints the usage once, on stdout, and returns
// flag.ErrHelp (exit 0); a mistake is a usage error of one line: the flag
// package's reason, the flag meant when an unknown one is close to one,
// and where the help is.
func parse(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout)
		fs.Usage()
		fs.SetOutput(io.Discard)
		return flag.ErrHelp
	}
	if err != nil {
		return flagError(fs, err)
	}
	return nil
}

// flagError is the flag package's err as a usage error, with the flag
// meant when an unknown one is close to one of fs's, and where the help is.
func flagError(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if meant := suggest(strings.TrimLeft(name, "-"), names); meant != "" {
			msg += ": did you mean --" + meant + "?"
		}
	}
	return usagef("%s (run 'idemhook %s --help' for its options)", msg, fs.Name())
}

// checkApplies refuses, after parse, a set option that o's pattern does
// not read (generator.CheckApplies).
func checkApplies(fs *flag.FlagSet, o generator.Options) error {
	var set []string
	fs.Visit(func(f *flag.Flag) { set = append(set, f.Name) })
	if err := generator.CheckApplies(o, set); err != nil {
		return usagef("%v (run 'idemhook %s --help' for its options)", err, fs.Name())
	}
	return nil
}

func runGenerate(_ context.Context, args []string, std stdio) error {
	fs := newFlagSet("generate", "idemhook generate --out DIR [options]")
	var o generator.Options
	out := fs.String("out", "", "`DIR` to write the files into (created if missing; required)")
	target := fs.String("target", "n8n", "the low-code `TOOL` the files are for: n8n, or node-red (keysvc's guard as a Node-RED 5 flow: flows.json and README.md; "+
		"it takes --"+strings.Join(nodered.Flags, ", --")+")")
	optionFlags(fs, &o)
	if err := parse(fs, args, std.out); err != nil {
		return err
	}
	if *target == "node-red" {
		return generateNodeRED(fs, &o, *out, std)
	}
	if err := checkApplies(fs, o); err != nil {
		return err
	}
	switch err := noArgs(fs); {
	case *target != "n8n":
		return usagef("--target %q: use n8n or node-red", *target)
	case err != nil:
		return err
	case *out == "":
		return usagef("--out DIR is required")
	}
	files, err := generator.Files(o)
	if err != nil {
		return asUsage(err)
	}
	if err := writeFiles(*out, files, std.out); err != nil {
		return err
	}
	notes, _ := generator.Notes(o) // o is valid: Files accepted it
	for _, n := range notes {
		fmt.Fprintf(std.err, "idemhook generate: note: %s\n", n)
	}
	return nil
}

// generateNodeRED is generate --target node-red: the options the flow takes
// are read as generate reads them (the same names, values and checks), and
// an n8n option is refused with the reason.
func generateNodeRED(fs *flag.FlagSet, o *generator.Options, out string, std stdio) error {
	var refused []string
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "out" && f.Name != "target" && !slices.Contains(nodered.Flags, f.Name) {
			refused = append(refused, "--"+f.Name)
		}
	})
	switch err := noArgs(fs); {
	case len(refused) > 0:
		return usagef("%s: n8n's, not the Node-RED flow's (keysvc keeps the keys; the flow takes --%s)", strings.Join(refused, ", "), strings.Join(nodered.Flags, ", --"))
	case err != nil:
		return err
	case out == "":
		return usagef("--out DIR is required")
	}
	no, err := nodered.FromGenerate(*o)
	var files map[string][]byte
	if err == nil {
		files, err = nodered.Files(no)
	}
	if err != nil {
		return asUsage(err)
	}
	if err := writeFiles(out, files, std.out); err != nil {
		return err
	}
	fmt.Fprintf(std.err, "idemhook generate: note: Node-RED reads KEYSVC_URL and KEYSVC_TOKEN (an admin token) from its environment; see %s\n", filepath.Join(out, nodered.FileReadme))
	return nil
}

func runSchema(_ context.Context, args []string, std stdio) error {
	fs := newFlagSet("schema", "idemhook schema [options]")
	var o generator.Options
	optionFlags(fs, &o, schemaFlags...)
	if err := parse(fs, args, std.out); err != nil {
		return err
	}
	if err := checkApplies(fs, o); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	sql, err := generator.Schema(o)
	if err != nil {
		return asUsage(err)
	}
	fmt.Fprint(std.out, sql)
	return nil
}

// schemaFlags are the generate options the schema depends on.
var schemaFlags = []string{"pattern", "events-table", "business-table", "guard", "db-schema"}

func runKey(_ context.Context, args []string, std stdio) error {
	fs := newFlagSet("key", "idemhook key [--preset PROVIDER [--scope SCOPE] [--header 'NAME: VALUE']...] [FILE]\n\n"+
		"Prints the idempotency key of a webhook body (docs/key-spec.md), as the workflows, keysvc and the planner\n"+
		"derive it; reads stdin without FILE. A preset reads the provider's delivery id from its --header.")
	preset := fs.String("preset", "", "where the event id is read, a `PROVIDER` preset: "+signature.Names()+" (default: the body's id)")
	scope := fs.String("scope", "", "`SCOPE` that prefixes a preset's key (with --preset "+strings.Join(scopedPresets(), ", ")+")")
	var headers multiFlag
	fs.Var(&headers, "header", "a request header of the delivery, `'NAME: VALUE'`, where a --preset reads the delivery id (repeatable)")
	if err := parse(fs, args, std.out); err != nil {
		return err
	}
	body, err := readKeyInput(fs, *preset, *scope, headers, std.in)
	var k eventkey.Key
	if err == nil {
		k, err = eventkey.DeriveFor(eventkey.Preset(*preset), body.header, body.bytes, *scope)
		if err != nil {
			err = usagef("%s: %v", body.name, err)
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(std.out, k.Value)
	return nil
}

// keyInput is what `idemhook key` derives a key from.
type keyInput struct {
	name   string // the file's, or "stdin"
	bytes  []byte
	header http.Header
}

// readKeyInput checks key's options and reads its body, from the file
// argument or stdin. A scope, or a header, that the preset does not read is
// refused: the key would ignore it without a word.
func readKeyInput(fs *flag.FlagSet, preset, scope string, headers []string, stdin io.Reader) (keyInput, error) {
	p, err := eventkey.ParsePreset(preset)
	if err != nil {
		return keyInput{}, usagef("--preset: %v", err)
	}
	if err := p.CheckScope(scope); err != nil {
		return keyInput{}, usagef("--scope %q: %v; a scope prefixes the key of --preset %s", scope, err, strings.Join(scopedPresets(), ", "))
	}
	in := keyInput{name: "stdin", header: http.Header{}}
	for _, kv := range headers {
		name, value, ok := strings.Cut(kv, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return keyInput{}, usagef("--header %q: want 'NAME: VALUE'", kv)
		}
		name = http.CanonicalHeaderKey(strings.TrimSpace(name))
		if name != "Content-Type" && !slices.Contains(p.Headers(), name) {
			reads := "only Content-Type (for a multipart form)"
			if len(p.Headers()) > 0 {
				reads = strings.Join(p.Headers(), ", ") + " and Content-Type (for a multipart form)"
			}
			return keyInput{}, usagef("--header %q: %s reads %s, not %s%s", kv, presetName(p), reads, name, presetReading(name))
		}
		in.header.Add(name, strings.TrimSpace(value))
	}
	if fs.NArg() > 1 {
		return keyInput{}, usagef("give at most one FILE")
	}
	src := stdin
	if fs.NArg() == 1 {
		in.name = fs.Arg(0)
		if fi, err := os.Stat(in.name); err == nil && fi.IsDir() {
			return keyInput{}, usagef("%s is a folder: give the file of one body (or the body on stdin)", in.name)
		}
		f, err := os.Open(in.name)
		if err != nil {
			return keyInput{}, asUsage(err)
		}
		defer f.Close()
		src = f
	}
	if in.bytes, err = io.ReadAll(io.LimitReader(src, maxKeyInput+1)); err != nil {
		return keyInput{}, fmt.Errorf("read %s: %w", in.name, err)
	}
	if len(in.bytes) > maxKeyInput {
		return keyInput{}, usagef("%s is larger than %d MiB", in.name, maxKeyInput>>20)
	}
	return in, nil
}

// presetName names p in a sentence.
func presetName(p eventkey.Preset) string {
	if p == eventkey.PresetDefault {
		return "the default key"
	}
	return "--preset " + string(p)
}

// presetReading is "; --preset P reads it" for the preset that reads
// header, or "".
func presetReading(header string) string {
	for _, p := range signature.Providers {
		if slices.Contains(eventkey.Preset(p).Headers(), header) {
			return "; --preset " + string(p) + " reads it"
		}
	}
	return ""
}

// scopedPresets are the presets that take a scope (and read a header or
// a body member of their own).
func scopedPresets() []string {
	var out []string
	for _, p := range signature.Providers {
		if eventkey.Preset(p).Scoped() {
			out = append(out, string(p))
		}
	}
	return out
}

func runPlanner(_ context.Context, args []string, std stdio) error {
	fs := newFlagSet("planner", "idemhook planner --out DIR\n\nWrites the planner page: paste a delivery, see its key, download the workflow; all in the browser.")
	out := fs.String("out", "", "`DIR` to write the page into (created if missing; required)")
	if err := parse(fs, args, std.out); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if *out == "" {
		return usagef("--out DIR is required")
	}
	files, err := planner.Files(std.err)
	if err != nil {
		return err
	}
	if err := writeFiles(*out, files, std.out); err != nil {
		return err
	}
	fmt.Fprintf(std.out, "open %s in a browser, or serve the folder from any static host\n", filepath.Join(*out, "index.html"))
	return nil
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
