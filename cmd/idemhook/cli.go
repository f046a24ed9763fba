package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/idemhook/idemhook/eventkey"
	"github.com/idemhook/idemhook/generator"
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
  idemhook schema [options]              print the SQL schema
  idemhook key [FILE]                    print the idempotency key of a body
                                         (reads stdin when FILE is absent)

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
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "idemhook: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
}

// optionFlags registers the generator options on fs.
func optionFlags(fs *flag.FlagSet, o *generator.Options) {
	fs.StringVar(&o.WebhookPath, "path", generator.DefaultWebhookPath, "webhook path: the production URL is /webhook/`PATH`")
	fs.StringVar(&o.WorkflowName, "name", generator.DefaultWorkflowName, "workflow `name` shown in n8n")
	fs.StringVar(&o.EventsTable, "events-table", generator.DefaultEventsTable, "`table` of reserved keys (table or schema.table)")
	fs.StringVar(&o.BusinessTable, "business-table", generator.DefaultBusinessTable, "`table` of the example business step")
	fs.StringVar(&o.CredentialName, "credential", generator.DefaultCredentialName, "`name` of the n8n Postgres credential the nodes use")
	fs.Func("retention", "how long cleanup keeps keys, a `DURATION` such as 30d or 720h (default 30d)", func(s string) error {
		d, err := parseDays(s)
		o.Retention = d
		return err
	})
	fs.Func("hashing", "how the workflow builds the key, a `MODE`: code-node (default), crypto-node or keysvc", func(s string) error {
		o.Hashing = generator.Hashing(s)
		return nil
	})
	fs.Func("guard", "how the key is held while the business step runs, a `MODE`: reserve (default) or lease", func(s string) error {
		o.Guard = generator.Guard(s)
		return nil
	})
	fs.StringVar(&o.KeysvcURL, "keysvc-url", generator.DefaultKeysvcURL, "keysvc's base `URL` as n8n reaches it (--hashing keysvc)")
	fs.StringVar(&o.KeysvcCredential, "keysvc-credential", "", "`name` of an n8n Bearer Auth credential holding keysvc's token (--hashing keysvc)")
	fs.StringVar(&o.Verify, "verify", "", "check this `PROVIDER`'s signature before reserving: stripe, github, shopify, slack (standardwebhooks with --hashing keysvc)")
	fs.StringVar(&o.VerifyCredential, "verify-credential", generator.DefaultVerifyCredential, "`name` of the n8n Crypto credential whose HMAC secret is the signing secret")
	fs.DurationVar(&o.Tolerance, "tolerance", generator.DefaultTolerance, "how far a signed timestamp may be from now, both ways")
	fs.StringVar(&o.Preset, "preset", "", "where the event id is read, a `PROVIDER` preset (default: the --verify provider)")
	fs.StringVar(&o.Scope, "scope", "", "`scope` that prefixes a preset's key (letters, digits, '.', '_', '-')")
	fs.Func("lease", "in lease mode, how long an attempt holds the key, a `DURATION` such as 90s or 5m (default 5m)", func(s string) error {
		d, err := parseDays(s)
		o.Lease = d
		return err
	})
}

// parseDays parses a Go duration, plus a whole number of days as "30d".
func parseDays(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days <= 0 {
			return 0, errors.New("want a positive number of days such as 30d")
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("want a duration such as 30d, 720h or 90s")
	}
	return d, nil
}

func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s\n\nOptions:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args and maps the outcome to an exit code; ok is false when
// the command must stop with that code.
func parse(fs *flag.FlagSet, args []string, stdout io.Writer) (code int, ok bool) {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout)
		fs.Usage()
		return exitOK, false
	}
	if err != nil {
		return exitUsage, false // the flag package has printed the reason
	}
	return exitOK, true
}

func runGenerate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("generate", "idemhook generate --out DIR [options]", stderr)
	var o generator.Options
	out := fs.String("out", "", "`directory` to write the files into (created if missing; required)")
	optionFlags(fs, &o)
	if code, ok := parse(fs, args, stdout); !ok {
		return code
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
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintf(stderr, "idemhook generate: %v\n", err)
		return exitFail
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		path := filepath.Join(*out, name)
		if err := os.WriteFile(path, files[name], 0o644); err != nil {
			fmt.Fprintf(stderr, "idemhook generate: %v\n", err)
			return exitFail
		}
		fmt.Fprintln(stdout, "wrote", path)
	}
	return exitOK
}

func runSchema(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("schema", "idemhook schema [options]", stderr)
	var o generator.Options
	optionFlags(fs, &o)
	if code, ok := parse(fs, args, stdout); !ok {
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

func runKey(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("key", "idemhook key [FILE]\n\nPrints the idempotency key of a webhook body (docs/key-spec.md); reads stdin without FILE.", stderr)
	if code, ok := parse(fs, args, stdout); !ok {
		return code
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
	k, err := eventkey.Derive(body)
	if err != nil {
		fmt.Fprintf(stderr, "idemhook key: %s: %v\n", name, err)
		return exitUsage
	}
	fmt.Fprintln(stdout, k.Value)
	return exitOK
}
